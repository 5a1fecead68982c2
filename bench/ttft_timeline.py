"""`python -m bench.ttft_timeline`: where a streamed pass-through's time to first token goes, leg by leg.

One streamed request at a time (the fakes' "long" model, `X-Daari-No-Cache: true`, a new client connection each,
as `bench.stream_relay` sends them), directly to the fake OpenAI upstream and through daari, taking turns. The
client stamps its connect, its request sent and its first content delta read; `strace` on the fake upstream only
(never on daari, whose timing it would distort) stamps when the fake read the request and when it sent its first
content delta. Medians, in ms after the client's connect:

    client sent -> upstream read the request -> upstream sent the first word -> client read the first word

Needs `strace` and ptrace rights over a child process. `--words`: deltas per stream; `--requests`: per side;
`--tree DIR`: daari served from another checkout (before/after); `--front-ends hypercorn,h11`: one daari per front
end (`server.front_end`), all taking turns with the direct call in one run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import trio

from bench.servers import HOST, daari, fake_upstream, workdir
from bench.stream_relay import NO_CACHE, WORD, daari_config, request_head, request_of, stream, tier_of

_CALL = re.compile(r"\d+\s+([\d.]+) (\w+)\(\d+, \"(.{0,300})")


async def timed(url: str, route: str, body: bytes, headers: dict[str, str]) -> tuple[float, float, float]:
    """(connect started, request sent, first word read), wall-clock seconds, to line up with strace's."""
    port, head = request_head(url, route, body, headers)
    started = time.time()
    sock = await trio.open_tcp_stream(HOST, port)
    await sock.send_all(head + body)
    sent, first, tail = time.time(), 0.0, b""
    async with sock:
        while True:
            data = await sock.receive_some(65536)
            if not data:
                break
            if not first and WORD in data:
                first = time.time()
            tail = (tail + data)[-7:]
            if tail == b"\r\n0\r\n\r\n":
                break
    return started, sent, first


def legs(trace: Path, rows: list[tuple[str, float, float, float]]) -> dict[str, list[tuple[float, ...]]]:
    calls = [(float(m[1]), m[2], m[3]) for m in map(_CALL.match, trace.read_text().splitlines()) if m]
    out: dict[str, list[tuple[float, ...]]] = {side: [] for side, *_ in rows}
    for side, started, sent, first in rows:
        read = next(t for t, call, data in calls if t > started and call == "recvfrom" and data.startswith("POST"))
        word = next(t for t, call, data in calls if t > read and call == "sendto" and "word" in data)
        out[side].append(tuple((t - started) * 1000 for t in (sent, read, word, first)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--tree", type=Path, help="serve daari from another checkout (e.g. a `git archive` of a "
                        "commit), the fake and this bench from this one")
    parser.add_argument("--front-ends", default="hypercorn", help="comma-separated: hypercorn, h11 (one daari each)")
    args = parser.parse_args()
    front_ends = args.front_ends.split(",")
    with workdir() as tmp, ExitStack() as stack:
        fake = stack.enter_context(fake_upstream("openai", tmp))
        sides: list[tuple[str, str, dict[str, str]]] = [("direct", fake.url, {})]
        for front_end in front_ends:
            config = daari_config(tier_of(fake, "openai"), front_end=None if front_end == "hypercorn" else front_end)
            proxy = stack.enter_context(daari(config, tmp, tree=args.tree))
            sides.append(("daari" if front_ends == ["hypercorn"] else f"daari {front_end}", proxy.url, NO_CACHE))
        trace = tmp / "fake.strace"
        rows: list[tuple[str, float, float, float]] = []

        async def warm_up() -> None:  # imports, the executor's pool
            for salt in range(5):
                for _, url, extra in sides:
                    route, body, headers = request_of("openai", 10, salt)
                    await stream(url, route, body, {**headers, **extra})

        async def measure() -> None:
            for salt in range(args.requests):
                for side, url, extra in sides:
                    route, body, headers = request_of("openai", args.words, 1000 + salt)
                    rows.append((side, *await timed(url, route, body, {**headers, **extra})))
                    await trio.sleep(0.2)

        trio.run(warm_up)
        tracer = subprocess.Popen(["strace", "-f", "-ttt", "--seccomp-bpf", "-e", "trace=recvfrom,sendto", "-s",
                                   "300", "-o", str(trace), "-p", str(fake.process.pid)], stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace attached
        trio.run(measure)
        tracer.terminate()
        tracer.wait()
        for side, values in legs(trace, rows).items():
            sent, read, word, first = (statistics.median(column) for column in zip(*values, strict=True))
            print(f"{side:15}  sent {sent:5.2f}  upstream read the request {read:5.2f}  upstream sent the first "
                  f"word {word:5.2f}  client read it {first:5.2f}  (ms after connect, medians of {len(values)})")


if __name__ == "__main__":
    main()
