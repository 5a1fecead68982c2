"""`python -m bench.crash_safety [--rounds N]`: kill -9 daari during sustained L0 writes, N times, one data dir.

Each round starts `daari serve` on the same data dir (the restart must be clean: /healthz answers), replays a
sample of the prompts answered in earlier rounds (an L0 hit must be the very answer first given, whole), then
sends distinct prompts from a few client threads (every answer is an L0 write, and a decision-log row) and
SIGKILLs daari once enough have been answered, writes in flight. After each kill: `PRAGMA integrity_check` on
the L0 store and on the decision log, every L0 row's checksum holds, and daari's decision-log writer process
(its child) has exited rather than been orphaned. tests/test_crash_safety.py runs 2 rounds; this command more.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from bench import servers
from bench.servers import HOST, PYTHON, ROOT, Server, fake_upstream, free_port, openai_tier, workdir
from daari.cache.l0_store import L0Store

WRITERS = 4  # client threads sending distinct prompts at once


@dataclass
class Round:
    answered: int = 0  # prompts answered before the kill landed
    replayed: int = 0  # earlier answers asked again after the restart
    hits: int = 0  # of those, served from L0
    wrong_hits: list[str] = field(default_factory=list)  # hits that differ from the first answer (truncated...)
    integrity: dict[str, str] = field(default_factory=dict)  # file -> PRAGMA integrity_check's answer
    l0_rows: int = 0
    l0_bad_rows: int = 0  # rows whose checksum fails or that do not parse
    decision_rows: int = 0
    orphans: int = 0  # daari's child processes still alive 10 s after it was killed

    @property
    def ok(self) -> bool:
        return (not self.wrong_hits and all(v == "ok" for v in self.integrity.values()) and not self.l0_bad_rows
                and not self.orphans and self.answered > 0)


def config(upstream_url: str) -> dict[str, Any]:
    """One upstream tier; L1 off (only L0 is under test); decisions flushed often, so rows are in flight too."""
    return {"server": {"grace_period_s": 1}, "tiers": {"L3": openai_tier(upstream_url, "good")},
            "cache": {"l1": {"enabled": False}}, "log": {"flush_interval_s": 0.05}}


def start(config_path: Path, data_dir: Path, log_dir: Path) -> Server:
    port = free_port()
    process, log_path = servers._spawn(f"daari-{port}", [
        PYTHON, "-m", "daari", "serve", "--config", str(config_path), "--port", str(port),
        "--data-dir", str(data_dir)], log_dir, None, env={"DAARI_LOG_LEVEL": "WARNING"}, cwd=ROOT)
    server = Server("daari", f"http://{HOST}:{port}", process, log_path)
    # A bound on a hang, not a timing: a start on a machine running other suites took over 60 s once (CI).
    try:
        servers._wait_http(server, "/healthz", 180)
    except BaseException:
        servers.stop(server)  # a start that failed leaves no daari behind (one outlived a failed CI run)
        raise
    return server


def ask(client: httpx.Client, prompt: str, stream: bool) -> tuple[str, str] | None:
    """The answer's text and x-daari-cache, or None when daari did not answer whole (it is being killed)."""
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "stream": stream}
    try:
        response = client.post("/v1/chat/completions", json=body)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    cache = response.headers.get("x-daari-cache", "")
    if not stream:
        return str(response.json()["choices"][0]["message"]["content"]), cache
    if not response.text.rstrip().endswith("data: [DONE]"):
        return None
    text = ""
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
    return text, cache


