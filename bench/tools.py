"""`python -m bench.tools`: what the rule and tool tiers cost and save, measured in one run.

1. The price every request pays: the L2 rule check and the command-pattern match on a prompt that is
   neither (microseconds, in one process).
2. Answers through a real daari on 127.0.0.1 (httpx, sequential): an L2 conversion, `git status` run by Lt,
   the same answered from the CCS, against a model tier (a fake OpenAI upstream that answers at once, so
   the model row is daari's floor for a model answer, not a real model's time).
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import trio

from bench.report import Table, print_tables
from daari.config import config_from_dict
from daari.rules.transforms import apply_rules
from daari.server.serve import run_server
from daari.tools.patterns import best_command
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app

CALLS = 2000
ROUNDS = 40
PROMPT = ("Why does my Python service leak memory when I keep a dict of open sockets keyed by client id? "
          "It grows until the process is killed.")


def _us(fn: object, calls: int = CALLS) -> float:
    assert callable(fn)
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def _repo(path: Path) -> Path:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path), "PATH": "/usr/bin:/bin"}
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True, env=env)
    for i in range(200):
        (path / f"f{i}.txt").write_text(f"{i}\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "i"], cwd=path,
                   check=True, env=env)
    return path


async def _served(base: Path) -> dict[str, list[float]]:
    repo = _repo(base / "repo")
    fake = FakeOpenAI()
    times: dict[str, list[float]] = {}
    async with serve_app(fake) as upstream:
        config = config_from_dict({"server": {"port": 0}, "data_dir": str(base / "data"),
                                   "cache": {"l0": {"enabled": False}},
                                   "tiers": {"L3": {"executor": "openai", "base_url": upstream + "/v1"}},
                                   "tools": {"enabled": True, "repo_root": str(repo)}})
        async with trio.open_nursery() as nursery:
            server = await nursery.start(run_server, config)
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                cases = {
                    "L2: Format as JSON (lenient literal)": ("Format as JSON: {name: 'daari', tiers: [3, 4, 6]}", {}),
                    "Lt: git status (runs git, 200 files)": ("git status", {"x-daari-rerun-command": "true"}),
                    "CCS: git status again within 60 s": ("git status", {}),
                    "L3 (fake upstream answering at once)": (PROMPT, {}),
                }
                for name, (text, headers) in cases.items():
                    samples = []
                    for _ in range(ROUNDS):
                        start = time.perf_counter()
                        reply = await client.post("/v1/chat/completions", headers=headers, json={
                            "model": "good", "messages": [{"role": "user", "content": text}]})
                        samples.append((time.perf_counter() - start) * 1000)
                        assert reply.status_code == 200, reply.text
                    times[name] = samples
            nursery.cancel_scope.cancel()
    return times


def run() -> list[Table]:
    cost = Table("What the rule and tool checks add to a request they do not answer (us per call, one process)",
                 ["check", "us per call"])
    cost.add("L2 rules on a 130-character question", _us(lambda: apply_rules(PROMPT, 262144)))
    cost.add("command patterns on the same question", _us(lambda: best_command(PROMPT)))
    cost.add("command patterns on 'git status' (a match)", _us(lambda: best_command("git status")))
    with tempfile.TemporaryDirectory() as base:
        times = trio.run(_served, Path(base))
    served = Table(f"Answers through daari on 127.0.0.1, {ROUNDS} sequential requests each (ms)",
                   ["answer", "median", "p90"])
    for name, samples in times.items():
        served.add(name, statistics.median(samples), statistics.quantiles(samples, n=10)[-1])
    served.notes.append("the L3 row is an upstream that answers at once: a real local model takes seconds")
    return [cost, served]


def main() -> None:
    print_tables(run())


if __name__ == "__main__":
    main()
