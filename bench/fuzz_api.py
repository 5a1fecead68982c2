"""`python -m bench.fuzz_api [--max-time S]`: schemathesis against a live daari, from its own /openapi.json.

daari runs as its own process (`daari serve`) in front of the fake OpenAI upstream (tests/fakes). schemathesis
generates requests for every operation in /openapi.json (coverage, fuzzing and stateful phases) for a bounded
time, and checks each answer: no 5xx from daari itself (`not_a_server_error`) and every error in the client's
protocol's shape (bench/fuzz_checks.py, the property tests' rule). Afterwards daari must still answer
/healthz, and its log must hold no traceback. Prints one line: N generated requests, crashes, unshaped errors.
Exit status 1 on any finding (the failing requests are printed as curl commands by schemathesis).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from bench.servers import ROOT, daari, fake_upstream, openai_tier, workdir

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
CHECKS = "not_a_server_error,error_in_the_clients_shape"


def config(upstream_url: str) -> dict[str, object]:
    """One upstream tier (the fake's "good" model); L1 off: its embedding model would only slow generation."""
    return {"server": {"grace_period_s": 1}, "tiers": {"L3": openai_tier(upstream_url, "good")},
            "cache": {"l1": {"enabled": False}}}


def run(max_time_s: int, seed: int | None = None) -> int:
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, daari(config(upstream.url), tmp) as server:
        argv = [SCHEMATHESIS, "run", server.url + "/openapi.json", "--max-time", str(max_time_s),
                "--checks", CHECKS, "--request-timeout", "30",
                # one worker: hypothesis parses its strategies' lambdas with `ast`, which is not thread-safe
                # on CPython 3.11 ("AST constructor recursion depth mismatch" with 2 workers)
                "--workers", "1", "--no-color", *(["--seed", str(seed)] if seed is not None else [])]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": "bench.fuzz_checks",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        healthy = httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        log = server.log_path.read_text(errors="replace")
    out = done.stdout + done.stderr
    counts = re.search(r"(\d+) generated, (\d+) (?:passed|found)", out)
    # the summary's "Failures:" lines, e.g. "❌ ST901 Custom check failed: `error_in_the_clients_shape`: 28"
    failures = {title: int(n) for title, n in re.findall(r"^\s*❌ \S+ (.+): (\d+)$", out, re.M)}
    crashes = sum(n for title, n in failures.items() if "Server error" in title) + log.count("Traceback")
    unshaped = sum(n for title, n in failures.items() if "error_in_the_clients_shape" in title)
    generated = int(counts.group(1)) if counts else 0
    print(out[-4000:] if done.returncode else "\n".join(out.splitlines()[-6:]))
    print(f"schemathesis: {generated} generated requests in {max_time_s} s, {crashes} crashes (5xx from daari "
          f"or a traceback in its log), {unshaped} unshaped errors, {sum(failures.values())} failures in all; "
          f"daari {'healthy' if healthy else 'NOT healthy'} afterwards")
    return 0 if done.returncode == 0 and healthy and crashes == 0 and generated > 0 else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-time", type=int, default=120, help="seconds of generated requests")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    sys.exit(run(args.max_time, args.seed))


if __name__ == "__main__":
    main()
