"""Test-session environment: no model hub, and torch threads that yield the CPU when idle.

Set before anything imports torch: OMP_WAIT_POLICY only takes effect at torch's first import, and on a
2-core machine spinning OpenMP threads slow generation 5-10x when other processes (servers, fakes) run.
"""

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_server import RedisServer, redis_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The default embedded model ships in parts that daari joins into its models dir (~500 MB, SHA-256 checked):
# once per machine for the whole suite, not once per test server's data dir.
os.environ.setdefault("DAARI_MODELS_DIR", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "daari-test-models"))



class _LoggerTable(dict[str, object]):
    """The logging module's table of loggers, whose `values()` is a copy taken at once. pytest's log capture
    walks that table before each test phase without logging's lock, while a model load that outlived an earlier
    test's server (a worker thread cannot be cancelled) imports modules that add loggers: "dictionary changed size
    during iteration", an error in an unrelated test's setup (seen once in CI)."""

    def values(self) -> list[object]:  # type: ignore[override]
        return list(super().values())  # one C call under the GIL: no thread can add a logger midway


logging.Logger.manager.loggerDict = _LoggerTable(logging.Logger.manager.loggerDict)  # type: ignore[assignment]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh real redis-server on a free loopback port for one test (skipped only when the binary is missing)."""
    with redis_server(tmp_path / "redis") as server:
        yield server


# Property tests (tests/test_fuzz_*.py): few examples in `make test`, many in `make fuzz`
# (HYPOTHESIS_PROFILE=fuzz). No deadline: the machine is shared, and time is not what they check.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("default", max_examples=40, deadline=None, derandomize=False,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.register_profile("fuzz", parent=settings.get_profile("default"), max_examples=400)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
