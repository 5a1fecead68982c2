"""`python -m bench.gc_under_load`: daari's cyclic-collector pauses while it serves load, per collector setting.

For each `young/middle` pair (`server.gc_young_threshold`, `server.gc_middle_threshold`), one daari (L1 off) in front
of tests/fakes' OpenAI upstream serves `--duration` seconds of L0 hits, then as long of pass-through
(`X-Daari-No-Cache`), at `--connections` connections (wrk when present); its collections in each window are read from
its own `daari_gc_pause_seconds` on /metrics before and after. A setting whose young generation is small collects
during plain request load too (a request's live objects reach it); docs/performance.md, "Shorter young collections".
The settings run one after another, so their request counts are not a speed comparison.

    python -m bench.gc_under_load                                  # 50000/10 (the old default) and 10000/50
    python -m bench.gc_under_load --setting 5000/100 --setting 10000/50
"""

from __future__ import annotations

import argparse

import httpx

from bench.load import measure
from bench.report import Table, machine, print_tables
from bench.servers import daari, dumps, fake_upstream, gc_pauses, openai_tier, workdir

PATH = "/v1/chat/completions"
BODY = dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
HEADERS = {"content-type": "application/json"}
WINDOWS = {"L0 hit": {}, "pass-through": {"X-Daari-No-Cache": "true"}}


def run(settings: list[tuple[int, int]], duration_s: float, connections: int) -> Table:
    table = Table(f"daari's collections over {duration_s:g} s of load at {connections} connections",
                  ["young / middle", "load", "requests", "young collections (ms in all)", "middle", "full"])
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        for young, middle in settings:
            config = {"server": {"gc_young_threshold": young, "gc_middle_threshold": middle},
                      "cache": {"l1": {"enabled": False}}, "tiers": {"L3": openai_tier(upstream.url, "m")}}
            with daari(config, tmp) as server:
                httpx.post(server.url + PATH, content=BODY, headers=HEADERS, timeout=30)  # the hit's entry
                for window, extra in WINDOWS.items():
                    before = gc_pauses(server)
                    load = measure(server, PATH, BODY, {**HEADERS, **extra}, connections=connections,
                                   duration_s=duration_s).load
                    after = gc_pauses(server)
                    count = {g: int(after[g][0] - before.get(g, (0.0, 0.0))[0]) for g in after}
                    young_ms = (after["0"][1] - before.get("0", (0.0, 0.0))[1]) * 1000
                    table.add(f"{young:,} / {middle}", window, f"{load.requests:,}",
                              f"{count.get('0', 0)} ({young_ms:.1f})", count.get("1", 0), count.get("2", 0))
    return table


def setting(text: str) -> tuple[int, int]:
    young, _, middle = text.partition("/")
    return int(young), int(middle or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gc_under_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", action="append", type=setting, metavar="YOUNG/MIDDLE",
                        help="a collector setting to measure (repeatable; default: 50000/10 and 10000/50)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of load per window")
    parser.add_argument("--connections", type=int, default=20)
    args = parser.parse_args(argv)
    print_tables([run(args.setting or [(50_000, 10), (10_000, 50)], args.duration, args.connections)], [machine()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
