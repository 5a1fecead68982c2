"""ToolRunnerActor with real subprocesses: capped output and logs, timeouts and client disconnects kill the
whole process group, bounded concurrency that never blocks the mailbox, shedding, the CCS, a scrubbed env."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from actors.faults import FAULTS
from actors.runtime import Address, Health, Mailbox, supervise
from actors.tool_runner import CcsGet, CcsInvalidate, RunCommand, RunRefused, RunResult, ToolRunnerActor
from daari.config import ToolsConfig
from daari.errors import Overloaded
from daari.tools.ccs_store import CcsEntry, CcsStore
from daari.tools.plan import CommandPlan, ccs_key
from tests.tool_sandbox import mode, read


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def plan(cwd: Path, argv: list[str], *, timeout_s: float = 60.0, ttl_s: float = 0.0,
         display: str = "cmd") -> CommandPlan:
    return CommandPlan("DEV-03", "test", "test", tuple(argv), display, cwd, timeout_s, ttl_s)


@asynccontextmanager
async def runner(tmp_path: Path, **config: object) -> AsyncIterator[Address]:
    mailbox = Mailbox("tool_runner", 16, FAULTS)
    tools = ToolsConfig(**config)  # type: ignore[arg-type]
    env = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-secret", "GITHUB_TOKEN": "ghp_secret",
           "GIT_DIR": "/elsewhere", "LD_PRELOAD": "/evil.so", "KEEP_ME": "yes"}
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, lambda: ToolRunnerActor(tmp_path / "data", tools, env), mailbox,
                            Health().status("tool_runner"))
        yield mailbox.address
        nursery.cancel_scope.cancel()


async def run_to_end(address: Address, command: CommandPlan) -> RunResult:
    result = await address.call(RunCommand(command))
    assert isinstance(result, RunResult)
    return result


def wait_for_file(path: Path, limit_s: float = 20.0) -> str:
    """Blocking (run in a thread): the file's content once a process wrote it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


def is_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # killed, not yet reaped by its new parent


