"""The response store: SQLite in the data dir, pruned to `keep`, read from a worker thread."""

from __future__ import annotations

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
        store.put(f"resp_{n}", stored(n))
    assert store.get("resp_0") is None and store.get("resp_1") is None
    assert store.get("resp_4") == stored(4)
    assert store.delete("resp_3") and not store.delete("resp_3")
    store.close()
    reopened = ResponseStore(tmp_path / "responses.sqlite", keep=3)
    assert reopened.get("resp_2") == stored(2) and reopened.get("resp_3") is None


def test_history_puts_the_stored_turn_before_the_new_input() -> None:
    body = with_history({"model": "m", "input": "and then?", "previous_response_id": "resp_1"}, stored(1))
    assert body["input"] == [{"type": "message", "role": "user", "content": "q1"}, {"type": "message", "n": 1},
                             {"type": "message", "role": "user", "content": "and then?"}]
    assert input_items(None) == [] and input_items([{"a": 1}, "junk"]) == [{"a": 1}]


async def test_archive_runs_the_store_in_a_worker_thread(tmp_path: Path) -> None:
    archive = ResponseArchive(tmp_path / "data" / "responses.sqlite", keep=10)
    assert await archive.get("resp_1") is None
    await archive.put("resp_1", stored(1))
    assert await archive.get("resp_1") == stored(1)
    assert await archive.delete("resp_1") and await archive.get("resp_1") is None
    archive.close()


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
    ResponseStore(path, keep=3).put("resp_1", stored(1))
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
