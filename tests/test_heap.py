"""The long-lived heap is frozen once per reason: at server start and after a model loads."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

from daari import heap


class Marker:
    """A container the collector tracks (a dict of plain values would not be tracked at all)."""


def frozen(obj: object) -> bool:
    """In the permanent generation, which no collection walks (gc.get_objects lists only the others)."""
    assert gc.is_tracked(obj)
    return not any(o is obj for o in gc.get_objects())


def test_a_freeze_collects_then_freezes_once_per_reason() -> None:
    before = Marker()
    assert heap.freeze_long_lived("test: first")
    assert frozen(before)
    after = Marker()
    assert not heap.freeze_long_lived("test: first")  # a second server in this process pins nothing more
    assert not frozen(after)
    assert heap.freeze_long_lived("test: another reason")
    assert frozen(after)


def test_a_starting_server_freezes_its_start_up_heap(tmp_path: Path) -> None:
    """In a process of its own: a server started earlier in this one (by another test) would have frozen already."""
    script = textwrap.dedent(f"""
        import gc, trio
        from tests.support import daari_server, make_config

        class Marker:
            pass

        async def main():
            made_before = Marker()
            async with daari_server(make_config(__import__("pathlib").Path({str(tmp_path)!r}))):
                made_after = Marker()
                listed = [o for o in gc.get_objects() if o is made_before or o is made_after]
                print(len(listed), listed[0] is made_after if listed else None)

        trio.run(main)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "True"]  # the object from before the start is frozen, the later one not


def test_the_thresholds_hold_while_inside_and_are_put_back() -> None:
    found = gc.get_threshold()
    with heap.collector_thresholds(50_000, 40):
        assert gc.get_threshold() == (50_000, 40, found[2])
    assert gc.get_threshold() == found
    with heap.collector_thresholds(10_000):  # the middle one left as found
        assert gc.get_threshold() == (10_000, *found[1:])
    with heap.collector_thresholds(0, 0):  # 0: Python's own
        assert gc.get_threshold() == found


def test_overlapping_servers_keep_the_largest_asked_and_the_last_out_puts_back_what_it_found() -> None:
    found = gc.get_threshold()
    first, second = heap.collector_thresholds(50_000, 10), heap.collector_thresholds(20_000, 60)
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold()[:2] == (50_000, 60)  # each threshold apart
    first.__exit__(None, None, None)  # not in the order they started: servers stop when they stop
    assert gc.get_threshold()[:2] == (20_000, 60)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == found
