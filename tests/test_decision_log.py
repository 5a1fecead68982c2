"""The decision log through a running daari: one row per request, prompts per `log.prompts`, no secrets;
the writer drops (and counts) rows rather than slowing anyone."""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from actors.decision_log import DecisionLogActor, DecisionQueue
from actors.faults import FAULTS
from actors.hub import Hub
from actors.runtime import ActorStatus, Mailbox, supervise
from daari.observe.decision_log import read_rows
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CANARY_KEY = "sk-canary-7f3a9c1e5b"


def log_rows(data_dir: Path) -> list[dict[str, Any]]:
    return read_rows(data_dir / "decisions.sqlite", 0)


async def rows_when(data_dir: Path, count: int) -> list[dict[str, Any]]:
    with trio.fail_after(10):
        while len(rows := await trio.to_thread.run_sync(log_rows, data_dir)) < count:
            await trio.sleep(0.02)
    return rows


@pytest.mark.parametrize(("policy", "hashed", "text"), [("none", False, False), ("hash", True, False),
                                                        ("full", True, True)])
async def test_every_request_gets_a_row_and_prompts_follow_the_policy(tmp_path: Path, policy: str, hashed: bool,
                                                                      text: bool) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             log={"prompts": policy})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            for content in ("explain rebase", "explain rebase"):
                response = await client.post("/v1/chat/completions", headers={"user-agent": "aider/0.86"}, json={
                    "model": "good", "messages": [{"role": "user", "content": content}]})
                assert response.status_code == 200
            refused = await client.post("/v1/chat/completions", json={"model": "good", "messages": "nope"})
            rows = await rows_when(tmp_path / "data", 3)
    assert refused.status_code == 400
    first, hit, bad = rows
    assert (first["tier"], first["cache"], hit["tier"], hit["cache"]) == ("L3", "miss", "L0", "hit")
    assert first["client"] == "aider" and first["protocol"] == "openai" and first["model"] == "good"
    assert first["latency_ms"] > 0 and first["ttft_ms"] is not None and first["task_type"]
    assert bad["status"] == 400 and bad["error"] and bad["tier"] is None
    assert (first["prompt_hash"] is not None) is hashed and (first["prompt_hash"] == hit["prompt_hash"])
    assert (first["prompt"] == "explain rebase") is text and (first["prompt"] is None) is not text
    assert hit["request_id"] == response.headers["x-daari-request-id"]


