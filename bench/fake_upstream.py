"""`python -m bench.fake_upstream --kind openai|ollama|anthropic --port N [--token-delay S]`: a test fake, served.

The fakes are the ones the tests use (tests/fakes/), served by Hypercorn's trio worker on 127.0.0.1 until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import signal
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI


def make_fake(kind: str, token_delay_s: float) -> Any:
    fake: FakeOpenAI | FakeOllama | FakeAnthropic = \
        FakeOpenAI() if kind == "openai" else FakeAnthropic() if kind == "anthropic" else FakeOllama()
    fake.token_delay_s = token_delay_s
    fake.requests = _Forgetful()  # a long benchmark must not grow the request log without bound
    return fake


class _Forgetful(list[Any]):
    """A list that keeps only the last request (the fakes append every request they see)."""

    def append(self, item: Any) -> None:
        self[:] = [item]


async def _stop_on_signal(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            shutdown.set()
            return


async def serve_until_signalled(app: Any, port: int) -> None:
    config = HypercornConfig()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.5
    config.keep_alive_timeout = 75
    config.backlog = 1024  # as daari's server.backlog: hundreds of streams opened at once are not reset
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, shutdown)
        await serve(app, config, shutdown_trigger=shutdown.wait)
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=("openai", "ollama", "anthropic"), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-delay", type=float, default=0.0, help="seconds before each generated chunk")
    args = parser.parse_args()
    trio.run(serve_until_signalled, make_fake(args.kind, args.token_delay), args.port)


if __name__ == "__main__":
    main()
