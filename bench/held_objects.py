"""`python -m bench.held_objects`: what one held stream keeps alive in daari for the cyclic garbage collector.

A real daari in this process (L1 off) in front of tests/fakes' OpenAI upstream in its own process, pacing its
deltas a minute apart so every stream stays open; raw sockets open `--streams` streams. The tracked objects
(`gc.get_objects()`, after a full collection) are counted before and after, per held stream: by type, and the
coroutines by whose code they run (daari, Trio, Hypercorn) and by function. Each young collection while streams
open walks these; docs/performance.md, "1,000 streams at 2,000 deltas/s on this machine".

    python -m bench.held_objects                # 200 streams
    python -m bench.held_objects --streams 500
"""

from __future__ import annotations

import argparse
import gc
from collections import Counter

import trio

from bench.report import Table, machine, print_tables
from bench.servers import fake_upstream, workdir
from bench.stream_relay import request_of, tier_of
from tests.support import daari_server, make_config

SETTLE_S = 4.0  # for the streams to reach the upstream's first paced wait


def owner(filename: str) -> str:
    for name, part in (("daari", "/daari/"), ("daari", "/actors/"), ("Hypercorn", "/hypercorn/"), ("Trio", "/trio/"),
                       ("h11", "/h11/")):
        if part in filename:
            return name
    return "other"


def census() -> tuple[Counter[str], Counter[str], Counter[str]]:
    gc.collect()
    types: Counter[str] = Counter()
    coroutines: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for obj in gc.get_objects():
        types[type(obj).__name__] += 1
        code = getattr(obj, "cr_code", None) or getattr(obj, "ag_code", None) or getattr(obj, "gi_code", None)
        if code is not None:
            coroutines[owner(code.co_filename)] += 1
            functions[f"{owner(code.co_filename)}: {code.co_qualname}"] += 1
    return types, coroutines, functions


async def hold(url: str, streams: int, salt: int) -> list[trio.SocketStream]:
    host, port = url.removeprefix("http://").split(":")
    path, body, _ = request_of("openai", 40)
    opened = []
    for i in range(streams):
        sock = await trio.open_tcp_stream(host, int(port))
        data = body.replace(b"(0)", f"({salt + i})".encode())
        await sock.send_all(f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
                            f"x-daari-no-cache: true\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
        opened.append(sock)
    return opened


async def measure(streams: int) -> list[Table]:
    with workdir() as tmp, fake_upstream("openai", tmp, token_delay_s=60.0) as upstream:
        config = make_config(tmp, tiers={"L3": tier_of(upstream, "openai")}, cache={"l1": {"enabled": False}})
        async with daari_server(config) as server:
            opened = await hold(server.url, 5, 0)  # the first streams' one-time objects are not counted
            await trio.sleep(SETTLE_S)
            types0, owners0, functions0 = census()
            opened += await hold(server.url, streams, 1000)
            await trio.sleep(SETTLE_S)
            types1, owners1, functions1 = census()
            for sock in opened:
                await sock.aclose()
    total = (sum(types1.values()) - sum(types0.values())) / streams
    by_type = Table(f"Tracked objects per held stream: {total:.1f} (over {streams} streams)",
                    ["type", "per held stream"])
    for name, count in sorted(((n, (types1[n] - types0[n]) / streams) for n in types1), key=lambda t: -t[1])[:20]:
        by_type.add(name, f"{count:.1f}")
    by_owner = Table("Coroutines per held stream, by whose code they run", ["code", "per held stream"])
    for name in sorted(owners1, key=lambda n: -(owners1[n] - owners0[n])):
        by_owner.add(name, f"{(owners1[name] - owners0[name]) / streams:.1f}")
    by_function = Table("Coroutines per held stream, by function", ["function", "per held stream"])
    for name in sorted(functions1, key=lambda n: -(functions1[n] - functions0[n]))[:40]:
        if (count := (functions1[name] - functions0[name]) / streams) >= 0.5:
            by_function.add(name, f"{count:.1f}")
    return [by_type, by_owner, by_function]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.held_objects", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=200)
    args = parser.parse_args(argv)
    print_tables(trio.run(measure, args.streams), [machine()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