def wait_gone(pids: list[int], limit_s: float = 20.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if all(is_gone(p) for p in pids):
            return True
        time.sleep(0.01)
    return False


async def test_output_is_capped_in_the_answer_and_whole_in_the_log(tmp_path: Path) -> None:
    noisy = script(tmp_path / "noisy.sh", 'echo FIRST-LINE\ni=0\nwhile [ $i -lt 3000 ]; do echo "line $i"; '
                                          'i=$((i+1)); done\necho LAST-LINE\nexit 3\n')
    async with runner(tmp_path, answer_max_chars=400) as address:
        result = await run_to_end(address, plan(tmp_path, [str(noisy)], display="./noisy.sh"))
    assert result.exit_code == 3 and not result.timed_out
    assert result.summary.startswith("FIRST-LINE") and result.summary.rstrip().endswith("LAST-LINE")
    assert "bytes omitted" in result.summary and len(result.summary) < 600
    assert Path(result.log_path).parent == tmp_path / "data" / "tools" / "logs" and mode(result.log_path) == 0o600
    text = read(result.log_path)
    assert text.startswith("$ ./noisy.sh\n") and "line 1500\n" in text and "LAST-LINE" in text
    assert result.output_bytes == len(text.split("\n", 2)[2].encode())


async def test_log_size_is_capped_too(tmp_path: Path) -> None:
    noisy = script(tmp_path / "noisy.sh", 'i=0\nwhile [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done\n')
    async with runner(tmp_path, log_max_bytes=1000) as address:
        result = await run_to_end(address, plan(tmp_path, [str(noisy)]))
    text = read(result.log_path)
    assert "[log truncated:" in text and len(text) < 1200 and result.output_bytes > 10000


async def test_timeout_kills_the_whole_process_group(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    pids = tmp_path / "pids"
    slow = script(tmp_path / "slow.sh", f"sleep 120 &\necho $$ $! > {pids}\nsleep 120\n")
    async with runner(tmp_path) as address:
        results: list[RunResult | RunRefused] = []

        async def run() -> None:
            results.append(await address.call(RunCommand(plan(tmp_path, [str(slow)], timeout_s=30))))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            started = [int(p) for p in (await trio.to_thread.run_sync(wait_for_file, pids)).split()]
            mock_clock.jump(31)  # past the command's timeout, in Trio's time
        result = results[0]
    assert isinstance(result, RunResult) and result.timed_out and result.exit_code is None
    assert await trio.to_thread.run_sync(wait_gone, started)  # the shell and the sleep it left behind


async def test_a_client_going_away_kills_the_command_and_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    slow = script(tmp_path / "slow.sh", f"sleep 120 &\necho $$ $! > {pids}\nsleep 120\n")
    async with runner(tmp_path) as address:
        async with trio.open_nursery() as request:
            request.start_soon(address.call, RunCommand(plan(tmp_path, [str(slow)])))
            started = [int(p) for p in (await trio.to_thread.run_sync(wait_for_file, pids)).split()]
            request.cancel_scope.cancel()  # what a client going away does to its request
        assert await trio.to_thread.run_sync(wait_gone, started)


async def test_children_left_behind_by_a_finished_command_are_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    quick = script(tmp_path / "quick.sh", f"sleep 120 > /dev/null 2>&1 &\necho $! > {pids}\necho done\n")
    async with runner(tmp_path) as address:
        result = await run_to_end(address, plan(tmp_path, [str(quick)]))
    assert result.exit_code == 0 and "done" in result.summary
    assert await trio.to_thread.run_sync(wait_gone, [int(pids.read_text())])


async def test_concurrency_is_bounded_and_the_mailbox_stays_free(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    started = tmp_path / "started"
    waiting = script(tmp_path / "wait.sh", f'echo "$1" >> {started}\nwhile [ ! -e {gate} ]; do sleep 0.01; done\n')
    async with runner(tmp_path, max_concurrency=1, max_queue=1) as address:
        results: dict[str, RunResult | RunRefused] = {}

        async def run(name: str) -> None:
            results[name] = await address.call(RunCommand(plan(tmp_path, [str(waiting), name])))

        async with trio.open_nursery() as requests:
            requests.start_soon(run, "one")
            await trio.to_thread.run_sync(wait_for_file, started)
            requests.start_soon(run, "two")
            await trio.testing.wait_all_tasks_blocked()
            # One running, one queued: the mailbox still answers at once, and a third run is shed.
            assert await address.call(CcsGet("nothing")) is None
            with pytest.raises(Overloaded, match="tools.max_queue"):
                await address.call(RunCommand(plan(tmp_path, [str(waiting), "three"])))
            assert started.read_text() == "one\n"  # the second waits for the slot
            gate.touch()
        one, two = results["one"], results["two"]
    assert isinstance(one, RunResult) and isinstance(two, RunResult) and one.exit_code == two.exit_code == 0
    assert started.read_text() == "one\ntwo\n"


async def test_results_go_to_the_ccs_with_their_ttl(tmp_path: Path) -> None:
    hello = script(tmp_path / "hello.sh", "echo hello\n")
    command = plan(tmp_path, [str(hello)], ttl_s=300, display="./hello.sh")
    async with runner(tmp_path) as address:
        result = await run_to_end(address, command)
        entry = await address.call(CcsGet(command.ccs_key))
        assert isinstance(entry, CcsEntry) and entry.summary == "hello\n" and entry.exit_code == 0
        assert entry.log_path == result.log_path and entry.expires_at - entry.created_at == 300
        await address.call(CcsInvalidate(command.ccs_key))
        assert await address.call(CcsGet(command.ccs_key)) is None
        uncached = plan(tmp_path, [str(hello)], ttl_s=0, display="./hello.sh --no-ttl")
        await run_to_end(address, uncached)
        assert await address.call(CcsGet(uncached.ccs_key)) is None


def test_ccs_entries_expire_and_keys_separate_repos_and_commands(tmp_path: Path) -> None:
    store = CcsStore(tmp_path / "ccs.sqlite")
    key = ccs_key(Path("/r"), Path("/r"), "git  status")
    assert key == ccs_key(Path("/r"), Path("/r"), "git status")  # whitespace is normalized
    assert len({key, ccs_key(Path("/r2"), Path("/r2"), "git status"), ccs_key(Path("/r"), Path("/r"), "git diff"),
                ccs_key(Path("/r"), Path("/r/sub"), "git status")}) == 4
    store.put(CcsEntry(key, "/r", "git status", "git", 0, "clean", "/log", 5.0, 100.0, 160.0))
    assert store.get(key, 159.0) is not None and store.get(key, 160.0) is None
    assert store.expire(200.0) == 1
    store.close()


async def test_the_environment_is_scrubbed(tmp_path: Path) -> None:
    dump = script(tmp_path / "env.sh", "set\n")
    async with runner(tmp_path) as address:
        result = await run_to_end(address, plan(tmp_path, [str(dump)]))
    output = read(result.log_path)
    for secret in ("sk-secret", "ghp_secret", "/elsewhere", "/evil.so"):
        assert secret not in output
    assert "KEEP_ME='yes'" in output or "KEEP_ME=yes" in output
    assert "GIT_TERMINAL_PROMPT='0'" in output or "GIT_TERMINAL_PROMPT=0" in output