async def test_canary_keys_appear_in_no_output(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Keys sent by clients (header) and configured for tiers (env, URL) never reach the log, the tail,
    metrics labels, the report or error bodies."""
    fake = FakeOpenAI()
    env_key = CANARY_KEY + "-env"
    url_key = CANARY_KEY + "-url"
    import os

    os.environ["DAARI_TEST_CANARY_KEY"] = env_key
    try:
        async with serve_app(fake) as upstream:
            tier = upstream_tier("openai", upstream.replace("http://", f"http://user:{url_key}@") + "/v1",
                                 api_key_env="DAARI_TEST_CANARY_KEY")
            config = make_config(tmp_path, tiers={"L3": tier}, log={"prompts": "hash"})
            from trio_websocket import open_websocket_url

            async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
                async with open_websocket_url(server.url.replace("http", "ws") + "/v1/daari/tail") as tail:
                    with trio.fail_after(10):
                        while server.parts.tail.open < 1:
                            await trio.sleep(0.01)
                    outputs = []
                    for headers in ({"authorization": f"Bearer {CANARY_KEY}"}, {"x-api-key": CANARY_KEY}):
                        response = await client.post("/v1/chat/completions", headers=headers, json={
                            "model": "good", "messages": [{"role": "user", "content": "hello there"}]})
                        outputs.append(response.text)
                        outputs.append(await tail.get_message())
                    bad = await client.post("/v1/chat/completions", headers={"x-api-key": CANARY_KEY},
                                            json={"model": "good", "messages": [{"role": "user"}]})
                    outputs.append(bad.text)
                    for path in ("/metrics", "/v1/daari/report", "/v1/daari/config", "/healthz"):
                        outputs.append((await client.get(path)).text)
                await rows_when(tmp_path / "data", 3)
    finally:
        del os.environ["DAARI_TEST_CANARY_KEY"]
    outputs.append(caplog.text)
    for file in (tmp_path / "data").rglob("*"):
        if file.is_file():
            outputs.append(file.read_bytes().decode("latin-1"))
    leaks = [o[:200] for o in outputs if CANARY_KEY in o]
    assert not leaks
    assert fake.requests  # the keys were in use: the upstream was called with them


async def test_a_writer_that_falls_behind_drops_rows_and_counts_them(tmp_path: Path) -> None:
    hub: Hub[Row] = Hub()
    dropped: list[int] = []
    lag_over = trio.Event()

    def on_dropped(count: int) -> None:
        dropped.append(count)
        lag_over.set()  # counted when the log takes its batch: the lag ends there

    queue = DecisionQueue(hub, 16, on_dropped=on_dropped)
    log = DecisionLogActor(queue, tmp_path / "decisions.sqlite", lambda d: d.row(), batch=8, retention_s=3600,
                           max_rows=10_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(supervise, lambda: log, Mailbox("decision_log", 16, FAULTS),
                                    ActorStatus("decision_log")))
        for index in range(100):  # published without a checkpoint: the writer cannot keep up
            hub.publish(Row(f"r{index}"))
        with trio.fail_after(30):
            await lag_over.wait()
        for index in range(100, 110):  # after it re-subscribed: nothing more is lost
            hub.publish(Row(f"r{index}"))
            await trio.lowlevel.checkpoint()
        hub.close()
        while not queue.empty or queue.written + queue.dropped < 110:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    rows = read_rows(tmp_path / "decisions.sqlite", 0)
    assert queue.written == len(rows) and queue.written + sum(dropped) == 110
    assert sum(dropped) > 0 and queue.dropped == sum(dropped)
    assert hub.dropped["decision_log"] == 1  # one lag: the writer counted once as a dropped subscriber
    assert [r["request_id"] for r in rows][-10:] == [f"r{i}" for i in range(100, 110)]


async def test_a_log_that_cannot_be_opened_is_off_and_daari_answers(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "decisions.sqlite").mkdir()  # cannot be opened as a database: the log is off, daari runs
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            answers = [await client.post("/v1/chat/completions", json={
                "model": "good", "messages": [{"role": "user", "content": f"question {i}"}]}) for i in range(2)]
            with trio.fail_after(30):
                while "decision log disabled" not in caplog.text:
                    await trio.sleep(0.05)
            health = await client.get("/healthz")
    assert [a.status_code for a in answers] == [200, 200] and len(fake.requests) == 2
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert (data / "decisions.sqlite").is_dir()  # left as it was


class Row:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id

    def row(self) -> tuple[Any, ...]:  # values in column order, as the writer binds them
        from daari.observe.decision_log import COLUMNS

        return (self.request_id, 1.0, *[None] * (len(COLUMNS) - 2))


def test_pruning_keeps_the_newest_rows_within_age_and_count(tmp_path: Path) -> None:
    from daari.observe.decision_log import DecisionLogStore

    store = DecisionLogStore(tmp_path / "d.sqlite")
    store.insert({"request_id": f"r{i}", "time": float(i)} for i in range(100))
    removed = store.prune(max_age_s=50, max_rows=30, now=100.0)
    kept = [r["request_id"] for r in store.rows_since(0)]
    store.close()
    assert removed == 70 and kept == [f"r{i}" for i in range(70, 100)]
    assert oct((tmp_path / "d.sqlite").stat().st_mode & 0o777) == "0o600"
    conn = sqlite3.connect(tmp_path / "d.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_batch_round_trips_every_column_with_its_type(tmp_path: Path) -> None:
    """A batch is written as a few multi-row statements: values come back exactly, types and NULLs kept, a row
    with the same request id replaces the first, and a batch of any size (64-row statements and the rest) is whole."""
    from daari.observe.decision_log import COLUMNS, DecisionLogStore

    samples: dict[type, list[Any]] = {str: ["a'b\"c", "ünï 🙂", "x" * 3000], float: [0.1, 1e-08, 12345.678901],
                                      int: [0, 1, 2**53]}
    rows = [{column: samples[kind][i] for column, kind in COLUMNS.items()} for i in range(3)]
    for i, row in enumerate(rows):
        row["request_id"], row["time"] = f"r{i}", float(i)
    rows[1]["similarity"] = None
    rows.append({**rows[2], "tier": "L6"})  # the same request id again: replaces the row
    store = DecisionLogStore(tmp_path / "d.sqlite")
    assert store.insert(rows) == 4
    back = store.rows_since(0)
    store.close()
    assert back == [rows[0], rows[1], rows[3]]
    assert all(type(value) is type(rows[0][column]) for column, value in back[0].items())
    store = DecisionLogStore(tmp_path / "d.sqlite")
    many = [{**rows[0], "request_id": f"m{i}", "time": 10.0 + i} for i in range(203)]
    assert store.insert(many) == 203
    assert [r["request_id"] for r in store.rows_since(10)] == [f"m{i}" for i in range(203)]
    store.close()


def test_the_log_file_is_created_private_not_made_private_afterwards(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a create with the default mode and a chmod, another user could open the file and keep reading it:
    it must be 0600 (in a 0700 directory) from the moment it exists."""
    from daari.observe import decision_log

    seen: list[int] = []
    connect = sqlite3.connect

    def watching_connect(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(path, *args, **kwargs)
        conn.execute("pragma user_version")  # SQLite creates the file by now if it was not there
        seen.append(Path(path).stat().st_mode & 0o777)
        return conn

    monkeypatch.setattr(decision_log.sqlite3, "connect", watching_connect)
    store = decision_log.DecisionLogStore(tmp_path / "fresh" / "decisions.sqlite")
    store.close()
    assert seen and seen[0] == 0o600
    assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("name", ["data?dir", "data#dir", "data dir%20"])
def test_rows_are_read_from_a_data_dir_with_uri_characters_in_its_path(tmp_path: Path, name: str) -> None:
    from daari.observe.decision_log import DecisionLogStore

    path = tmp_path / name / "decisions.sqlite"
    store = DecisionLogStore(path)
    store.insert([{"request_id": "r1", "time": 1.0}])
    store.close()
    assert [row["request_id"] for row in read_rows(path, 0)] == ["r1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing opened or created elsewhere
