"""`python -m bench.stream_relay`: what daari costs a relayed stream, against the upstream called directly.

Issue 23's stream targets: <= 15 us of daari CPU per chunk; added TTFT <= 1 ms over direct; 1,000 concurrent
streams relayed with an inter-chunk p99 within 5 ms of direct. And its cold-path one: the first request after
start on each tier kind, measured. The fakes are the tests' (tests/fakes/), each in its own process
(bench/fake_upstream.py); the model "long" streams `max_tokens` words, one SSE delta each.

Paths (every daari request carries `X-Daari-No-Cache: true`, so it is relayed, not served from L0):
  openai     an OpenAI chat client -> daari -> an OpenAI-compatible tier (the same protocol)
  anthropic  an Anthropic messages client -> daari -> an Anthropic tier (the same protocol)
  cross      an Anthropic messages client -> daari -> an OpenAI-compatible tier (decoded and re-encoded)
  ollama     (`--ollama`) an OpenAI chat client -> daari -> an Ollama tier (NDJSON decoded, rendered as SSE);
             its direct reference is the fake Ollama called with its own /api/chat

1. CPU per chunk: one stream at a time, unpaced, of `--short` and `--long` deltas, the paths taking turns; a
   server's CPU time (user + system, its children included) over the turn. The per-chunk figure is the
   difference between the long and short streams' CPU per request over the difference in deltas, so what a
   request costs once (parse, route, the decision record) is not charged to its chunks. The fake upstream's own
   figure in the direct turn is the reference: what one Hypercorn-trio process spends to produce a chunk.
2. TTFT: the time to the first content delta of those same long streams, p50, daari minus direct.
3. `--streams S`: S streams held at once (opened over `--ramp` s), each `--chunks` deltas paced `--pace` s
   apart by the upstream; the gaps between a stream's successive deltas as the client reads them, p50/p99,
   daari vs direct. The client is raw Trio sockets in this process (HTTP/1.1, one connection per stream).
4. `--cold`: for each tier kind that runs without network (the fake OpenAI, Anthropic and Ollama upstreams; the
   embedded model when its package is installed), a fresh daari: the first request after start, the second,
   and the median of the next few (each a new body, the cache off).

    python -m bench.stream_relay                         # 1 and 2
    python -m bench.stream_relay --streams 1000          # and 1,000 held streams
    python -m bench.stream_relay --cold                  # the cold paths only
    python -m bench.stream_relay --chunk-pace 0.005 --long 100 --short 10   # 1 and 2 with paced deltas (each alone)
    python -m bench.stream_relay --streams 1000 --held-only --backlog 100   # only 3, at Hypercorn's old backlog
    python -m bench.stream_relay --ollama                # 1 and 2 with the Ollama paths added
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from bench.report import Table, machine, print_tables, ratio
from bench.servers import (
    HOST,
    PYTHON,
    Server,
    daari,
    dumps,
    fake_upstream,
    gc_pauses,
    ollama_tier,
    openai_tier,
    workdir,
)

WORD = b"word"  # each delta of the fakes' "long" answer holds one "wordN": counted in the raw bytes
MESSAGES = [{"role": "user", "content": "Write a long answer."}]
NO_CACHE = {"x-daari-no-cache": "true"}
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "bench"}


@dataclass(frozen=True)
class Path_:
    name: str
    protocol: str  # the client's: "openai", "anthropic" or "ollama" (its /api/chat, direct only)
    upstream: str  # the fake the tier (or the direct client) calls
    via_daari: bool
    reference: str = ""  # the direct path's upstream whose TTFT this one's is compared with ("": `protocol`)


PATHS = [
    Path_("OpenAI direct", "openai", "openai", False),
    Path_("OpenAI -> daari -> OpenAI tier", "openai", "openai", True),
    Path_("Anthropic direct", "anthropic", "anthropic", False),
    Path_("Anthropic -> daari -> Anthropic tier", "anthropic", "anthropic", True),
    Path_("Anthropic -> daari -> OpenAI tier (cross)", "anthropic", "openai", True),
]
OLLAMA_PATHS = [
    Path_("Ollama direct", "ollama", "ollama", False),
    Path_("OpenAI -> daari -> Ollama tier", "openai", "ollama", True, reference="ollama"),
]


def request_of(protocol: str, words: int, salt: int = 0) -> tuple[str, bytes, dict[str, str]]:
    """The client's (path, body, headers): a stream of `words` deltas from the fakes' "long" model."""
    messages = [{"role": "user", "content": f"Write a long answer ({salt})."}]
    if protocol == "ollama":
        return "/api/chat", dumps({"model": "long", "stream": True, "options": {"num_predict": words},
                                   "messages": messages}), {}
    if protocol == "openai":
        return "/v1/chat/completions", dumps({"model": "long", "stream": True, "max_tokens": words,
                                              "messages": messages}), {}
    return "/v1/messages", dumps({"model": "long", "stream": True, "max_tokens": words,
                                  "messages": messages}), ANTHROPIC_HEADERS


def tier_of(upstream: Server, kind: str) -> dict[str, Any]:
    if kind == "openai":
        return openai_tier(upstream.url, "long", max_concurrency=4096, max_queue=4096)
    if kind == "ollama":
        return ollama_tier(upstream.url, "long", max_concurrency=4096, max_queue=4096)
    return {"executor": "anthropic", "base_url": upstream.url, "model": "long", "max_concurrency": 4096,
            "max_queue": 4096}


def daari_config(tier: dict[str, Any], backlog: int | None = None, front_end: str | None = None,
                 gc_young: int | None = None, gc_middle: int | None = None) -> dict[str, Any]:
    """One tier (the last: streamed live), L1 off (no model loading beside the measure); `backlog`: the listen
    backlog (server.backlog) when not daari's default; `front_end`: server.front_end when not the default;
    `gc_young`, `gc_middle`: server.gc_young_threshold and gc_middle_threshold when not the defaults."""
    server: dict[str, Any] = {"grace_period_s": 1, **({"backlog": backlog} if backlog is not None else {}),
                              **({"front_end": front_end} if front_end is not None else {}),
                              **({"gc_young_threshold": gc_young} if gc_young is not None else {}),
                              **({"gc_middle_threshold": gc_middle} if gc_middle is not None else {})}
    return {"server": server, "cache": {"l1": {"enabled": False}}, "tiers": {"L3": tier}}


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped because a listen queue was full (the whole machine's, so other
    servers' overflows count too; Linux only)."""
    try:
        rows = [line.split() for line in open("/proc/net/netstat").read().splitlines() if line.startswith("TcpExt:")]
    except OSError:
        return None
    return int(rows[1][rows[0].index("ListenOverflows")]) if len(rows) >= 2 else None


