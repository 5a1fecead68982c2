"""L0 rows carry a checksum of their key and completion, checked on every read: a row damaged on disk is a
miss (said in the log), never a truncated or altered answer; a store written before checksums keeps working."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from daari.cache.l0_store import L0Entry, L0Store
from daari.protocol.chat import Completion


def store_two(path: Path) -> None:
    store = L0Store(path)
    store.write([("k1", L0Entry(Completion(text="the whole answer, " * 20), tier="L3")),
                 ("k2", L0Entry(Completion(text="another answer"), tier="L3"))], {})
    store.close()


@pytest.mark.parametrize("damage", [
    "update l0 set completion = substr(completion, 1, length(completion) / 2) where key = 'k1'",  # torn
    "update l0 set completion = replace(completion, 'whole', 'WHOLE') where key = 'k1'",  # still valid JSON
    "update l0 set checksum = 'x' where key = 'k1'",
    "update l0 set key = 'k1', checksum = (select checksum from l0 where key = 'k2') where key = 'k1'",
])
def test_an_entry_damaged_on_disk_is_a_miss_not_a_broken_answer(tmp_path: Path, damage: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "l0.sqlite"
    store_two(path)
    with sqlite3.connect(path) as conn:
        conn.execute(damage)
    store = L0Store(path)
    reader = store.reader()
    with caplog.at_level(logging.WARNING, logger="daari.cache"):
        assert store.get("k1") is None
        assert reader.get("k1") is None
    assert "checksum" in caplog.text
    second = store.get("k2")
    assert second is not None and second.completion.text == "another answer"  # the rest still served
    store.put("k1", L0Entry(Completion(text="fresh"), tier="L3"))  # a new answer replaces the damaged row
    fresh = reader.get("k1")
    assert fresh is not None and fresh.completion.text == "fresh"
    reader.close()
    store.close()


def test_a_store_written_before_checksums_is_summed_at_open_and_served(tmp_path: Path) -> None:
    path = tmp_path / "l0.sqlite"
    store_two(path)
    with sqlite3.connect(path) as conn:  # what an older daari left: no checksum column
        conn.execute("alter table l0 drop column checksum")
    store = L0Store(path)
    first = store.get("k1")
    assert first is not None and first.completion.text.startswith("the whole answer")
    store.close()
