"""`python -m bench.fake_upstream --kind openai|ollama|anthropic --port N [--token-delay S] [--content-length]`: a
test fake, served.

The fakes are the ones the tests use (tests/fakes/), served by Hypercorn's trio worker on 127.0.0.1 until
SIGTERM/SIGINT. The OpenAI fake's whole answers carry no Content-Length, so Hypercorn sends them chunked in three
writes (head, body, the terminal chunk); `--content-length` adds the header to a body sent in one message, as
vLLM, llama.cpp's server and Ollama frame a whole answer (Hypercorn still writes head and body apart: two writes).
"""

from __future__ import annotations

import argparse
import gc
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


class WithLength:
    """ASGI middleware: a response whose body comes in one message gets a Content-Length (its start is held until
    the body is there)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        held: dict[str, Any] | None = None

        async def sending(message: dict[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                held = message
                return
            if held is not None:
                start, held = held, None
                headers = list(start.get("headers", ()))
                if message["type"] == "http.response.body" and not message.get("more_body", False) and not any(
                        name.lower() == b"content-length" for name, _ in headers):
                    headers.append((b"content-length", str(len(message.get("body", b""))).encode()))
                await send({**start, "headers": headers})
            await send(message)

        await self.app(scope, receive, sending)


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
    parser.add_argument("--content-length", action="store_true",
                        help="a body sent in one message goes with its Content-Length (head and body in one write)")
    parser.add_argument("--no-gc", action="store_true",
                        help="no cyclic garbage collection (bench/stream_relay.py's held streams: the direct row is "
                        "then the pacing, not this fake's collector pausing every stream)")
    args = parser.parse_args()
    if args.no_gc:
        gc.disable()  # refcounting still frees all but cycles, and a benchmark's fake lives for minutes
    fake = make_fake(args.kind, args.token_delay)
    trio.run(serve_until_signalled, WithLength(fake) if args.content_length else fake, args.port)


if __name__ == "__main__":
    main()
