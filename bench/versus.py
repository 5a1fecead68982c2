"""`python -m bench.versus REV`: daari at git revision REV vs daari in this tree, back to back in one run.

The L0 hit path and pass-through (cache off), each at 1 and 20 connections, against the same fake upstream and
with the same load client. REV's tree is exported with `git archive` into a temporary directory and served by
this venv's interpreter (`python -m daari` with that tree first on PYTHONPATH), so REV's dependencies must
still import. The servers take turns, `--rounds` times (3 by default), and each row shows each server's
median turn, with every turn's req/s beside it. The median, not the best: on a shared VM whole turns run
faster as well as slower than usual (b076afb once answered hits at 463 CPU us a request, 10% below any of its
~30 other turns), so a best-of-two compares outliers. This is the check of issue 8's "no slower than before"
(REV = b076afb, the commit before issues 7-12). `--like-for-like` also runs this tree with the features REV
did not have turned off (`LATER_FEATURES_OFF`: L1 and the decision log), in the same turns: the cost of issue 8's
own work apart from what those later features cost. `make bench` runs it that way, five turns of 5 s rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import Measured, measure, tool_name
from bench.report import Table, print_tables, ratio
from bench.servers import ROOT, daari, dumps, fake_upstream, server_core, workdir

WARMUP_S = 2.0
PATHS = ("L0 hit", "pass-through (no cache)")
CONNECTIONS = (1, 20)


@contextmanager
def exported(rev: str) -> Iterator[Path]:
    """REV's files (not a worktree: nothing to clean up in the repository)."""
    with tempfile.TemporaryDirectory(prefix="daari-versus-") as tmp:
        archive = Path(tmp) / "tree.tar"
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev], check=True)
        tree = Path(tmp) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        yield tree


def measure_tree(tree: Path | None, upstream_url: str, log_dir: Path, duration_s: float,
                 overlay: dict[str, Any] | None = None) -> dict[tuple[str, int], Measured]:
    """Both paths at both connection counts against one fresh daari served from `tree` (None: this tree)."""
    out: dict[tuple[str, int], Measured] = {}
    hit_body = dumps(REQUEST)
    pass_body, no_cache = dumps({**REQUEST, "model": "good"}), {**HEADERS, "X-Daari-No-Cache": "true"}
    config = proxy_config(upstream_url)
    for section, values in (overlay or {}).items():
        present = config.get(section)
        config[section] = {**(present if isinstance(present, dict) else {}), **values}
    with daari(config, log_dir, cores=server_core(), tree=tree) as proxy:
        warm_hit(proxy)
        for name, body, headers in (("L0 hit", hit_body, HEADERS), ("pass-through (no cache)", pass_body, no_cache)):
            measure(proxy, PATH, body, headers, connections=20, duration_s=WARMUP_S)
            for connections in CONNECTIONS:
                out[(name, connections)] = measure(proxy, PATH, body, headers, connections=connections,
                                                   duration_s=duration_s)
    return out


