"""Where the embedding's onnxruntime threads run (daari/semantic/onnx_threads.py): the layout from the CPU topology,
the calling thread pinned beside the workers only for a run, and the real session placed that way with the same
vectors as onnxruntime's default."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from daari.models import minilm_dir, models_dir
from daari.semantic import minilm_onnx
from daari.semantic.minilm import load_minilm
from daari.semantic.onnx_threads import DEFAULTS, ThreadLayout, caller_pinned, thread_layout

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")


def topology(cores: dict[int, tuple[str, str]]) -> Callable[[int, str], str]:
    """A /sys topology: logical CPU -> (physical package, core)."""
    def read(cpu: int, field: str) -> str:
        package, core = cores[cpu]
        return package if field == "physical_package_id" else core
    return read


def test_a_worker_per_core_but_the_first_and_the_caller_on_the_first() -> None:
    two = topology({0: ("0", "0"), 1: ("0", "1")})
    assert thread_layout({0, 1}, two) == ThreadLayout(2, "2", frozenset({0}))  # onnxruntime's ids are 1-based
    # Hyperthreads: logical CPUs 0 and 2 share core 0, 1 and 3 core 1; both of a core go to the same thread.
    smt = topology({0: ("0", "0"), 1: ("0", "1"), 2: ("0", "0"), 3: ("0", "1")})
    assert thread_layout({0, 1, 2, 3}, smt) == ThreadLayout(2, "2,4", frozenset({0, 2}))
    # Two packages with the same core ids are four cores.
    packages = topology({0: ("0", "0"), 1: ("0", "1"), 2: ("1", "0"), 3: ("1", "1")})
    assert thread_layout({0, 1, 2, 3}, packages) == ThreadLayout(4, "2;3;4", frozenset({0}))


def test_only_the_cpus_the_process_may_use_count() -> None:
    four = topology({cpu: ("0", str(cpu)) for cpu in range(4)})
    assert thread_layout({2, 3}, four) == ThreadLayout(2, "4", frozenset({2}))  # e.g. under `taskset -c 2,3`


def test_one_core_or_no_topology_keeps_onnxruntimes_defaults() -> None:
    assert thread_layout({0}, topology({0: ("0", "0")})) == DEFAULTS == ThreadLayout(0, None, None)
    smt_one_core = topology({0: ("0", "0"), 1: ("0", "0")})
    assert thread_layout({0, 1}, smt_one_core) == DEFAULTS

    def unreadable(cpu: int, field: str) -> str:
        raise FileNotFoundError(f"/sys/devices/system/cpu/cpu{cpu}/topology/{field}")

    assert thread_layout({0, 1, 2}, unreadable) == DEFAULTS  # a container without /sys


def in_a_thread(fn: Callable[[], object]) -> object:
    """`fn()` on a fresh thread (affinity is per thread: the test's own thread is never moved)."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join(30)
    return result[0]


@linux_only
def test_the_caller_is_pinned_only_inside_the_block_and_put_back_even_on_an_error() -> None:
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("needs two CPUs to pin one")
    first = frozenset({min(allowed)})

    def pinned_then_after() -> tuple[set[int], set[int], set[int]]:
        with caller_pinned(first):
            inside = os.sched_getaffinity(0)
        try:
            with caller_pinned(first):
                raise ValueError("the run failed")
        except ValueError:
            pass
        return inside, os.sched_getaffinity(0), allowed

    inside, after, before = in_a_thread(pinned_then_after)  # type: ignore[misc]
    assert inside == set(first) and after == before


@linux_only
def test_a_caller_kept_elsewhere_by_its_owner_is_not_moved() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")

    def kept_on_the_last() -> set[int]:
        os.sched_setaffinity(0, {allowed[-1]})
        with caller_pinned(frozenset({allowed[0]})):
            return os.sched_getaffinity(0)

    assert in_a_thread(kept_on_the_last) == {allowed[-1]}


@linux_only
def test_the_embedding_session_places_its_worker_where_the_layout_says_with_the_same_vectors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reverse of this machine's layout (the worker on the lowest CPU, the caller on the next), so that
    onnxruntime's own default placement (its worker on the second core) cannot pass for it."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    reverse = ThreadLayout(2, str(allowed[0] + 1), frozenset({allowed[1]}))
    monkeypatch.setattr(minilm_onnx, "process_layout", lambda: reverse)
    model = load_minilm()
    batch = model.encode_window(["user: How do I list Docker containers?",
                                 "user: " + "merge two dictionaries and keep the larger value; " * 60])
    # The exported file daari's session was made from (the suite shares one models dir: tests/conftest.py).
    path = models_dir(Path(".")) / f"all-MiniLM-L6-v2-{minilm_onnx.model_key(minilm_dir())}.onnx"
    assert model.session is not None and path.is_file()
    threads_before = set(os.listdir("/proc/self/task"))
    placed = minilm_onnx.session(path)  # threads None: the layout's
    workers = set(os.listdir("/proc/self/task")) - threads_before
    assert workers and all(os.sched_getaffinity(int(tid)) == {allowed[0]} for tid in workers)
    vectors = in_a_thread(lambda: minilm_onnx.run(placed, batch))
    reference = minilm_onnx.run(minilm_onnx.session(path, threads=0), batch)  # onnxruntime's own default
    assert np.array_equal(vectors, reference)  # bit for bit


class RecordingSession:
    """Stands in for an onnxruntime session: records the calling thread's CPUs while it runs."""

    def __init__(self) -> None:
        self.cpus: set[int] = set()

    def run(self, outputs: object, feeds: dict[str, object]) -> list[np.ndarray]:
        self.cpus = os.sched_getaffinity(0)
        return [np.zeros((1, 384), dtype=np.float32)]


@linux_only
def test_a_run_pins_its_caller_to_the_layouts_cpus_and_puts_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(minilm_onnx, "process_layout", lambda: ThreadLayout(2, "2", frozenset({allowed[1]})))
    session = RecordingSession()
    batch = {name: [[101, 102]] for name in minilm_onnx.INPUTS}
    after = in_a_thread(lambda: (minilm_onnx.run(session, batch), os.sched_getaffinity(0))[1])
    assert session.cpus == {allowed[1]} and after == set(allowed)
