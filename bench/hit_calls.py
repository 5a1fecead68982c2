"""`python -m bench.hit_calls REV`: Python calls per served L0 hit under wrk, this tree vs REV, by package.
`python -m bench.hit_calls --front-ends`: this tree on Hypercorn vs on its h11 front end (`server.front_end`).

The served process (Hypercorn, h11, Trio and daari together, as `bench.versus` runs it) under cProfile, with
`--connections` clients for `--duration` seconds. A second run of the same tree without the load gives the
start-up's calls, which are taken off, so what is left is per hit. cProfile counts a coroutine's every resume
as a call. A call count does not move with the machine's load the way CPU time does: where `bench.versus` shows
a gap, this shows whether it is daari's own work (its rows differ) or not (only the time per call does).
"""

from __future__ import annotations

import argparse
import contextlib
import pstats
from collections import Counter
from pathlib import Path

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import run_load
from bench.servers import PYTHON, daari, dumps, fake_upstream, workdir
from bench.versus import exported

Row = tuple[str, str]  # (package, function)


def profile(tree: Path | None, out: Path, upstream_url: str, log_dir: Path, connections: int,
            duration_s: float, front_end: str = "hypercorn") -> int:
    """Serve under cProfile into `out`; hits under load for `duration_s` (0: start, one hit, stop)."""
    launcher = [PYTHON, "-m", "cProfile", "-o", str(out), "-m", "daari"]
    requests = 0
    config = proxy_config(upstream_url)
    if front_end != "hypercorn":
        config["server"] = {**config["server"], "front_end": front_end}  # type: ignore[dict-item]
    with daari(config, log_dir, tree=tree, launcher=launcher, ready_timeout_s=300) as proxy:
        warm_hit(proxy)
        if duration_s:
            load = run_load(proxy.url + PATH, dumps(REQUEST), HEADERS, connections=connections,
                            duration_s=duration_s)
            requests = load.requests
    return requests


def per_hit(loaded: Path, idle: Path, hits: int) -> Counter[Row]:
    """Calls per hit of each function: the loaded run's, less the idle run's (start-up)."""
    base = pstats.Stats(str(idle)).stats  # type: ignore[attr-defined]
    calls: Counter[Row] = Counter()
    for (path, _line, name), (_cc, count, *_rest) in pstats.Stats(str(loaded)).stats.items():  # type: ignore[attr-defined]
        before = base.get((path, _line, name))
        calls[(package(path), name)] += (count - (before[1] if before else 0)) / hits
    return calls


def package(path: str) -> str:
    """What a profiled file belongs to: a site package, daari/actors, the standard library, or a builtin."""
    if path == "~":
        return "builtins"
    if "site-packages/" in path:
        return path.split("site-packages/")[1].split("/")[0]
    for top in ("daari", "actors"):
        if f"/{top}/" in path:
            return top
    return "stdlib"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", nargs="?", help="the revision to compare with (e.g. 49e1cd6)")
    parser.add_argument("--front-ends", action="store_true",
                        help="compare this tree on Hypercorn (as REV) with this tree on the h11 front end")
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rows", type=int, default=25, help="functions shown, by the largest difference")
    args = parser.parse_args()
    if args.front_ends:
        args.rev = "hypercorn"
    elif args.rev is None:
        parser.error("give REV, or --front-ends")
    with workdir() as log_dir, fake_upstream("openai", log_dir) as upstream, \
            (contextlib.nullcontext(None) if args.front_ends else exported(args.rev)) as old:
        tables: dict[str, Counter[Row]] = {}
        runs = ((("this tree", None, "h11"), (args.rev, None, "hypercorn")) if args.front_ends
                else (("this tree", None, "hypercorn"), (args.rev, old, "hypercorn")))
        for label, tree, front_end in runs:
            idle, loaded = log_dir / f"{label}-idle.prof", log_dir / f"{label}-load.prof"
            profile(tree, idle, upstream.url, log_dir, args.connections, 0, front_end)
            hits = profile(tree, loaded, upstream.url, log_dir, args.connections, args.duration, front_end)
            tables[label] = per_hit(loaded, idle, hits)
            print(f"{label} ({front_end}): {hits} hits at {args.connections} connections", flush=True)
    new, old_calls = tables["this tree"], tables[args.rev]
    packages = sorted({p for p, _ in new} | {p for p, _ in old_calls})
    print(f"\n| package | {args.rev} calls/hit | this tree calls/hit | difference |\n|---|---|---|---|")
    for pkg in sorted(packages, key=lambda p: -sum(v for (q, _), v in new.items() if q == p)):
        a = sum(v for (q, _), v in old_calls.items() if q == pkg)
        b = sum(v for (q, _), v in new.items() if q == pkg)
        if max(a, b) >= 1:
            print(f"| {pkg} | {a:,.0f} | {b:,.0f} | {b - a:+,.0f} |")
    print(f"| all | {sum(old_calls.values()):,.0f} | {sum(new.values()):,.0f} | "
          f"{sum(new.values()) - sum(old_calls.values()):+,.0f} |")
    rows = sorted(set(new) | set(old_calls), key=lambda r: -abs(new[r] - old_calls[r]))[:args.rows]
    print(f"\n| function | {args.rev} | this tree |\n|---|---|---|")
    for pkg, name in rows:
        print(f"| {pkg}: {name} | {old_calls[(pkg, name)]:.1f} | {new[(pkg, name)]:.1f} |")


if __name__ == "__main__":
    main()
