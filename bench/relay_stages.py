"""`python -m bench.relay_stages`: where a relayed stream chunk's CPU goes, stage by stage, in process.

`bench.stream_relay` measures daari's whole CPU per chunk from outside (the kernel's 10 ms accounting tick over a
turn, so ~4 us of resolution and a wide spread on shared cores). This one takes a real stream as the upstream sent
it (the fakes of tests/fakes in their own process, the body's bytes as a client's `recv` calls got them) and runs
daari's per-read code on those same reads in this process, many times, timing each stage with `perf_counter_ns`:

  chunked   the HTTP chunked coding removed (`lean_http.ChunkedBody`)
  sse       + the SSE events split out (the executor's SSE decoding)
  json      + each event's data decoded
  events    + the executor's neutral events built (the whole per-read decode the executor runs)
  render    + each event rendered in the client's protocol (what the live relay writes)

Each row is cumulative (a stage's own cost is the difference from the row above), in us per upstream event
(delta), the fastest of `--repeat` timed passes over the whole stream. The same command runs the code of whatever
tree PYTHONPATH points at, so two trees' figures come from one machine at one time:

    python -m bench.relay_stages                                      # this tree
    python -m bench.relay_stages --pace 0.002 --join 1 --words 200    # paced: one delta a read, as a model sends
    cd /tmp/base && PYTHONPATH=/tmp/base python -m bench.relay_stages # another tree (this file copied in; run it
                                                                      # from there: `-m` puts the current
                                                                      # directory first on sys.path)
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Callable
from typing import Any

from bench.report import Table, machine, print_tables
from bench.servers import HOST, fake_upstream, workdir
from bench.stream_relay import request_of


def capture(url: str, protocol: str, words: int) -> list[bytes]:
    """The response body's bytes (chunked coding included) as successive `recv` calls returned them."""
    route, body, headers = request_of(protocol, words)
    port = int(url.rsplit(":", 1)[1])
    head = (f"POST {route} HTTP/1.1\r\nhost: {HOST}:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
    reads: list[bytes] = []
    with socket.create_connection((HOST, port)) as sock:
        sock.sendall(head + body)
        while data := sock.recv(256 * 1024):
            reads.append(data)
            # the last chunk (the server may keep the connection open; the chunk may come in its own read)
            if (reads[-2][-8:] + data if len(reads) > 1 else data).endswith(b"\r\n0\r\n\r\n"):
                break
    whole = b"".join(reads)
    start = whole.index(b"\r\n\r\n") + 4
    out: list[bytes] = []  # the same read boundaries, the head cut off
    seen = 0
    for data in reads:
        if seen + len(data) > start:
            out.append(data[max(0, start - seen):])
        seen += len(data)
    return out


def _renderer(client: str) -> Any:
    from daari.protocol.anthropic_render import AnthropicStreamRenderer
    from daari.protocol.chat import ChatRequest, Message
    from daari.protocol.openai_render import OpenAIStreamRenderer

    request = ChatRequest([Message("user", "Write a long answer.")], "long", protocol=client,  # type: ignore[arg-type]
                          stream=True)
    if client == "openai":
        return OpenAIStreamRenderer(request, "chatcmpl-bench", 1700000000)
    return AnthropicStreamRenderer(request, "msg_bench")


def stages(upstream: str, client: str) -> dict[str, Callable[[list[bytes]], int]]:
    """Each stage a function over the stream's reads (cumulative); it returns a count, so nothing is skipped."""
    from daari.executors.lean_http import ChunkedBody
    from daari.jsonio import loads
    from daari.protocol.sse import SSEDecoder

    native = upstream == "anthropic" and client == "anthropic"

    def chunked(reads: list[bytes]) -> int:
        body = ChunkedBody()
        return sum(len(body.feed(r)) for r in reads)

    def sse(reads: list[bytes]) -> int:
        body, decoder = ChunkedBody(), SSEDecoder()
        feed = getattr(decoder, "feed_bytes", decoder.feed)
        return sum(len(feed(body.feed(r))) for r in reads)

    def json(reads: list[bytes]) -> int:
        body, decoder, n = ChunkedBody(), SSEDecoder(), 0
        feed = getattr(decoder, "feed_bytes", decoder.feed)
        for r in reads:
            for item in feed(body.feed(r)):
                if item.data[:1] in ("{", b"{"):
                    n += len(loads(item.data))
        return n

    def events(reads: list[bytes], render: bool = False) -> int:
        body, decode, n = ChunkedBody(), _decoder(upstream, native), 0
        renderer = _renderer(client) if render else None
        for r in reads:
            for ev in decode(body.feed(r)):
                n += 1
                if renderer is not None:
                    n += len(renderer.event(ev))
        return n

    return {"chunked": chunked, "sse": sse, "json": json, "events": events,
            "render": lambda reads: events(reads, True)}


def _decoder(upstream: str, native: bool) -> Callable[[bytes], list[Any]]:
    """The executor's per-read decode (its `_relay` loop without the emits): one read's body bytes -> its neutral
    events. A tree whose SSE decoder has `feed_bytes` runs it as its executors do (the data parsed as bytes)."""
    from daari.jsonio import loads
    from daari.protocol.anthropic_render import AnthropicEventDecoder, decode_json
    from daari.protocol.events import NativeEvent
    from daari.protocol.openai_render import ChunkDecoder
    from daari.protocol.sse import SSEDecoder

    sse = SSEDecoder()
    feed: Callable[[bytes], list[Any]] = getattr(sse, "feed_bytes", sse.feed)
    if upstream == "openai":
        chunks = ChunkDecoder()

        def openai(data: bytes) -> list[Any]:
            out: list[Any] = []
            for event in feed(data):
                if event.data[:1] not in ("{", b"{"):
                    text = event.data if isinstance(event.data, str) else event.data.decode()
                    if not text.strip():
                        continue
                    if text.strip() == "[DONE]":
                        return out + chunks.end()
                out += chunks.feed(loads(event.data))
            return out
        return openai
    decoder = AnthropicEventDecoder()

    def anthropic(data: bytes) -> list[Any]:
        out: list[Any] = []
        for item in feed(data):
            value = decode_json(item.data)
            name = item.event or str(value.get("type") or "")
            if native and name not in ("ping", "error"):
                out.append(NativeEvent("anthropic", name, value))
            out += decoder.feed(name, value)
        return out
    return anthropic


def timed(stage: Callable[[list[bytes]], int], reads: list[bytes], repeat: int) -> float:
    """ns of one pass over the whole stream: the fastest of `repeat` (the one least disturbed by the other
    processes on the shared cores; a pass is a few ms, so the fastest is the code's own cost)."""
    stage(reads)  # warm
    runs = []
    for _ in range(repeat):
        started = time.perf_counter_ns()
        stage(reads)
        runs.append(time.perf_counter_ns() - started)
    return min(runs)


def joined(reads: list[bytes], by: int) -> list[bytes]:
    """Every `by` successive reads as one: daari reads a burst while it works on the last, so its reads hold
    several events each (~9 per read in the unpaced profile of docs/performance.md)."""
    return [b"".join(reads[i:i + by]) for i in range(0, len(reads), by)]


PATHS = [("openai", "openai"), ("anthropic", "anthropic"), ("openai", "anthropic")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=400, help="deltas in the captured stream")
    parser.add_argument("--repeat", type=int, default=200, help="timed passes per stage (the fastest counts)")
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds the fake waits before each delta (with --join 1: one delta a read, a paced "
                        "stream's case, where every per-read cost is paid by one delta)")
    parser.add_argument("--join", type=int, default=8,
                        help="captured reads joined into one (1: as this process's recv got them)")
    args = parser.parse_args()
    table = Table(f"Relay stages in process: us per upstream delta, cumulative ({args.words}-delta streams)",
                  ["upstream -> client", "reads", *stages("openai", "openai")])
    with workdir() as tmp:
        captured: dict[str, list[bytes]] = {}
        for kind in ("openai", "anthropic"):
            with fake_upstream(kind, tmp, token_delay_s=args.pace) as server:
                captured[kind] = capture(server.url, kind, args.words)
        for upstream, client in PATHS:
            reads = joined(captured[upstream], args.join)
            row = [timed(stage, reads, args.repeat) / args.words / 1000 for stage in stages(upstream, client).values()]
            table.add(f"{upstream} -> {client}", len(reads), *row)
    paced = f" (paced: {args.pace:g} s a delta)" if args.pace else ""
    table.notes += [f"each row's stream captured once from the fake upstream (its own process) as a client's recv "
                    f"calls returned it{paced}, every {args.join} reads joined into one; the stages then run on "
                    f"those reads in this process; the fastest of {args.repeat} passes",
                    machine()]
    print_tables([table])


if __name__ == "__main__":
    main()
