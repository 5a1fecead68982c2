"""`python -m bench.run_all` (`make bench`): every benchmark part in one run, then all tables.

Parts: a loopback calibration of the machine; the L0 hit path (daari vs a bare Hypercorn app); pass-through
(daari vs the upstream directly); stream paths with escalation (TTFT and total vs the upstream directly);
memory; where a hit's CPU goes; with `--versus REV`, the hit path and pass-through against daari at REV.
Ratios are within this one run.
"""

from __future__ import annotations

import argparse
import time

from bench import calibrate, escalation, hit_steps, l0_hit, memory, passthrough, versus
from bench.load import tool_name
from bench.report import Table, machine, print_tables
from bench.servers import placement


def cpu_busy_pct(seconds: float = 2.0) -> float:
    """How busy the whole machine is before we start (other work skews every figure), from /proc/stat."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    busy0, total0 = sample()
    time.sleep(seconds)
    busy1, total1 = sample()
    return 100 * (busy1 - busy0) / max(1, total1 - total0)


def litellm_context() -> Table:
    table = Table("External context, NOT measured by us: LiteLLM (figures quoted from the issue)",
                  ["LiteLLM 1.108, one worker, local cache", "p50 ms", "req/s"])
    table.add("cached request", "8", "117")
    table.add("pass-through", "12.5", "~100")
    table.notes.append("measured by the issue's author on a machine like this one, not in this run; "
                       "compare orders of magnitude, not digits")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per load-test row")
    parser.add_argument("--requests", type=int, default=20, help="stream requests per escalation path")
    parser.add_argument("--streams", type=int, default=1000, help="open streams for the memory part")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for the machine to be under 15%% busy")
    parser.add_argument("--versus", metavar="REV", default=None,
                        help="also compare the hit path and pass-through with daari at this git revision")
    args = parser.parse_args()
    started = time.monotonic()
    busy = cpu_busy_pct()
    while busy >= 15 and time.monotonic() - started < args.wait_quiet:
        print(f"machine {busy:.0f}% busy: waiting for it to quieten", flush=True)
        busy = cpu_busy_pct(10)
    print(f"machine: {machine()}; load client: {tool_name()}; placement: {placement()}; "
          f"machine busy before the run: {busy:.0f}%\n", flush=True)
    for name, part in (("calibration", calibrate.run),
                       ("L0 hit", lambda: l0_hit.run(args.duration)),
                       ("pass-through", lambda: passthrough.run(args.duration)),
                       ("escalation", lambda: escalation.run(args.requests)),
                       ("memory", lambda: memory.run(sizes=(max(1, args.streams // 10), args.streams))),
                       ("hit steps", hit_steps.run),
                       # Five shorter turns per server, not three long ones: the median of five is steadier
                       # on a VM whose whole turns run a few percent fast or slow.
                       *([(f"versus {args.versus}", lambda: versus.run(args.versus, args.duration / 2, rounds=5,
                                                                        like_for_like=versus.LATER_FEATURES_OFF))]
                         if args.versus else [])):
        part_start = time.monotonic()
        part_tables = part()
        print(f"[{name}: {time.monotonic() - part_start:.0f} s]", flush=True)
        print_tables(part_tables)
    print_tables([litellm_context()])
    print(f"total: {time.monotonic() - started:.0f} s; machine busy after the run: {cpu_busy_pct():.0f}%")


if __name__ == "__main__":
    main()
