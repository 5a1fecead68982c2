"""The response store: SQLite in the data dir, pruned to `keep`, read from a worker thread."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from daari.config import config_from_dict
from daari.errors import ConfigError
from daari.responses.history import input_items, with_history
from daari.responses.store import ResponseArchive, ResponseStore, StoredResponse


def stored(n: int) -> StoredResponse:
    return StoredResponse({"id": f"resp_{n}", "output": [{"type": "message", "n": n}]},
                          [{"type": "message", "role": "user", "content": f"q{n}"}])


def test_keeps_the_newest_and_survives_a_reopen(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "responses.sqlite", keep=3)
    for n in range(5):
        store.put(f"resp_{n}", stored(n), "")
    assert store.get("resp_0", "") is None and store.get("resp_1", "") is None
    assert store.get("resp_4", "") == stored(4)
    assert store.delete("resp_3", "") and not store.delete("resp_3", "")
    store.close()
    reopened = ResponseStore(tmp_path / "responses.sqlite", keep=3)
    assert reopened.get("resp_2", "") == stored(2) and reopened.get("resp_3", "") is None


def test_history_puts_the_stored_turn_before_the_new_input() -> None:
    body = with_history({"model": "m", "input": "and then?", "previous_response_id": "resp_1"}, stored(1))
    assert body["input"] == [{"type": "message", "role": "user", "content": "q1"}, {"type": "message", "n": 1},
                             {"type": "message", "role": "user", "content": "and then?"}]
    assert input_items(None) == [] and input_items([{"a": 1}, "junk"]) == [{"a": 1}]


async def test_archive_runs_the_store_in_a_worker_thread(tmp_path: Path) -> None:
    archive = ResponseArchive(tmp_path / "data" / "responses.sqlite", keep=10)
    assert await archive.get("resp_1", "") is None
    await archive.put("resp_1", stored(1), "")
    assert await archive.get("resp_1", "") == stored(1)
    assert await archive.delete("resp_1", "") and await archive.get("resp_1", "") is None
    archive.close()


def test_a_row_is_found_only_from_its_own_partition(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "responses.sqlite", keep=10)
    store.put("resp_1", stored(1), "part_a")
    assert store.get("resp_1", "part_b") is None and store.get("resp_1", "") is None
    assert not store.delete("resp_1", "part_b") and not store.delete("resp_1", "")
    assert store.get("resp_1", "part_a") == stored(1)
    assert store.delete("resp_1", "part_a") and store.get("resp_1", "part_a") is None


def test_a_store_from_before_partitions_is_migrated_and_its_rows_are_shared(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    old = sqlite3.connect(path)  # the schema as daari wrote it before responses were partitioned
    old.execute("create table responses (id text primary key, created_at real, response text, input text)")
    old.execute("insert into responses values (?, ?, ?, ?)",
                ("resp_old", 1.0, json.dumps(stored(1).response), json.dumps(stored(1).input_items)))
    old.commit()
    old.close()
    store = ResponseStore(path, keep=10)
    assert store.get("resp_old", "part_a") is None
    assert store.get("resp_old", "") == stored(1)
    store.put("resp_new", stored(2), "part_a")
    assert store.get("resp_new", "part_a") == stored(2) and store.get("resp_new", "") is None
    store.close()
    reopened = ResponseStore(path, keep=10)  # a second open finds the column and leaves the rows alone
    assert reopened.get("resp_old", "") == stored(1) and reopened.get("resp_new", "part_a") == stored(2)


@pytest.mark.parametrize(("data", "message"), [
    ({"responses": {"keep": 0}}, "responses.keep: "),
    ({"tiers": {"L3": {"executor": "ollama", "base_url": "http://x", "wire_api": "responses"}}},
     "tiers.L3: wire_api 'responses' is for executor 'openai' only"),
    ({"tiers": {"L3": {"executor": "openai", "base_url": "http://x", "wire_api": "grpc"}}}, "tiers.L3.wire_api: "),
])
def test_responses_config_mistakes_name_their_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict(data)
    assert str(caught.value).startswith(message)


def test_the_store_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "responses.sqlite"
    ResponseStore(path, keep=3).put("resp_1", stored(1), "")
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700


TURN = "x" * 2000  # a turn's text: large enough that copies of the history would dominate the file


def chain(store: ResponseStore, length: int, partition: str = "", prefix: str = "resp_"
          ) -> list[list[dict[str, Any]]]:
    """`length` chained responses; returns each one's whole input as a client would see it."""
    history: list[dict[str, Any]] = []
    inputs = []
    previous: str | None = None
    for n in range(length):
        own = [{"type": "message", "role": "user", "content": f"question {n} {TURN}"}]
        response = {"id": f"{prefix}{n}", "output": [{"type": "message", "content": f"answer {n} {TURN}"}]}
        whole = history + own
        store.put(f"{prefix}{n}", StoredResponse(response, whole, previous_id=previous, own_from=len(history)),
                  partition)
        inputs.append(whole)
        history, previous = whole + response["output"], f"{prefix}{n}"
    return inputs


