"""The long-lived heap is frozen once per reason: at server start and after a model loads."""

from __future__ import annotations

import gc
from pathlib import Path

from daari import heap
from tests.support import daari_server, make_config


def test_a_freeze_collects_then_freezes_once_per_reason() -> None:
    alive = {"kept": True}
    assert heap.freeze_long_lived("test: first")
    assert not any(o is alive for o in gc.get_objects())  # in the permanent generation, which no pass walks
    frozen = gc.get_freeze_count()
    assert not heap.freeze_long_lived("test: first")  # a second server in this process pins nothing more
    assert gc.get_freeze_count() == frozen


async def test_a_starting_server_freezes_its_start_up_heap(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)):
        assert "server start" in heap._done
        assert gc.get_freeze_count() > 0
