"""`python -m bench.memory`: daari's RSS at idle with the embedded model, and per open idle stream.

1. Default config (L3 = embedded SmolLM2, no upstream): RSS once /healthz answers, and once it reports
   `models_loaded: true`.
2. Streams held open: L3 = a fake OpenAI upstream whose model "hang_stream" sends headers and one chunk, then
   hangs. Open 100, then 1,000 client streams (each waits for its first content chunk), read RSS before and
   after, divide by the count. `actors.mailbox_size` and `tiers.L3.max_concurrency` are raised to 2000 so the
   streams are not queued, and the idle timeout to 300 s so none is cut while we measure.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import time

from bench.l0_hit import PATH, REQUEST
from bench.report import Table, fmt, print_tables, ratio
from bench.servers import (
    HOST,
    Server,
    client_cores,
    daari,
    dumps,
    fake_upstream,
    openai_tier,
    server_core,
    wait_models_loaded,
    workdir,
)

MIB = 1024 * 1024
OPEN_TIMEOUT_S = 90.0
SETTLE_S = 2.0


def _request(port: int) -> bytes:
    body = dumps({**REQUEST, "stream": True})
    head = (f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
            f"X-Daari-No-Cache: true\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


class StreamHolder:
    """Client streams held open on raw sockets; `open(n)` returns once each has its first content chunk."""

    def __init__(self, server: Server) -> None:
        self.port = int(server.url.rsplit(":", 1)[1])
        self.sockets: list[socket.socket] = []

    def open(self, count: int) -> None:
        request = _request(self.port)
        selector = selectors.DefaultSelector()
        buffers: dict[socket.socket, bytes] = {}
        for _ in range(count):
            sock = socket.create_connection((HOST, self.port), timeout=10)
            sock.sendall(request)
            sock.setblocking(False)
            self.sockets.append(sock)
            buffers[sock] = b""
            selector.register(sock, selectors.EVENT_READ)
        waiting = set(buffers)
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while waiting and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = sock.recv(65536)
                if not data:
                    raise RuntimeError(f"daari closed a held stream: {buffers[sock][:300]!r}")
                buffers[sock] += data
                if b"Here" in buffers[sock]:  # the fake's first content token came through
                    waiting.discard(sock)
                    selector.unregister(sock)
        selector.close()
        if waiting:
            raise RuntimeError(f"{len(waiting)} of {count} streams had no first chunk after {OPEN_TIMEOUT_S:g} s")

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def idle_rss(load_timeout_s: float) -> tuple[int, int]:
    """(RSS when /healthz first answers, RSS once the embedded model is loaded), default config."""
    with workdir() as tmp, daari({"server": {"grace_period_s": 1}}, tmp, cores=server_core()) as server:
        before_model = server.rss_bytes()
        wait_models_loaded(server, load_timeout_s)
        time.sleep(SETTLE_S)
        return before_model, server.rss_bytes()


def stream_rss(sizes: tuple[int, ...]) -> tuple[int, dict[int, int], float]:
    """(baseline RSS, {open streams: RSS}, daari CPU % while the most streams sat idle)."""
    with workdir() as tmp, fake_upstream("openai", tmp, cores=client_cores()) as upstream:
        config = {"server": {"grace_period_s": 1}, "actors": {"mailbox_size": 2000},
                  "tiers": {"L3": openai_tier(upstream.url, "hang_stream", max_concurrency=2000,
                                              timeouts={"idle_s": 300.0})}}
        with daari(config, tmp, cores=server_core()) as server:
            holder = StreamHolder(server)
            try:
                holder.open(20)  # warm-up: first-use allocations are not per-stream cost
                holder.close()
                time.sleep(SETTLE_S)
                baseline = server.rss_bytes()
                rss: dict[int, int] = {}
                for size in sizes:
                    holder.open(size - len(holder.sockets))
                    time.sleep(SETTLE_S)
                    rss[size] = server.rss_bytes()
                cpu_before = server.cpu_seconds()
                time.sleep(3)
                idle_cpu = 100 * (server.cpu_seconds() - cpu_before) / 3
            finally:
                holder.close()
    return baseline, rss, idle_cpu


def run(load_timeout_s: float = 300.0, sizes: tuple[int, ...] = (100, 1000)) -> list[Table]:
    if client_cores():
        os.sched_setaffinity(0, client_cores() or set())
    before_model, loaded = idle_rss(load_timeout_s)
    baseline, rss, idle_cpu = stream_rss(sizes)
    table = Table("Memory: daari's RSS", ["measure", "MiB", "note"])
    table.add("idle, default config, before the embedded model is loaded", before_model / MIB,
              "first /healthz answer")
    table.add("idle, default config, embedded L3 model loaded", loaded / MIB, "/healthz models_loaded: true")
    table.add("upstream-only config, after a 20-stream warm-up", baseline / MIB, "baseline for the streams")
    per_stream: dict[int, float] = {}
    for size in sizes:
        per_stream[size] = (rss[size] - baseline) / size / 1024
        table.add(f"{size} open idle streams", rss[size] / MIB, f"{fmt(per_stream[size])} KiB per stream")
    small, large = sizes[0], sizes[-1]
    table.notes += [
        f"per-stream cost at {large} vs at {small} streams: {ratio(per_stream[large], per_stream[small])}",
        f"daari CPU while {large} streams sat idle: {idle_cpu:.1f}% of one core",
        "streams: actors.mailbox_size 2000, tiers.L3.max_concurrency 2000, tiers.L3.timeouts.idle_s 300; "
        "each stream is a client connection plus an upstream connection held by daari",
    ]
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=1000, help="the largest number of open streams")
    args = parser.parse_args()
    print_tables(run(sizes=(max(1, args.streams // 10), args.streams)))


if __name__ == "__main__":
    main()
