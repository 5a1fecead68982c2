"""`python -m bench.pyload`: the fallback HTTP load client when `wrk` is not installed.

Closed loop, like wrk: each of `--connections` keep-alive sockets sends a pre-encoded request, waits for the
whole response (Content-Length or chunked), and sends the next, until `--duration` is up. One process, one
thread, `selectors`; prints one JSON line with the counts, latency percentiles and its own CPU time.
"""

from __future__ import annotations

import argparse
import json
import resource
import selectors
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


def build_request(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    parts = urlsplit(url)
    lines = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}",
             *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def response_end(buf: bytes | bytearray) -> tuple[int, int, bool] | None:
    """(bytes the first complete response takes, its status, whether the server closes the connection after
    it), or None while it is incomplete."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = bytes(buf[:head_end]).lower()
    status = int(head[9:12])
    closes = b"\r\nconnection: close" in head
    pos = head_end + 4
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name == b"content-length":
            end = pos + int(value)
            return (end, status, closes) if len(buf) >= end else None
    if b"transfer-encoding: chunked" not in head:
        raise ValueError("response has neither Content-Length nor chunked encoding")
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
        if size == 0:
            end = line_end + 4  # the empty trailer section: "0\r\n\r\n"
            return (end, status, closes) if len(buf) >= end else None
        pos = line_end + 2 + size + 2
        if pos > len(buf):
            return None


@dataclass
class Connection:
    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)
    sent_at: float = 0.0


def run(url: str, request: bytes, connections: int, duration_s: float) -> dict[str, object]:
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    selector = selectors.DefaultSelector()
    latencies: list[float] = []
    errors = non2xx = 0
    start = time.perf_counter()
    stop_at = start + duration_s

    def connect_and_send() -> None:
        sock = socket.create_connection(address, timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = Connection(sock)
        selector.register(sock, selectors.EVENT_READ, conn)
        conn.sent_at = time.perf_counter()
        sock.sendall(request)

    for _ in range(connections):
        connect_and_send()
    open_count = connections
    while open_count and time.perf_counter() < stop_at + 5:
        for key, _ in selector.select(timeout=0.5):
            conn = key.data
            try:
                data = conn.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                errors += 1
                selector.unregister(conn.sock)
                conn.sock.close()
                open_count -= 1
                continue
            conn.buf += data
            done = response_end(conn.buf)
            if done is None:
                continue
            now = time.perf_counter()
            latencies.append(now - conn.sent_at)
            non2xx += not 200 <= done[1] < 300
            del conn.buf[:done[0]]
            if now >= stop_at or done[2]:
                selector.unregister(conn.sock)
                conn.sock.close()
                if now >= stop_at:
                    open_count -= 1
                else:  # Hypercorn closes a keep-alive connection after keep_alive_max_requests (1000)
                    connect_and_send()
                continue
            conn.sent_at = now
            conn.sock.sendall(request)
    elapsed = time.perf_counter() - start
    latencies.sort()
    usage = resource.getrusage(resource.RUSAGE_SELF)

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] if latencies else float("nan")

    return {"requests": len(latencies), "duration_s": elapsed, "errors": errors, "non2xx": non2xx,
            "p50_ms": pct(50) * 1000, "p99_ms": pct(99) * 1000,
            "cpu_s": usage.ru_utime + usage.ru_stime}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--header", action="append", default=[], help="name: value")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    headers = dict(h.split(":", 1) for h in args.header)
    with open(args.body_file, "rb") as f:
        request = build_request(args.url, f.read(), {k.strip(): v.strip() for k, v in headers.items()})
    print(json.dumps(run(args.url, request, args.connections, args.duration)))


if __name__ == "__main__":
    main()