def stored_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("select sum(length(input) + length(response)) from responses").fetchone()[0])
    finally:
        conn.close()


def test_a_chain_stores_each_turn_once(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    store = ResponseStore(path, keep=1000)
    inputs = chain(store, 40)
    got = store.get("resp_39", "")
    assert got is not None and got.input_items == inputs[39] and got.response["id"] == "resp_39"
    assert store.get("resp_7", "") is not None and store.get("resp_7", "").input_items == inputs[7]  # type: ignore[union-attr]
    store.close()
    # Each turn's question and answer once (~4 KB a turn), not the history again in every row (~80 KB by turn 40).
    assert stored_bytes(path) < 40 * 2 * len(TURN) * 1.2


def test_pruning_keeps_each_partitions_own_newest(tmp_path: Path) -> None:
    """One credential's traffic never evicts another's previous_response_id targets."""
    store = ResponseStore(tmp_path / "responses.sqlite", keep=3)
    for n in range(3):
        store.put(f"resp_a{n}", stored(n), "part_a")
    for n in range(5):
        store.put(f"resp_b{n}", stored(n), "part_b")
    assert all(store.get(f"resp_a{n}", "part_a") is not None for n in range(3))
    assert [n for n in range(5) if store.get(f"resp_b{n}", "part_b") is not None] == [2, 3, 4]


def test_past_the_total_the_largest_partition_gives_way(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "responses.sqlite", keep=5, keep_total=8)
    for n in range(5):
        store.put(f"resp_a{n}", stored(n), "part_a")
    for n in range(4):
        store.put(f"resp_b{n}", stored(n), "part_b")
    assert [n for n in range(5) if store.get(f"resp_a{n}", "part_a") is not None] == [1, 2, 3, 4]
    assert all(store.get(f"resp_b{n}", "part_b") is not None for n in range(4))


def test_a_chain_keeps_its_history_when_its_first_turns_are_pruned_or_deleted(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "responses.sqlite", keep=3)
    inputs = chain(store, 5)
    assert store.get("resp_0", "") is None and store.get("resp_1", "") is None  # pruned: past keep
    for n in (2, 3, 4):
        assert store.get(f"resp_{n}", "").input_items == inputs[n]  # type: ignore[union-attr]
    assert store.delete("resp_3", "")  # the middle of the chain
    assert store.get("resp_3", "") is None
    assert store.get("resp_4", "").input_items == inputs[4]  # type: ignore[union-attr]


def test_a_response_whose_previous_went_meanwhile_is_stored_whole(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "responses.sqlite", keep=10)
    whole = [{"type": "message", "role": "user", "content": "q0"}, {"type": "message", "content": "a0"},
             {"type": "message", "role": "user", "content": "q1"}]
    store.put("resp_1", StoredResponse({"id": "resp_1", "output": []}, whole, previous_id="resp_gone", own_from=2),
              "")
    assert store.get("resp_1", "").input_items == whole  # type: ignore[union-attr]


async def test_the_archive_is_closed_when_daari_stops(tmp_path: Path) -> None:
    """A closed SQLite connection checkpoints its WAL and removes it; an open one at exit leaves it behind."""
    import httpx

    from tests.fakes.openai_upstream import FakeOpenAI
    from tests.fakes.serving import serve_app
    from tests.support import daari_server, make_config, upstream_tier

    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            created = await client.post("/v1/responses", json={"model": "good", "input": "remember me"})
            assert created.status_code == 200
            assert (tmp_path / "data" / "responses.sqlite-wal").exists()
    assert not (tmp_path / "data" / "responses.sqlite-wal").exists()
    reopened = ResponseStore(tmp_path / "data" / "responses.sqlite", keep=10)
    assert reopened.get(created.json()["id"], "") is not None


def test_rows_written_by_an_older_daari_count_toward_keep(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    old = sqlite3.connect(path)  # the schema before chains and row counts: every row whole
    old.execute("create table responses (id text primary key, created_at real, response text, input text, "
                "owner text not null default '')")
    old.executemany("insert into responses values (?, ?, ?, ?, '')",
                    [(f"resp_{n}", float(n), json.dumps(stored(n).response), json.dumps(stored(n).input_items))
                     for n in range(5)])
    old.commit()
    old.close()
    store = ResponseStore(path, keep=3)
    store.put("resp_5", stored(5), "")
    assert [n for n in range(6) if store.get(f"resp_{n}", "") is not None] == [3, 4, 5]
    assert store.get("resp_4", "") == stored(4)