def one_round(number: int, server: Server, answers: dict[str, str], kill_after: int) -> Round:
    result = Round()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for prompt in list(answers)[-50:]:  # the latest: written just before the last kill
            got = ask(client, prompt, stream=False)
            assert got is not None, f"daari did not answer after a restart:\n{server.log_tail()}"
            result.replayed += 1
            if got[1] == "hit":
                result.hits += 1
                if got[0] != answers[prompt]:
                    result.wrong_hits.append(prompt)
    answered = threading.Semaphore(0)
    lock = threading.Lock()
    stop = threading.Event()

    def writer(thread: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            i = 0
            while not stop.is_set():
                prompt = f"round {number} writer {thread} prompt {i}: explain {i * 7919 % 1000} briefly"
                got = ask(client, prompt, stream=i % 2 == 1)
                if got is not None:
                    with lock:
                        answers[prompt] = got[0]
                        result.answered += 1
                    answered.release()
                i += 1

    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(WRITERS)]
    for thread in threads:
        thread.start()
    for _ in range(kill_after):
        if not answered.acquire(timeout=60):
            break
    children = server.ps.children(recursive=True)
    os.kill(server.process.pid, signal.SIGKILL)  # writes in flight: L0 batches, decision rows
    server.process.wait(10)
    stop.set()
    for thread in threads:
        thread.join(60)
    _gone, alive = psutil.wait_procs(children, timeout=10)
    result.orphans = len(alive)
    for child in alive:  # ours to clean up; counted as a failure above
        child.kill()
    return result


def check_files(data_dir: Path, result: Round) -> None:
    for name in ("l0.sqlite", "decisions.sqlite"):
        path = data_dir / name
        if path.exists():
            with sqlite3.connect(path) as conn:
                result.integrity[name] = str(conn.execute("pragma integrity_check").fetchone()[0])
    store = L0Store(data_dir / "l0.sqlite")
    keys = store.keys()
    result.l0_rows = len(keys)
    result.l0_bad_rows = sum(1 for key in keys if store.get(key) is None)
    store.close()
    if (data_dir / "decisions.sqlite").exists():
        with sqlite3.connect(data_dir / "decisions.sqlite") as conn:
            result.decision_rows = int(conn.execute("select count(*) from decisions").fetchone()[0])


def run(rounds: int, upstream_url: str, work: Path, kill_after: int = 40) -> list[Round]:
    """`rounds` kills on one data dir; the last round's restart is checked too (a final start and replay)."""
    data_dir = work / "data"
    config_path = work / "daari.yaml"
    config_path.write_text(yaml.safe_dump(config(upstream_url)))
    answers: dict[str, str] = {}
    results = []
    for number in range(rounds):
        server = start(config_path, data_dir, work)
        result = one_round(number, server, answers, kill_after)
        check_files(data_dir, result)
        results.append(result)
    server = start(config_path, data_dir, work)  # the restart after the last kill
    try:
        final = Round()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for prompt in list(answers)[-50:]:
                got = ask(client, prompt, stream=False)
                assert got is not None, server.log_tail()
                final.replayed += 1
                if got[1] == "hit":
                    final.hits += 1
                    if got[0] != answers[prompt]:
                        final.wrong_hits.append(prompt)
        results.append(final)
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(15)
        except subprocess.TimeoutExpired:
            server.process.kill()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--kill-after", type=int, default=40, help="answers per round before the kill")
    args = parser.parse_args()
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        results = run(args.rounds, upstream.url, tmp, args.kill_after)
    kills = results[:-1]
    print(f"{len(kills)} kill -9 rounds on one data dir: {sum(r.answered for r in kills)} answers written, "
          f"integrity_check ok {sum(all(v == 'ok' for v in r.integrity.values()) for r in kills)}/{len(kills)}, "
          f"L0 rows failing their checksum {sum(r.l0_bad_rows for r in kills)}, "
          f"hits replayed after restarts {sum(r.hits for r in results)}/{sum(r.replayed for r in results)} "
          f"(wrong {sum(len(r.wrong_hits) for r in results)}), orphaned children {sum(r.orphans for r in kills)}, "
          f"decision rows {kills[-1].decision_rows if kills else 0}")
    raise SystemExit(0 if all(r.ok for r in kills) and not results[-1].wrong_hits else 1)


if __name__ == "__main__":
    main()