def median_turn(runs: list[dict[tuple[str, int], Measured]], key: tuple[str, int]) -> Measured:
    """The turn with the median req/s (the lower middle one of an even count), whole: its CPU figure with it."""
    ordered = sorted((run[key] for run in runs), key=lambda m: m.load.rps)
    return ordered[(len(ordered) - 1) // 2]


def turns(runs: list[dict[tuple[str, int], Measured]], key: tuple[str, int]) -> str:
    return " / ".join(f"{run[key].load.rps:,.0f}" for run in runs)


def has_revision(rev: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


# The features this tree has and b076afb (the commit before issues 7-12) lacked, each on by default, turned off
# for a like-for-like run: L1's embedding model (issue 10) and the decision log with its writer process (issue
# 11). Issue 8's own work (the request guard, credential partitions, the decision hub with its metrics and log
# line, bounded caches) stays on, so the like-for-like ratio is what that work costs the hit path.
LATER_FEATURES_OFF: dict[str, Any] = {"cache": {"l1": {"enabled": False}}, "log": {"decisions": False}}


def run(rev: str, duration_s: float = 5.0, rounds: int = 3, overlay: dict[str, Any] | None = None,
        like_for_like: dict[str, Any] | None = None) -> list[Table]:
    """`overlay`: config sections merged into this tree's daari (e.g. {"log": {"decisions": False}}).
    `like_for_like`: a second configuration of this tree, measured in the same turns (the features REV lacks
    turned off, `LATER_FEATURES_OFF`), so the table shows what this tree costs as configured and like for like."""
    if not has_revision(rev):  # a shallow clone, or a tarball without history
        skipped = Table(f"daari at {rev} vs this tree: not run", ["reason"])
        skipped.add(f"revision {rev} is not in this repository (fetch the full history to compare)")
        return [skipped]
    configs = [overlay or {}] + ([_merged(overlay or {}, like_for_like)] if like_for_like is not None else [])
    baseline: list[dict[tuple[str, int], Measured]] = []
    current: list[list[dict[tuple[str, int], Measured]]] = [[] for _ in configs]
    with exported(rev) as tree, workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        for _ in range(rounds):
            baseline.append(measure_tree(tree, upstream.url, tmp, duration_s))
            for runs, config in zip(current, configs, strict=True):
                runs.append(measure_tree(None, upstream.url, tmp, duration_s, config))
    names = ["this tree"] + (["like for like"] if like_for_like is not None else [])
    columns = ["path", "connections", f"{rev} req/s"]
    for name in names:
        columns += [f"{name} req/s", f"{name} / {rev}"]
    columns += [f"CPU us/req: {rev} / " + " / ".join(names), f"{rev} turns, req/s"] + [f"{n} turns" for n in names]
    table = Table(f"daari at {rev} vs this tree: req/s and daari's CPU per request (median of {rounds} turns each)",
                  columns)
    for path in PATHS:
        for connections in CONNECTIONS:
            key = (path, connections)
            before = median_turn(baseline, key)
            afters = [median_turn(runs, key) for runs in current]
            cells: list[object] = [path, connections, before.load.rps]
            for after in afters:
                cells += [after.load.rps, ratio(after.load.rps, before.load.rps)]
            cpu = " / ".join(f"{m.cpu_us_per_request:,.0f}" for m in (before, *afters))
            table.add(*cells, cpu, turns(baseline, key), *(turns(runs, key) for runs in current))
    if overlay:
        table.notes.append(f"this tree's daari ran with {json.dumps(overlay)} merged into its config")
    if like_for_like is not None:
        table.notes.append(f"like for like: this tree with {json.dumps(like_for_like)} merged in (features {rev} "
                           "did not have, turned off)")
    table.notes.append(f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up "
                       "at 20 connections; the servers took turns against the same fake OpenAI upstream; CPU "
                       "includes each server's child processes (this tree's decision log writer)")
    return [table]


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra`'s sections over `base`'s, key by key."""
    out = {section: dict(values) for section, values in base.items()}
    for section, values in extra.items():
        out[section] = {**out.get(section, {}), **values}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the git revision to compare with (e.g. b076afb)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured row")
    parser.add_argument("--rounds", type=int, default=3, help="turns each server takes (the median is shown)")
    parser.add_argument("--config", default="{}", help="JSON config sections merged into this tree's daari only, "
                        "e.g. '{\"log\": {\"decisions\": false}}'")
    parser.add_argument("--like-for-like", action="store_true",
                        help="also measure this tree with the features b076afb lacked turned off (L1, decision log)")
    args = parser.parse_args()
    print_tables(run(args.rev, args.duration, args.rounds, json.loads(args.config),
                     LATER_FEATURES_OFF if args.like_for_like else None))


if __name__ == "__main__":
    main()