@dataclass
class StreamResult:
    status: int
    words: int
    ttft_s: float
    arrivals: list[float] = field(default_factory=list)  # when each delta reached the client

    def gaps_ms(self) -> list[float]:
        return [(b - a) * 1000 for a, b in zip(self.arrivals, self.arrivals[1:], strict=False)]


def request_head(url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """The server's port and a POST's head (one connection per request: `connection: close`)."""
    port = int(url.rsplit(":", 1)[1])
    return port, (f"POST {path} HTTP/1.1\r\nhost: {HOST}:{port}\r\ncontent-type: application/json\r\n"
                  f"content-length: {len(body)}\r\nconnection: close\r\n"
                  + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()


async def stream(url: str, path: str, body: bytes, headers: dict[str, str]) -> StreamResult:
    """One POST over a new connection, read to the chunked body's end; deltas found by their word."""
    port, head = request_head(url, path, body, headers)
    started = time.perf_counter()
    sock = await trio.open_tcp_stream(HOST, port)
    async with sock:
        await sock.send_all(head + body)
        buffer = b""
        status = 0
        tail = b""
        arrivals: list[float] = []
        while True:
            data = await sock.receive_some(65536)
            if not data:
                break
            now = time.perf_counter()
            if not status:
                buffer += data
                if b"\r\n" not in buffer:
                    continue
                status = int(buffer.split(b" ", 2)[1])
                if status != 200:
                    break
                data, buffer = buffer, b""
            seen = tail + data
            arrivals.extend([now] * seen.count(WORD))
            tail = seen[-(len(WORD) - 1):]  # a word cut between two reads is counted once, in the second
            if seen[-7:] == b"\r\n0\r\n\r\n":  # the last chunk (the server may keep the connection open)
                break
    ttft = arrivals[0] - started if arrivals else float("nan")
    return StreamResult(status, len(arrivals), ttft, arrivals)


def _check(result: StreamResult, words: int, name: str, server: Server | None) -> None:
    if result.status != 200 or result.words != words:
        tail = server.log_tail() if server is not None else ""
        raise RuntimeError(f"{name}: HTTP {result.status}, {result.words} of {words} deltas\n{tail}")


@dataclass
class Turns:
    """Per path: CPU seconds per request of short and long streams, and the long streams' TTFTs."""

    short_cpu: list[float] = field(default_factory=list)
    long_cpu: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)


def sequential(paths: list[Path_], targets: dict[str, tuple[str, Server]], short: int, long: int,
               requests: int, rounds: int) -> dict[str, Turns]:
    """The paths take turns, `rounds` times; each turn `requests` short then `requests` long streams."""
    turns = {p.name: Turns() for p in paths}
    salt = 0

    async def one(path: Path_, words: int) -> StreamResult:
        nonlocal salt
        salt += 1
        url, server = targets[path.name]
        route, body, headers = request_of(path.protocol, words, salt)
        result = await stream(url, route, body, {**headers, **(NO_CACHE if path.via_daari else {})})
        _check(result, words, path.name, server)
        return result

    async def main() -> None:
        for path in paths:  # warm-up: imports, first connections, the executor's pool
            for _ in range(3):
                await one(path, short)
        for _ in range(rounds):
            for path in paths:
                server = targets[path.name][1]
                for words, into in ((short, turns[path.name].short_cpu), (long, turns[path.name].long_cpu)):
                    before = server.cpu_seconds()
                    results = [await one(path, words) for _ in range(requests)]
                    into.append((server.cpu_seconds() - before) / requests)
                    if words == long:
                        turns[path.name].ttft_ms += [r.ttft_s * 1000 for r in results]

    trio.run(main)
    return turns


def held_streams(path: Path_, url: str, server: Server | None, streams: int, chunks: int,
                 ramp_s: float) -> tuple[list[float], float, float, list[str]]:
    """`streams` streams at once; every gap between successive deltas, the wall time, the server's CPU, and
    what went wrong with the streams that failed."""
    gaps: list[float] = []
    failures: list[str] = []

    async def one(index: int, nursery_started: float) -> None:
        await trio.sleep_until(nursery_started + ramp_s * index / streams)
        route, body, headers = request_of(path.protocol, chunks, index)
        try:
            result = await stream(url, route, body, {**headers, **(NO_CACHE if path.via_daari else {})})
        except (OSError, trio.BrokenResourceError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            return
        if result.status != 200 or result.words != chunks:
            failures.append(f"HTTP {result.status}, {result.words} of {chunks} deltas")
        gaps.extend(result.gaps_ms())

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            started = trio.current_time()
            for index in range(streams):
                nursery.start_soon(one, index, started)

    cpu_before = server.cpu_seconds() if server is not None else 0.0
    wall = time.perf_counter()
    gc.disable()  # the client's own collections would pause its reads of every stream, in both rows alike
    try:
        trio.run(main)
    finally:
        gc.enable()
    wall = time.perf_counter() - wall
    cpu = (server.cpu_seconds() - cpu_before) if server is not None else 0.0
    return gaps, wall, cpu, failures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def relay_tables(args: argparse.Namespace) -> list[Table]:
    tables: list[Table] = []
    load_before = os.getloadavg()
    paths = PATHS + (OLLAMA_PATHS if args.ollama else [])
    with workdir() as tmp, ExitStack() as stack:
        fakes = {kind: stack.enter_context(fake_upstream(kind, tmp, token_delay_s=args.chunk_pace))
                 for kind in ("openai", "anthropic", *(("ollama",) if args.ollama else ()))}
        targets: dict[str, tuple[str, Server]] = {}
        for path in paths:
            if path.via_daari:
                proxy = stack.enter_context(daari(daari_config(tier_of(fakes[path.upstream], path.upstream),
                                                               front_end=args.front_end), tmp))
                targets[path.name] = (proxy.url, proxy)
            else:
                targets[path.name] = (fakes[path.upstream].url, fakes[path.upstream])
        turns = sequential(paths, targets, args.short, args.long, args.requests, args.rounds)
        load_after = os.getloadavg()

        paced = f", deltas {args.chunk_pace * 1000:g} ms apart" if args.chunk_pace else ""
        table = Table(f"Stream relay: CPU per chunk and TTFT ({args.long}-delta streams, one at a time{paced})",
                      ["path", "server", "CPU us per chunk", "CPU ms per request", "TTFT p50 ms",
                       "added TTFT p50 ms"])
        direct_ttft: dict[str, float] = {}
        for path in paths:
            t = turns[path.name]
            per_chunk = [(lo - sh) / (args.long - args.short) * 1e6 for sh, lo in zip(t.short_cpu, t.long_cpu,
                                                                                      strict=True)]
            ttft = statistics.median(t.ttft_ms)
            if not path.via_daari:
                direct_ttft[path.upstream] = ttft
            added = ttft - direct_ttft[path.reference or path.protocol] if path.via_daari else float("nan")
            table.add(path.name, "daari" if path.via_daari else f"(the fake {path.upstream} upstream)",
                      statistics.median(per_chunk), statistics.median(t.long_cpu) * 1000, ttft,
                      added if path.via_daari else "")
        table.notes += [
            f"{args.rounds} rounds of {args.requests} streams of {args.short} and {args.long} deltas per path; CPU "
            "per chunk = (CPU per long stream - CPU per short stream) / the difference in deltas, median of rounds",
            "daari's CPU per chunk includes everything it does per delta: reading the upstream's bytes, decoding "
            "its SSE, rendering (in the generation's task where the executor marks its reads, else after the executor "
            "actor's channel), Hypercorn's write to the client",
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (2 shared cores); {machine()}",
        ]
        tables.append(table)

    print_tables(tables)  # before the held run, which may take long
    return [held_table(args)] if args.streams else []


def held_table(args: argparse.Namespace) -> Table:
    """The held-streams run, on its own fakes (pacing their deltas) and daaris."""
    held = Table(f"{args.streams} streams at once: gaps between deltas as the client reads them",
                 ["path", "gap p50 ms", "gap p99 ms", "p99 over direct ms", "gap p99.9 ms", "gap max ms", "wall s",
                  "server CPU us per chunk", "streams whole"])
    paths = [p for p in PATHS if p.name in args.held]
    direct_p99: dict[str, float] = {}
    with workdir() as tmp, ExitStack() as stack:
        fakes = {kind: stack.enter_context(fake_upstream(kind, tmp, token_delay_s=args.pace, no_gc=True))
                 for kind in sorted({p.upstream for p in paths})}
        for path in paths:
            server = stack.enter_context(daari(daari_config(tier_of(fakes[path.upstream], path.upstream),
                                                            args.backlog, args.front_end, args.gc_young,
                                                            args.gc_middle), tmp)) \
                if path.via_daari else fakes[path.upstream]
            overflows = listen_overflows()
            pauses = gc_pauses(server) if path.via_daari else {}
            gaps, wall, cpu, failures = held_streams(path, server.url, server, args.streams, args.chunks, args.ramp)
            if path.via_daari:
                held.notes.append(f"{path.name}: daari's collector pauses during the run (daari_gc_pause_seconds), "
                                  + _pauses_line(pauses, gc_pauses(server)))
            if failures:
                held.notes.append(f"{path.name}: {len(failures)} of {args.streams} streams failed, e.g. {failures[0]}")
            after = listen_overflows()
            if overflows is not None and after is not None:
                held.notes.append(f"{path.name}: {after - overflows} listen queue overflows on the machine during "
                                  "the run (TcpExt ListenOverflows)")
            p99 = percentile(gaps, 0.99)
            if not path.via_daari:
                direct_p99[path.protocol] = p99
            over = p99 - direct_p99.get(path.protocol, float("nan"))
            held.add(path.name, percentile(gaps, 0.5), p99, over if path.via_daari else "", percentile(gaps, 0.999),
                     max(gaps, default=float("nan")), wall,
                     cpu / (args.streams * args.chunks) * 1e6, args.streams - len(failures))
    held.notes += [
        f"{args.streams} streams opened over {args.ramp:g} s, {args.chunks} deltas each, the upstream pacing "
        f"deltas {args.pace * 1000:g} ms apart ({args.streams / args.pace:,.0f} deltas/s in all once open); one "
        "connection per stream; the client is raw Trio sockets in the benchmark's process; the direct row's CPU "
        "is the fake upstream's; the fake and the client run without the cyclic garbage collector (its pauses "
        "would stretch both rows' gaps alike), daari with its own settings (server.gc_young_threshold, "
        "gc_middle_threshold)",
        f"load average {os.getloadavg()[0]:.1f} at the end (2 shared cores)",
    ]
    return held


def _pauses_line(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> str:
    parts = []
    for generation, (count, seconds) in sorted(after.items()):
        count0, seconds0 = before.get(generation, (0.0, 0.0))
        parts.append(f"generation {generation}: {count - count0:,.0f}, {(seconds - seconds0) * 1000:,.1f} ms in all")
    return "; ".join(parts) or "none reported"


def cold_table(args: argparse.Namespace) -> Table:
    table = Table("Cold paths: the first requests after daari starts, by tier kind (cache off)",
                  ["tier kind", "first ms", "second ms", "next p50 ms", "first / next"])
    kinds: list[tuple[str, Callable[[dict[str, Server]], dict[str, Any]], str, bool]] = [
        ("openai (fake upstream)", lambda f: openai_tier(f["openai"].url, "good"), "openai", False),
        ("anthropic (fake upstream)", lambda f: tier_of(f["anthropic"], "anthropic") | {"model": "good"},
         "anthropic", False),
        ("ollama (fake upstream)", lambda f: ollama_tier(f["ollama"].url, "good"), "openai", False),
    ]
    if _embedded_installed():
        def embedded(fakes: dict[str, Server]) -> dict[str, Any]:
            return {"executor": "embedded", "max_tokens": 8}

        kinds += [("embedded (qwen2.5-coder-0.5b), as soon as /healthz answers", embedded, "openai", False),
                  ("embedded, once /healthz says models_loaded", embedded, "openai", True)]
    with workdir() as tmp, ExitStack() as stack:
        fakes = {kind: stack.enter_context(fake_upstream(kind, tmp)) for kind in ("openai", "anthropic", "ollama")}
        for name, tier, protocol, loaded in kinds:
            with daari(daari_config(tier(fakes)), tmp, wait_models=loaded, ready_timeout_s=300) as proxy, \
                    httpx.Client(timeout=600) as client:
                times = [_timed(client, proxy, protocol, salt) for salt in range(2 + args.cold_next)]
            table.add(name, times[0], times[1], statistics.median(times[2:]),
                      ratio(times[0], statistics.median(times[2:])))
    table.notes += [
        "each row a fresh daari (started, /healthz answering), then one request at a time over one keep-alive "
        "connection (the first request opens it), each a new body, not streamed, X-Daari-No-Cache; the time is "
        "the client's, request sent to body read",
        f"load average {os.getloadavg()[0]:.1f} (2 shared cores)",
    ]
    if not _embedded_installed():
        table.notes.append("the embedded tier was left out: its model package is not installed")
    return table


def _embedded_installed() -> bool:
    from daari.models import DEFAULT_EMBEDDED_MODEL, check_installed, embedded_model
    try:
        check_installed(embedded_model(DEFAULT_EMBEDDED_MODEL))
    except Exception:  # noqa: BLE001 - any failure to locate the package means "not installed"
        return False
    return True


def _timed(client: httpx.Client, proxy: Server, protocol: str, salt: int) -> float:
    route, body, headers = request_of(protocol, 8, salt)
    body = body.replace(b'"stream":true', b'"stream":false').replace(b'"model":"long"', b'"model":"good"')
    started = time.perf_counter()
    response = client.post(proxy.url + route, content=body,
                          headers={"content-type": "application/json", **headers, **NO_CACHE})
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"cold request: HTTP {response.status_code}: {response.text[:300]}\n{proxy.log_tail()}")
    return elapsed


def profile(args: argparse.Namespace) -> None:
    """One path's daari under cProfile: `--requests` long streams, then the top functions by own time."""
    import pstats

    path = next(p for p in PATHS + OLLAMA_PATHS if p.name == args.profile_path)
    with workdir() as tmp, fake_upstream(path.upstream, tmp, token_delay_s=args.profile_pace) as upstream:
        out = tmp / "daari.prof"
        launcher = [PYTHON, "-m", "cProfile", "-o", str(out), "-m", "daari"]
        with daari(daari_config(tier_of(upstream, path.upstream)), tmp, launcher=launcher) as proxy:
            turns = sequential([path], {path.name: (proxy.url, proxy)}, args.short, args.long, args.requests, 1)
        stats = pstats.Stats(str(out))
        stats.sort_stats("tottime").print_stats(args.profile_top)
        stats.sort_stats("cumulative").print_stats(args.profile_top)
    print(f"{path.name}: {args.requests} streams of {args.long} deltas (and of {args.short}); CPU per long stream "
          f"{turns[path.name].long_cpu[0] * 1000:.1f} ms under cProfile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", type=int, default=20, help="deltas in a short stream")
    parser.add_argument("--long", type=int, default=400, help="deltas in a long stream")
    parser.add_argument("--requests", type=int, default=10, help="streams of each length per turn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=0, help="streams held at once (0: skip)")
    parser.add_argument("--chunks", type=int, default=30, help="deltas per held stream")
    parser.add_argument("--pace", type=float, default=0.5, help="seconds between a held stream's deltas")
    parser.add_argument("--ramp", type=float, default=4.0, help="seconds over which the held streams open")
    parser.add_argument("--held", nargs="*", default=[p.name for p in PATHS[:2]],
                        help="paths for the held-streams run (default: OpenAI direct and through daari)")
    parser.add_argument("--backlog", type=int, default=None,
                        help="daari's server.backlog for --streams (default: daari's own; Hypercorn's was 100)")
    parser.add_argument("--gc-young", type=int, default=None,
                        help="daari's server.gc_young_threshold for --streams (default: daari's own; 0: Python's 700)")
    parser.add_argument("--gc-middle", type=int, default=None,
                        help="daari's server.gc_middle_threshold for --streams (default: daari's own; 0: Python's 10)")
    parser.add_argument("--chunk-pace", type=float, default=0.0,
                        help="seconds between deltas for the CPU per chunk table (0: unpaced, bursts; paced, each "
                        "event arrives alone and the figure is a paced chunk's cost)")
    parser.add_argument("--front-end", choices=("hypercorn", "h11"), default=None,
                        help="daari's server.front_end (default: daari's own default, hypercorn)")
    parser.add_argument("--held-only", action="store_true", help="only the --streams run (skip 1 and 2)")
    parser.add_argument("--ollama", action="store_true",
                        help="add the Ollama paths (the fake Ollama direct, an OpenAI client through an Ollama tier)")
    parser.add_argument("--cold", action="store_true", help="measure the cold paths only")
    parser.add_argument("--profile", action="store_true", help="cProfile daari on one path instead")
    parser.add_argument("--profile-path", default=PATHS[1].name, help="the path --profile runs")
    parser.add_argument("--profile-top", type=int, default=40, help="functions --profile prints")
    parser.add_argument("--profile-pace", type=float, default=0.0,
                        help="seconds between deltas for --profile (0: unpaced; paced, each event arrives alone)")
    parser.add_argument("--cold-next", type=int, default=5, help="requests after the second, for the p50")
    args = parser.parse_args()
    if args.profile:
        profile(args)
        return
    if args.cold:
        print_tables([cold_table(args)])
        return
    if args.held_only:
        print_tables([held_table(args)])
        return
    print_tables(relay_tables(args))


if __name__ == "__main__":
    main()
