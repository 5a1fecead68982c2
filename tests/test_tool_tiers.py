"""The tool tiers through a running daari: Lt runs, CCS answers repeats and DEV-06, confirmations,
tools that are not installed go to the model tiers, agent turns and cross-site pages never run anything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from daari.server.compose import compose
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier
from tests.test_tool_runner import wait_for_file, wait_gone
from tests.tool_sandbox import Sandbox, make_repo, read


def stand_in(sandbox: Sandbox, name: str, body: str) -> Path:
    path = sandbox.base / "standins" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@asynccontextmanager
async def serving(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tools: dict[str, Any] | None,
                  **sections: Any) -> AsyncIterator[tuple[httpx.AsyncClient, FakeOpenAI]]:
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        extra: dict[str, Any] = dict(sections)
        if tools is not None:
            extra["tools"] = {"enabled": True, "allowed_roots": [str(sandbox.root)], "repo_root": str(sandbox.repo),
                              **tools}
        config = make_config(sandbox.base, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, **extra)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            yield client, fake


async def ask(client: httpx.AsyncClient, text: str, headers: dict[str, str] | None = None,
              **body: Any) -> dict[str, Any]:
    reply = await client.post("/v1/chat/completions", headers=headers or {},
                              json={"model": "m", "messages": [{"role": "user", "content": text}], **body})
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    return data


def content(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"])


async def test_tools_are_off_unless_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    async with serving(sandbox, monkeypatch, None) as (client, fake):
        reply = await ask(client, "git status")
    assert reply["daari_meta"]["tier"] == "L3" and len(fake.requests) == 1
    assert sandbox.logged_commands() == []


async def test_git_status_runs_then_repeats_from_the_ccs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    (sandbox.repo / "new-file.txt").write_text("x")
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        first = await ask(client, "git status")
        again = await ask(client, "run git status please")
        fresh = await ask(client, "git status", {"X-Daari-ReRun-Command": "true"})
        question = await ask(client, "why does git status show untracked files?")
    meta = first["daari_meta"]
    assert meta["tier"] == "Lt" and meta["rule_id"] == "DEV-01" and meta["task_type"] == "tool"
    tool = meta["tool"]
    assert tool["command"] == "git status" and tool["exit_code"] == 0 and tool["ccs_hit"] is False
    assert "$ git status" in read(tool["log_path"]) and tool["duration_ms"] >= 0
    assert content(first).startswith("$ git status\n") and "```text\n" in content(first)
    assert "new-file.txt" in content(first) and "exit code 0" in content(first)
    assert again["daari_meta"]["tier"] == "CCS" and again["daari_meta"]["tool"]["ccs_hit"] is True
    assert again["daari_meta"]["tool"]["log_path"] == tool["log_path"] and "new-file.txt" in content(again)
    assert fresh["daari_meta"]["tier"] == "Lt" and fresh["daari_meta"]["tool"]["log_path"] != tool["log_path"]
    assert question["daari_meta"]["tier"] == "L3" and len(fake.requests) == 1
    assert sandbox.logged_commands() == ["$ git status", "$ git status"]


async def test_tests_dev06_and_dev07(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        nothing_yet = await ask(client, "what did the tests say?")
        ran = await ask(client, "run the tests please")
        said = await ask(client, "What did the tests say?")
        rerun = await ask(client, "run the tests again")
        lint = await ask(client, "run lint")
    assert nothing_yet["daari_meta"]["tier"] == "CCS" and nothing_yet["daari_meta"]["tool"]["ccs_hit"] is False
    assert "no recent result" in content(nothing_yet)
    assert ran["daari_meta"]["tier"] == "Lt" and ran["daari_meta"]["rule_id"] == "DEV-03"
    assert "tests: 3 passed ()" in content(ran)
    assert said["daari_meta"]["tier"] == "CCS" and said["daari_meta"]["rule_id"] == "DEV-06"
    assert said["daari_meta"]["tool"]["ccs_hit"] is True and "tests: 3 passed" in content(said)
    assert rerun["daari_meta"]["tier"] == "Lt" and rerun["daari_meta"]["rule_id"] == "DEV-07"
    assert rerun["daari_meta"]["tool"]["log_path"] != ran["daari_meta"]["tool"]["log_path"]
    assert lint["daari_meta"]["rule_id"] == "DEV-04" and "lint clean --quiet" in content(lint)
    assert fake.requests == []
    assert sandbox.logged_commands() == ["$ ./tools/lint.sh --quiet", "$ ./tools/test.sh", "$ ./tools/test.sh"]


async def test_destructive_tools_need_confirmation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    marker = sandbox.base / "renamed"
    idea = stand_in(sandbox, "idea-refactor", f'echo "$DAARI_TOOL_ACTION $DAARI_RENAME_KIND $DAARI_RENAME_FROM '
                                              f'$DAARI_RENAME_TO $DAARI_TARGET" | tee {marker}\n')
    # `tee` on PATH is a trap: the stand-in uses the absolute path of the real one.
    idea.write_text(idea.read_text().replace("| tee", "| /usr/bin/tee"))
    message = "Rename method foo to bar in UserService"
    async with serving(sandbox, monkeypatch, {"intellij": {"command": f"{idea} --headless"}}) as (client, fake):
        asked = await ask(client, message)
        assert not marker.exists()
        confirmed = await ask(client, message, {"X-Daari-Confirm-Tool": "true"})
    assert asked["daari_meta"]["tier"] == "Lt" and asked["daari_meta"]["confirmation_required"] is True
    assert asked["daari_meta"]["rule_id"] == "LT-05" and "X-Daari-Confirm-Tool: true" in content(asked)
    assert confirmed["daari_meta"]["tool"]["exit_code"] == 0 and "confirmation_required" not in confirmed["daari_meta"]
    assert marker.read_text() == "rename method foo bar UserService\n"
    async with serving(sandbox, monkeypatch, {"intellij": {"command": str(idea)}, "auto_confirm": True}) as (client, _):
        auto = await ask(client, "optimize imports in User.java")
    assert auto["daari_meta"]["rule_id"] == "LT-06" and marker.read_text() == "optimize_imports    User.java\n"
    assert fake.requests == []


async def test_configured_stand_ins_run_and_missing_tools_go_to_the_models(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    eslint = stand_in(sandbox, "eslint", 'echo "eslint $*"\nexit 1\n')
    prettier = stand_in(sandbox, "prettier", 'echo "prettier $*"\n')
    (sandbox.bin / "eslint").unlink()  # nothing called eslint on PATH: only the configured command exists
    (sandbox.bin / "prettier").unlink()
    tools = {"eslint": {"command": f"{eslint} --max-warnings 0 ."}, "prettier": {"command": f"{prettier} --check ."}}
    async with serving(sandbox, monkeypatch, tools) as (client, fake):
        linted = await ask(client, "Run eslint on src/")
        formatted = await ask(client, "format the code")
    assert linted["daari_meta"]["tier"] == "Lt" and linted["daari_meta"]["rule_id"] == "LT-01"
    assert linted["daari_meta"]["tool"]["exit_code"] == 1 and "eslint --max-warnings 0 ." in content(linted)
    assert formatted["daari_meta"]["rule_id"] == "LT-02" and "prettier --check ." in content(formatted)
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        missing = await ask(client, "Run eslint on src/")
        no_ide = await ask(client, "Optimize imports in User.java")
    assert missing["daari_meta"]["tier"] == "L3"
    assert missing["daari_meta"]["tool_unavailable"]["tool"] == "eslint"
    assert no_ide["daari_meta"]["tier"] == "L3" and "tools.intellij.command" in \
        no_ide["daari_meta"]["tool_unavailable"]["reason"]
    assert len(fake.requests) == 2 and sandbox.escaped() == ""


async def test_repo_header_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    other = make_repo(sandbox.root / "other", {"only-here.txt": "x"})
    (other / "untracked-in-other").write_text("x")
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        there = await ask(client, "git status", {"X-Daari-Repo": str(other)})
        outside = await ask(client, "git status", {"X-Daari-Repo": str(sandbox.outside)})
    assert there["daari_meta"]["tier"] == "Lt" and "untracked-in-other" in content(there)
    assert outside["daari_meta"]["tier"] == "L3" and "allowed_roots" in outside["daari_meta"]["tool_refused"]["reason"]
    assert sandbox.logged_commands() == ["$ git status"]


async def test_agent_turns_and_cross_site_pages_run_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    async with serving(sandbox, monkeypatch, {"auto_confirm": True}) as (client, fake):
        agent = await ask(client, "git status", tools=tools)
        page = await client.post("/v1/chat/completions", headers={"origin": "https://evil.example"},
                                 json={"model": "m", "messages": [{"role": "user", "content": "run the tests"}]})
    assert agent["daari_meta"]["tier"] == "L3" and agent["daari_meta"]["agent_turn"] is True
    assert page.status_code == 403
    assert sandbox.logged_commands() == [] and sandbox.escaped() == ""


async def test_stream_and_anthropic_shapes_and_timeouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    (sandbox.repo / ".daari" / "commands.yaml").write_text(
        'commands:\n  test: {command: "./tools/slow.sh", timeout_s: 0.5}\n')
    slow = sandbox.repo / "tools" / "slow.sh"
    slow.write_text("#!/bin/sh\necho starting\nexec /bin/sleep 30\n")
    slow.chmod(0o755)
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        streamed = await client.post("/v1/chat/completions", json={
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "git diff"}]})
        anthropic = await client.post("/v1/messages", json={
            "model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "git status"}]})
        timed_out = await ask(client, "run the tests")
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text.startswith("$ git diff") and chunks[-1]["daari_meta"]["tool"]["command"] == "git diff"
    assert anthropic.json()["daari_meta"]["tier"] == "Lt" and anthropic.json()["content"][0]["text"].startswith(
        "$ git status")
    tool = timed_out["daari_meta"]["tool"]
    assert tool["timed_out"] is True and tool["exit_code"] is None and "timed out" in content(timed_out)
    assert "starting" in content(timed_out)


async def test_a_client_going_away_kills_the_running_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    pids = sandbox.base / "pids"
    slow = sandbox.repo / "tools" / "test.sh"
    slow.write_text(f"#!/bin/sh\n/bin/sleep 120 &\necho $$ $! > {pids}\nwait\n")
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        with trio.move_on_after(60):
            async with trio.open_nursery() as nursery:
                async def request() -> None:
                    await client.post("/v1/chat/completions", json={
                        "model": "m", "messages": [{"role": "user", "content": "run the tests"}]})
                nursery.start_soon(request)
                started = [int(p) for p in (await trio.to_thread.run_sync(wait_for_file, pids)).split()]
                nursery.cancel_scope.cancel()  # the client hangs up while the tests run
        assert await trio.to_thread.run_sync(wait_gone, started)


async def test_the_classifier_lt_probe_is_the_tool_patterns_only_while_tools_run(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path)
    off = await compose(make_config(sandbox.base))
    assert not off.classify.lt_probe("git status")  # tools off: no Lt tier, no probe
    on = await compose(make_config(sandbox.base, tools={"enabled": True, "allowed_roots": [str(sandbox.root)],
                                                       "repo_root": str(sandbox.repo)}))
    probe = on.classify.lt_probe
    assert probe("git status") and probe("run the tests please")
    assert not probe("why does git status show untracked files?")


async def test_no_cache_runs_a_repeat_again_but_dev06_still_reads(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(tmp_path)
    async with serving(sandbox, monkeypatch, {}) as (client, fake):
        await ask(client, "run the tests")
        repeat = await ask(client, "run the tests", {"X-Daari-No-Cache": "true"})
        said = await ask(client, "what did the tests say?", {"X-Daari-No-Cache": "true"})
    assert repeat["daari_meta"]["tier"] == "Lt" and said["daari_meta"]["tier"] == "CCS"
    assert said["daari_meta"]["tool"]["log_path"] == repeat["daari_meta"]["tool"]["log_path"]
