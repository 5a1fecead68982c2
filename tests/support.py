"""Run a real daari (actors + Hypercorn, or the h11 front end with DAARI_TEST_FRONT_END=h11, on 127.0.0.1, port 0)
inside a Trio test or in a thread."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from daari.config import Config, config_from_dict
from daari.pipeline.shortcuts import ShortcutTier
from daari.server.serve import RunningServer, run_server

FRONT_END_ENV = "DAARI_TEST_FRONT_END"  # "h11": every test's daari uses the h11 front end


def make_config(tmp_path: Path, **sections: Any) -> Config:
    # Shadow sampling off unless a test asks for it: at its default rate (2% of hits) a background call to the
    # upstream would land in a random test's count of upstream requests.
    data: dict[str, Any] = {"server": {"port": 0, "grace_period_s": 2}, "data_dir": str(tmp_path / "data"),
                            "trust": {"shadow": {"rate": 0.0}}}
    if os.environ.get(FRONT_END_ENV):  # run any server test under the other front end (docs/configuration.md)
        data["server"]["front_end"] = os.environ[FRONT_END_ENV]
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return config_from_dict(data)


def daari_meta(response: httpx.Response) -> dict[str, Any]:
    """A 200 answer's `daari_meta` (the body's, OpenAI or Anthropic shape)."""
    assert response.status_code == 200, response.text
    meta: dict[str, Any] = response.json()["daari_meta"]
    return meta


def upstream_tier(kind: str, base_url: str, model: str | None = None, **extra: Any) -> dict[str, Any]:
    tier: dict[str, Any] = {"executor": kind, "base_url": base_url, **extra}
    if model is not None:
        tier["model"] = model
    return tier


@asynccontextmanager
async def daari_server(config: Config, shortcuts: Mapping[str, ShortcutTier] | None = None
                       ) -> AsyncIterator[RunningServer]:
    """`shortcuts` replaces shortcut tiers by name (a test double of L1, say), wired in at start."""
    async with trio.open_nursery() as nursery:
        server: RunningServer = await nursery.start(partial(run_server, config, shortcuts=shortcuts))
        yield server
        nursery.cancel_scope.cancel()


@contextmanager
def daari_in_thread(config: Config, shortcuts: Mapping[str, ShortcutTier] | None = None
                    ) -> Iterator[RunningServer]:
    """For sync clients (the openai/anthropic SDKs): daari on its own Trio loop in a thread."""
    with daari_loop_in_thread(config, shortcuts) as (server, _):
        yield server


@contextmanager
def daari_loop_in_thread(config: Config, shortcuts: Mapping[str, ShortcutTier] | None = None
                         ) -> Iterator[tuple[RunningServer, trio.lowlevel.TrioToken]]:
    """As `daari_in_thread`, with the token of daari's Trio loop (to run a function on it from the test)."""
    box: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> None:
        with trio.CancelScope() as scope:
            box["scope"], box["token"] = scope, trio.lowlevel.current_trio_token()
            try:
                async with trio.open_nursery() as nursery:
                    box["server"] = await nursery.start(partial(run_server, config, shortcuts=shortcuts))
                    ready.set()
            except BaseException as exc:  # surface start-up failures to the test thread
                box["error"] = exc
                ready.set()
                raise

    thread = threading.Thread(target=lambda: _run_quietly(main), daemon=True)
    thread.start()
    if not ready.wait(120) or "error" in box:
        raise RuntimeError(f"daari did not start: {box.get('error')!r}")
    try:
        yield box["server"], box["token"]
    finally:
        box["token"].run_sync_soon(box["scope"].cancel)
        thread.join(10)


def _run_quietly(main: Any) -> None:
    try:
        trio.run(main)
    except BaseException:  # already reported through box["error"]
        pass


def tasks_named(name: str) -> int:
    """Tasks of the running Trio run with this name, system tasks included (to see a task started or ended)."""
    count, todo = 0, [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        count += task.name == name
        todo.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return count
