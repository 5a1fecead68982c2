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
