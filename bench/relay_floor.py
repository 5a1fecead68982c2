"""`python -m bench.relay_floor`: the floor under daari's CPU per relayed stream chunk: what Trio itself costs to wait
for and read one paced upstream read, with no daari code at all.

Issue 23 asks <= 15 us of daari's CPU per relayed chunk. A paced chunk (a real model's case: one delta a read)
costs a wake-up: the run loop's epoll wait and its event processing, the task rescheduled and stepped, the socket
read. This measures that alone, in a Trio task reading the same fake upstream's paced stream as
`bench.passthrough_cpu --pace` (tests/fakes in their own process, its "long" model, one delta per `--pace` s), so
the two compare: daari's instructions per paced chunk minus this floor is what daari's own code costs a chunk.

Variants (each a Trio task reading the raw HTTP response to its terminal chunk, nothing decoded):
  bare      `wait_readable` + `recv` on a stdlib socket (what daari's lean client does per read)
  quickack  + the `TCP_QUICKACK` re-arm after each read (daari's lean client does it)
  deep      + the read at the bottom of `--depth` coroutine frames (each resumed at every wake-up), quickack too

Per chunk = (instructions of a `--words` 60 stream - a 20 one) / 40, under callgrind (user-space instructions,
load-independent), median of three windows of `--calls` streams:

    python -m bench.relay_floor --pace 0.02 --calls 3                  # all variants, OpenAI's stream
    python -m bench.relay_floor --pace 0.02 --calls 3 --anthropic
    python -m bench.relay_floor --pace 0.005 --calls 10 --cpu          # the thread's CPU per chunk instead
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from bench.servers import HOST, fake_upstream, workdir
from bench.stream_relay import request_of

VARIANTS = ("bare", "quickack", "deep")
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _request(protocol: str, words: int, port: int) -> bytes:
    route, body, headers = request_of(protocol, words)
    head = (f"POST {route} HTTP/1.1\r\nhost: {HOST}:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
    return head.encode() + body


async def _read(raw: socket.socket, quickack: bool) -> int:
    """Reads to the body's terminal chunk; the number of reads."""
    reads, tail = 0, b""
    while True:
        await trio.lowlevel.wait_readable(raw)
        data = raw.recv(256 * 1024)
        if quickack and _QUICKACK is not None:
            raw.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        if not data:
            return reads
        reads += 1
        tail = (tail + data)[-16:]
        if tail.endswith(b"\r\n0\r\n\r\n"):
            return reads


async def _deep(depth: int, raw: socket.socket) -> int:
    """`_read` at the bottom of `depth` coroutine frames (each resumed on every wake-up, as daari's are)."""
    if depth <= 0:
        return await _read(raw, True)
    return await _deep(depth - 1, raw)


async def _child(url: str, protocol: str, words: int, calls: int, variant: str, depth: int, cpu: bool) -> None:
    port = int(url.rsplit(":", 1)[1])
    request = _request(protocol, words, port)
    raw = socket.create_connection((HOST, port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.setblocking(False)
    read: Callable[[], Awaitable[int]]
    if variant == "bare":
        def read() -> Awaitable[int]:
            return _read(raw, False)
    elif variant == "quickack":
        def read() -> Awaitable[int]:
            return _read(raw, True)
    else:
        def read() -> Awaitable[int]:
            return _deep(depth, raw)

    async def one() -> None:
        raw.send(request)
        await read()

    for _ in range(5):  # warm: the connection and the code paths
        await one()
    if cpu:  # in process, no callgrind: the thread's CPU (kernel time included) per stream, best of five runs
        runs = []
        for _ in range(5):
            started = time.thread_time()
            for _ in range(calls):
                await one()
            runs.append((time.thread_time() - started) / calls)
        print(f"{min(runs) * 1e6:.1f}", flush=True)
        raw.close()
        return
    for _ in range(3):  # the parent dumps callgrind's counters around each window
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(calls):
            await one()
        print("done", flush=True)
        sys.stdin.readline()
    raw.close()


def _cpu(url: str, protocol: str, words: int, calls: int, variant: str, depth: int) -> float:
    argv = [sys.executable, "-m", "bench.relay_floor", "--child", url, "--protocol", protocol, "--words", str(words),
            "--calls", str(calls), "--variant", variant, "--depth", str(depth), "--cpu"]
    return float(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()[-1])


def _instructions(url: str, protocol: str, words: int, calls: int, variant: str, depth: int, tmp: Path,
                  keep: Path | None = None) -> float:
    """The median window's instructions per stream; `keep`: each window's dump copied there (for
    callgrind_annotate)."""
    from bench.body_size import _dump

    out = tmp / f"floor-{variant}-{words}.cg"
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            *(["--compress-strings=no", "--compress-pos=no"] if keep else []), sys.executable, "-m",
            "bench.relay_floor",
            "--child", url, "--protocol", protocol, "--words", str(words), "--calls", str(calls), "--variant", variant,
            "--depth", str(depth)]
    windows: list[float] = []
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as process:
        assert process.stdin is not None and process.stdout is not None
        for line in process.stdout:
            window = (keep / f"{variant}-{words}-window{len(windows) + 1}.cg" if keep and line.strip() == "done"
                      else None)
            counted = _dump(process.pid, out, window)
            if line.strip() == "done":
                windows.append(counted / calls)
            process.stdin.write("go\n")
            process.stdin.flush()
    if process.returncode != 0 or len(windows) != 3:
        raise RuntimeError(f"the measured process failed ({process.returncode})")
    return sorted(windows)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pace", type=float, default=0.02, help="seconds the fake waits before each delta")
    parser.add_argument("--calls", type=int, default=3, help="streams per window (three windows)")
    parser.add_argument("--anthropic", action="store_true", help="the fake Anthropic upstream's stream")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--depth", type=int, default=20, help="frames above the read in the `deep` variant")
    parser.add_argument("--cpu", action="store_true", help="the thread's CPU time per chunk (kernel's included), "
                        "in process without callgrind, best of five runs of --calls streams")
    parser.add_argument("--keep", type=Path, default=None, help="copy each window's callgrind dump here")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--protocol", default="openai", help=argparse.SUPPRESS)
    parser.add_argument("--words", type=int, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="bare", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        trio.run(_child, args.child, args.protocol, args.words, args.calls, args.variant, args.depth, args.cpu)
        return
    kind = "anthropic" if args.anthropic else "openai"
    with workdir() as log_dir, fake_upstream(kind, log_dir, token_delay_s=args.pace) as upstream:
        for variant in args.variants.split(","):
            if args.cpu:
                short_us, long_us = (_cpu(upstream.url, kind, words, args.calls, variant, args.depth)
                                     for words in (20, 60))
                print(f"{variant:9} CPU per stream: 20 deltas {short_us:,.0f} us, 60 deltas {long_us:,.0f} us; "
                      f"per {'paced' if args.pace else 'unpaced'} chunk {(long_us - short_us) / 40:,.1f} us",
                      flush=True)
                continue
            short = _instructions(upstream.url, kind, 20, args.calls, variant, args.depth, log_dir, args.keep)
            long = _instructions(upstream.url, kind, 60, args.calls, variant, args.depth, log_dir, args.keep)
            print(f"{variant:9} instructions per stream: 20 deltas {short:,.0f}, 60 deltas {long:,.0f}; "
                  f"per paced chunk {(long - short) / 40:,.0f}", flush=True)


if __name__ == "__main__":
    main()
