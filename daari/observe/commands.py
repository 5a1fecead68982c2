"""`daari tail` (follow the live tail) and `daari report` (summarise the decision log)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8787"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tail = sub.add_parser("tail", help="follow daari's routing decisions live")
    tail.add_argument("--url", default=os.environ.get("DAARI_URL", DEFAULT_URL), help=f"daari (default {DEFAULT_URL})")
    tail.add_argument("--json", action="store_true", help="one JSON object per line instead of a table line")
    tail.add_argument("--tier", action="append", default=[], help="only these tiers (repeat or comma-separate)")
    tail.add_argument("--cache", action="append", default=[], help="only this cache result: hit, miss, off...")
    tail.add_argument("--protocol", action="append", default=[], help="only openai, anthropic or responses")
    tail.add_argument("--agent", choices=("true", "false"), default=None, help="only agent turns, or none")
    tail.add_argument("--no-color", action="store_true", help="plain lines (default when not a terminal)")
    report = sub.add_parser("report", help="summarise the decision log: tiers, hit rates, latency, cost saved")
    report.add_argument("--since", default="24h", help="how far back: 30m, 24h, 7d (default 24h)")
    report.add_argument("--json", action="store_true", help="the figures as JSON")
    report.add_argument("--plot", default=None, metavar="FILE.png", help="also draw tier mix and latency")
    report.add_argument("--config", default=None, help="daari.yaml (for data_dir; default ./daari.yaml)")
    report.add_argument("--data-dir", default=None, help="where daari keeps its data (default: as daari serve)")


def run_tail(args: argparse.Namespace) -> int:
    import trio

    from daari.observe.tail_client import follow, tail_url

    filters = {"tier": args.tier, "cache": args.cache, "protocol": args.protocol,
               "agent": [args.agent] if args.agent else []}
    url = tail_url(args.url, filters)
    color = not args.no_color and sys.stdout.isatty()
    # A process started with SIGINT ignored (by a shell's `&`, or a parent that ignores it) inherits that;
    # `daari tail` is followed until Ctrl-C, so Ctrl-C must always end it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return trio.run(lambda: follow(url, as_json=args.json, color=color, token=os.environ.get("DAARI_TOKEN")))
    except KeyboardInterrupt:
        return 0


def run_report(args: argparse.Namespace) -> int:
    from daari.budget.caps import periods
    from daari.budget.report import read_spend, render_spend, spend_summary
    from daari.config import load_config
    from daari.errors import ConfigError
    from daari.observe.decision_log import decisions_path, read_rows
    from daari.observe.report import parse_since, summarize

    try:
        window = parse_since(args.since)
        config_path = args.config or ("daari.yaml" if os.path.exists("daari.yaml") else None)
        config = load_config(config_path, {"data_dir": args.data_dir} if args.data_dir else None)
    except (ValueError, ConfigError) as exc:
        print(f"daari: {exc}", file=sys.stderr)
        return 2
    path = decisions_path(config.data_dir)
    rows = read_rows(path, time.time() - window)
    report = summarize(rows)
    report.update(trust_report(config, time.time() - window))
    report["spend"] = spend_summary(read_spend(config.data_dir, periods(time.time() - window)["day"]))
    if args.json:
        print(json.dumps({"since": args.since, "log": str(path), **report}, indent=2))
    else:
        if not path.exists():
            print(f"no decision log at {path} (is log.decisions on, and has daari served a request?)")
        print_report(report, args.since)
        print("\n" + render_spend(report["spend"]))
    if args.plot:
        from daari.observe.plot import plot_report

        plot_report(rows, Path(args.plot))
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def trust_report(config: Any, since: float) -> dict[str, Any]:
    """`shadow` and `trust` from the shadow outcome store (no server needed); the bars refit from every sample."""
    from daari.trust.report import bars_from_rows, summarize_trust
    from daari.trust.store import read_shadow, shadow_path

    path = shadow_path(config.data_dir)
    rows, skips, diversity = read_shadow(path, since)
    every, _, _ = read_shadow(path, 0.0) if since > 0 else (rows, skips, diversity)
    l1 = config.cache.l1
    return summarize_trust(rows, skips, diversity, bars_from_rows(every, l1.similarity_threshold,
                                                                  l1.error_bound).to_json())


def print_report(report: dict[str, Any], since: str) -> None:
    """A rich table on a terminal; plain text otherwise (pipes, files) or when rich is not installed."""
    from daari.observe.report import render_text

    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(render_text(report, since))
        return
    console = Console()
    if not console.is_terminal:
        print(render_text(report, since))
        return
    table = Table(title=f"daari, last {since}: {report['requests']} requests, {report['errors']} errors")
    for column in ("tier", "requests", "share", "p50 ms", "p95 ms"):
        table.add_column(column, justify="left" if column == "tier" else "right")
    for tier, t in report["tiers"].items():
        table.add_row(tier, str(t["requests"]), f"{t['share'] * 100:.1f}%",
                      "-" if t["p50_ms"] is None else f"{t['p50_ms']:.1f}",
                      "-" if t["p95_ms"] is None else f"{t['p95_ms']:.1f}")
    console.print(table)
    console.print("\n".join(render_text(report, since).splitlines()[len(report["tiers"]) + 3:]))
