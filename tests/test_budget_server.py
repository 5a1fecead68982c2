"""Budgets through a running daari (docs/budget.md): a request that would cross a cap goes to the best tier under it
and says so, is refused in the client's shape only when no tier can answer, spend survives a restart and is kept
per project; and the pure parts (caps, periods, the ledger)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from daari.budget.caps import Cap, judge, periods, seconds_to_reset
from daari.budget.ledger import Ledger, Spend, SpendStore
from daari.budget.project import project_of
from daari.config import Config
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier
from tests.test_decision_log import rows_when
from tests.test_report import run_report
from tests.test_tail import until, ws_url

# An answer of the fake costs about $0.01 (its ~10 output tokens at $1,000 per million); a request is estimated
# at 10 output tokens, so $0.01 as well.
PRICES = {"tiers": {"L6": {"input_per_mtok": 0.0, "output_per_mtok": 1000.0}}}


def budget_config(tmp_path: Path, local: str | None, remote: str, **budget: Any) -> Config:
    tiers = {"L6": upstream_tier("openai", remote + "/v1")}
    if local is not None:
        tiers["L3"] = upstream_tier("openai", local + "/v1")
    return make_config(tmp_path, tiers=tiers, frontier={"enabled": True}, pricing=PRICES,
                       routing={"models": {"gpt-big": "L6"}, "escalation": False},
                       budget={"output_tokens": 10, **budget})


def ask(model: str = "gpt-big", content: str = "hi") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}]}


async def test_over_the_cap_goes_to_a_cheaper_tier_and_says_so(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "daari.budget")
    local, remote = FakeOpenAI(), FakeOpenAI()
    async with serve_app(local) as local_url, serve_app(remote) as remote_url:
        config = budget_config(tmp_path, local_url, remote_url, daily_usd=0.012)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            first = await client.post("/v1/chat/completions", json=ask(content="first question"))
            second = await client.post("/v1/chat/completions", json=ask(content="second question"))
            state = (await client.get("/v1/daari/budget")).json()
            metrics = (await client.get("/metrics")).text
    assert first.status_code == second.status_code == 200
    first_meta, second_meta = first.json()["daari_meta"], second.json()["daari_meta"]
    # The first fits (past the soft ratio: a warning); the second would cross the cap: L3 answers it instead.
    assert first_meta["tier"] == "L6" and first_meta["budget"] == "soft"
    assert "budget: overall spend" in caplog.text and "past 80% of the daily cap $0.012" in caplog.text
    assert second_meta["tier"] == "L3" and second_meta["budget"] == "downgraded"
    assert second.headers["x-daari-budget"] == "downgraded"
    assert {"tier": "L6", "outcome": "skipped_budget", "confidence": None, "error": None} in second_meta["attempts"]
    assert len(remote.requests) == 1 and len(local.requests) == 1
    overall = next(c for c in state["caps"] if c["scope"] == "all" and c["period"] == "day")
    assert 0.005 < overall["spent_usd"] < 0.012 and overall["cap_usd"] == 0.012
    assert 'daari_budget_downgrades_total{period="day",scope="all"} 1.0' in metrics


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_refused_in_the_clients_shape_when_no_tier_is_under_the_cap(tmp_path: Path, protocol: str) -> None:
    remote = FakeOpenAI()
    async with serve_app(remote) as remote_url:
        config = budget_config(tmp_path, None, remote_url, monthly_usd=0.005)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            if protocol == "openai":
                response = await client.post("/v1/chat/completions", json=ask())
            else:
                response = await client.post("/v1/messages", json={"max_tokens": 50, **ask()})
    assert response.status_code == 429, response.text
    body = response.json()
    if protocol == "openai":
        assert body["error"]["type"] == "insufficient_quota" and body["error"]["code"] == "budget_exceeded"
    else:
        assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert "monthly overall budget of $0.005" in response.text
    assert int(response.headers["retry-after"]) > 0
    assert remote.requests == []


async def test_spend_survives_a_restart_and_is_kept_per_project(tmp_path: Path) -> None:
    repo_a, repo_b = tmp_path / "a", tmp_path / "b"
    for repo in (repo_a, repo_b):
        (repo / ".git").mkdir(parents=True)
        (repo / "src").mkdir()
    remote = FakeOpenAI()
    async with serve_app(remote) as remote_url:
        config = budget_config(tmp_path, None, remote_url, project={"daily_usd": 0.015})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            first = await client.post("/v1/chat/completions", json=ask(content="one"),
                                      headers={"x-daari-repo": str(repo_a / "src")})
            assert first.status_code == 200 and first.json()["daari_meta"]["project"] == str(repo_a)
            await rows_when(tmp_path / "data", 1)  # in the decision log before this daari stops
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            state = (await client.get("/v1/daari/budget")).json()
            over = await client.post("/v1/chat/completions", json=ask(content="two"),
                                     headers={"x-daari-repo": str(repo_a)})
            other = await client.post("/v1/chat/completions", json=ask(content="three"),
                                      headers={"x-daari-repo": str(repo_b)})
            served_report = (await client.get("/v1/daari/report?since=1d")).json()
    assert state["spent_usd"]["day"]["project"][str(repo_a)] > 0.005  # read back from spend.sqlite
    assert over.status_code == 429  # project a spent its day after the restart too; no cheaper tier exists
    assert other.status_code == 200  # project b has its own cap
    assert set(served_report["spend"]["by_project"]) == {str(repo_a), str(repo_b)}
    printed = run_report(tmp_path / "data", "--since", "1d")
    assert printed.returncode == 0, printed.stderr
    assert f"project  {str(repo_a)[-48:]}" in printed.stdout and "client   httpx" in printed.stdout
    as_json = json.loads(run_report(tmp_path / "data", "--since", "1d", "--json").stdout)
    # From the decision log: requests, cost and the saving against L6 per project (L6 itself saves nothing).
    assert as_json["projects"][str(repo_a)]["requests"] == 1 and as_json["projects"][str(repo_b)]["cost_usd"] > 0
    assert "saved $" in printed.stdout
    assert as_json["spend"]["by_project"][str(repo_a)]["calls"] == 1
    assert as_json["spend"]["total_usd"] == pytest.approx(
        sum(p["usd"] for p in as_json["spend"]["by_project"].values()))


def test_caps_judge_the_tightest() -> None:
    caps = [Cap("all", "month", 10.0), Cap("project", "day", 1.0)]
    spent = {caps[0]: 5.0, caps[1]: 0.7}
    assert judge(caps, spent.__getitem__, 0.05, 0.8).state == "ok"
    soft = judge(caps, spent.__getitem__, 0.15, 0.8)
    assert (soft.state, soft.cap) == ("soft", caps[1])
    over = judge(caps, spent.__getitem__, 0.31, 0.8)
    assert (over.state, over.cap, over.spent) == ("over", caps[1], 0.7)


def test_periods_and_resets_are_utc() -> None:
    now = 1_798_761_599.0  # 2026-12-31 23:59:59 UTC
    assert periods(now) == {"day": "2026-12-31", "month": "2026-12"}
    assert seconds_to_reset(Cap("all", "day", 1), now) == 1
    assert seconds_to_reset(Cap("all", "month", 1), now) == 1


def test_ledger_reads_back_what_the_store_kept(tmp_path: Path) -> None:
    now = time.time()
    store = SpendStore(tmp_path / "spend.sqlite")
    for usd in (0.25, 0.5):
        store.add(Spend(now, "/repo", "claude-code", "s1", "L6", usd))
    ledger = Ledger()
    ledger.load(store.rows(periods(now)["month"] + "-01"))
    assert ledger.spent(Cap("project", "month", 1), now, "/repo", "x") == 0.75
    assert ledger.spent(Cap("client", "day", 1), now, "/other", "claude-code") == 0.75
    assert ledger.spent(Cap("client", "day", 1), now, "/other", "codex") == 0.0
    assert store.rows("9999-01-01") == []


def test_project_is_the_git_root(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "mod").mkdir(parents=True)
    assert project_of(str(tmp_path / "repo" / "pkg" / "mod")) == str(tmp_path / "repo")
    assert project_of("relative/path") == "" and project_of(None) == ""


def test_spend_counts_the_provider_cache_as_reported() -> None:
    from daari.config import PriceConfig, PricingConfig
    from daari.pricing import usage_cost
    from daari.protocol.chat import Usage

    pricing = PricingConfig(tiers={"L6": PriceConfig(3.0, 15.0, cache_read_multiplier=0.1,
                                                     cache_write_multiplier=1.25)})
    # 10,000 prompt tokens: 8,000 read from the cache, 1,000 written to it, 1,000 fresh; 500 out (200 reasoning).
    usage = Usage(prompt_tokens=10_000, completion_tokens=500, cached_tokens=8_000, cache_write_tokens=1_000,
                  reasoning_tokens=200)
    expected = (1_000 * 3.0 + 8_000 * 0.3 + 1_000 * 3.75 + 500 * 15.0) / 1_000_000
    assert usage_cost(pricing, "L6", None, usage) == pytest.approx(expected)
    assert usage_cost(pricing, "L3", None, usage) == 0.0


@pytest.mark.parametrize(("text", "directory"), [
    ("You are Claude Code.\n<env>\nWorking directory: /home/me/app\nIs directory a git repo: Yes\n</env>",
     "/home/me/app"),
    ("Primary working directory: /srv/my repo\n", "/srv/my repo"),
    ("<environment_context>\n  <cwd>/work/demo</cwd>\n</environment_context>", "/work/demo"),
    ("the working directory: relative/path is not absolute", None),
    ("nothing here", None),
])
def test_the_working_directory_a_client_states(text: str, directory: str | None) -> None:
    from daari.budget.project import stated_directory
    from daari.protocol.chat import ChatRequest, Message

    request = ChatRequest([Message("system", "x"), Message("user", text), Message("user", "go")], "m")
    assert stated_directory(request) == directory


async def test_project_from_the_stated_working_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    remote = FakeOpenAI()
    async with serve_app(remote) as remote_url:
        config = budget_config(tmp_path, None, remote_url)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/messages", json={
                "model": "gpt-big", "max_tokens": 50, "system": f"<env>\nWorking directory: {repo / 'pkg'}\n</env>",
                "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200, response.text
    assert response.json()["daari_meta"]["project"] == str(repo)


async def test_a_named_project_has_its_own_cap(tmp_path: Path) -> None:
    tight, roomy = tmp_path / "tight", tmp_path / "roomy"
    for repo in (tight, roomy):
        (repo / ".git").mkdir(parents=True)
    local, remote = FakeOpenAI(), FakeOpenAI()
    async with serve_app(local) as local_url, serve_app(remote) as remote_url:
        # Every project may spend $1 a day, but `tight` only $0.012: its second request would cross it.
        config = budget_config(tmp_path, local_url, remote_url, project={"daily_usd": 1.0},
                               projects={str(tight) + "/": {"daily_usd": 0.012}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            served = []
            for repo in (tight, roomy, tight, roomy):
                response = await client.post("/v1/chat/completions", json=ask(content=f"question {len(served)}"),
                                             headers={"x-daari-repo": str(repo)})
                assert response.status_code == 200, response.text
                served.append((response.json()["daari_meta"]["tier"], response.headers.get("x-daari-budget")))
            state = (await client.get("/v1/daari/budget")).json()
    assert served == [("L6", "soft"), ("L6", None), ("L3", "downgraded"), ("L6", None)]
    rows = {(c["name"], c["cap_usd"]): c for c in state["caps"]}
    assert rows[(str(tight), 0.012)]["named"] and rows[(str(tight), 0.012)]["state"] == "soft"
    assert not rows[(str(roomy), 1.0)]["named"] and (str(tight), 1.0) not in rows  # the generic cap is replaced


async def test_a_named_client_has_its_own_cap(tmp_path: Path) -> None:
    local, remote = FakeOpenAI(), FakeOpenAI()
    codex, claude = "codex_cli_rs/0.46.0 (Ubuntu 24.4.0; x86_64)", "claude-cli/2.1.126 (external, cli)"
    async with serve_app(local) as local_url, serve_app(remote) as remote_url:
        config = budget_config(tmp_path, local_url, remote_url, client={"daily_usd": 1.0},
                               clients={"codex": {"daily_usd": 0.012}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            served = []
            for agent in (codex, claude, codex, claude):
                response = await client.post("/v1/chat/completions", json=ask(content=f"question {len(served)}"),
                                             headers={"user-agent": agent})
                assert response.status_code == 200, response.text
                served.append(response.json()["daari_meta"]["tier"])
    assert served == ["L6", "L6", "L3", "L6"]  # codex's second would cross its own $0.012; claude-code is under $1


def test_named_caps_replace_the_generic_ones_for_that_one() -> None:
    from daari.budget.caps import caps_of
    from daari.config import BudgetConfig, SpendLimits

    caps = caps_of(BudgetConfig(daily_usd=9.0, project=SpendLimits(daily_usd=2.0), client=SpendLimits(monthly_usd=5.0),
                                projects={"app": SpendLimits(daily_usd=0.5), "~/free": SpendLimits()},
                                clients={"codex": SpendLimits(daily_usd=1.0)}))
    assert {(c.scope, c.period, c.usd) for c in caps.for_request("/srv/other", "claude-code")} == {
        ("all", "day", 9.0), ("project", "day", 2.0), ("client", "month", 5.0)}
    # "app" names any project whose git root ends in /app; codex has its own cap instead of `client:`.
    assert {(c.scope, c.period, c.usd, c.name) for c in caps.for_request("/home/me/app", "codex")} == {
        ("all", "day", 9.0, None), ("project", "day", 0.5, "app"), ("client", "day", 1.0, "codex")}
    # An entry with no limits exempts its project from the generic project cap.
    home_free = str(Path("~/free").expanduser())
    assert {(c.scope, c.usd) for c in caps.for_request(home_free, "codex")} == {("all", 9.0), ("client", 1.0)}


async def test_the_live_tail_marks_a_request_past_the_soft_ratio(tmp_path: Path) -> None:
    remote = FakeOpenAI()
    async with serve_app(remote) as remote_url:
        # Each request is estimated at $0.01: the first passes 80% of $0.012 (soft), the cheap one does not.
        config = budget_config(tmp_path, None, remote_url, daily_usd=0.012)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client, \
                open_websocket_url(ws_url(server.url)) as tail:
            await until(lambda: server.parts.tail.open == 1)
            soft = await client.post("/v1/chat/completions", json=ask(content="a question past the soft ratio"))
            with trio.fail_after(10):
                seen = json.loads(await tail.get_message())
    assert soft.status_code == 200 and soft.json()["daari_meta"]["budget"] == "soft"
    assert seen["request_id"] == soft.headers["x-daari-request-id"]
    assert seen["details"]["budget"] == "soft" and seen["tier"] == "L6"


CUT_OFF_PRICES = {"tiers": {"L6": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}}


def spend_rows(data_dir: Path) -> list[tuple[str, float, int]]:
    path = data_dir / "spend.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT tier, usd, requests FROM spend"))


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
async def test_a_stream_the_client_abandons_is_counted(tmp_path: Path, protocol: str) -> None:
    """The client reads the first event of a stream and hangs up: the upstream already billed the prompt (and what
    it generated), so spend.sqlite gets a row. Anthropic's message_start reports the prompt's usage: that count is
    the one used; an OpenAI stream reports usage only at its end: daari's estimates are."""
    fake: FakeAnthropic | FakeOpenAI = FakeAnthropic() if protocol == "anthropic" else FakeOpenAI()
    async with serve_app(fake) as url:
        tier = upstream_tier("anthropic", url) if protocol == "anthropic" else upstream_tier("openai", url + "/v1")
        config = make_config(tmp_path, tiers={"L6": tier}, frontier={"enabled": True}, pricing=CUT_OFF_PRICES,
                             routing={"models": {"hang": "L6", "hang_stream": "L6"}})
        if protocol == "anthropic":
            path, body = "/v1/messages", {"model": "hang", "max_tokens": 100, "stream": True,
                                          "messages": [{"role": "user", "content": "write a long essay"}]}
        else:
            path, body = "/v1/chat/completions", {"model": "hang_stream", "stream": True,
                                                  "messages": [{"role": "user", "content": "write a long essay"}]}
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            async with client.stream("POST", path, json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        break  # the first event arrived; now the client goes away
            with trio.fail_after(30):  # only ends a test that would hang; nothing here is about time
                while not (rows := spend_rows(tmp_path / "data")):
                    await trio.sleep(0.01)
            metrics = (await client.get("/metrics")).text
    [(tier_name, usd, requests)] = rows
    assert tier_name == "L6" and usd > 0 and requests == 1
    if protocol == "anthropic":
        # message_start's own counts: the prompt the fake says it read, and its first output token.
        sent = fake.requests[-1].body
        input_tokens = 1 + len(json.dumps([sent.get("system"), sent.get("messages"), sent.get("tools")])) // 4
        assert usd == pytest.approx((input_tokens + 1) * 1000.0 / 1_000_000)
        assert 'daari_budget_cut_off_total{source="reported",tier="L6"} 1.0' in metrics
    else:
        assert 'daari_budget_cut_off_total{source="estimated",tier="L6"} 1.0' in metrics


def test_usage_so_far_prefers_what_the_upstream_reported() -> None:
    from daari.budget.abandoned import usage_so_far
    from daari.protocol.chat import Usage
    from daari.protocol.events import Finish, NativeEvent, TextDelta

    start = NativeEvent("anthropic", "message_start", {"type": "message_start", "message": {
        "model": "claude-x", "usage": {"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 1}}})
    text = TextDelta("x" * 40)  # about 10 tokens relayed
    usage, source, model = usage_so_far([start, text], prompt_estimate=999)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, source, model) == (
        150, 50, 10, "reported_input", "claude-x")
    delta = NativeEvent("anthropic", "message_delta", {"type": "message_delta", "usage": {"output_tokens": 12}})
    usage, source, _ = usage_so_far([start, text, delta], prompt_estimate=999)
    assert (usage.prompt_tokens, usage.completion_tokens, source) == (150, 12, "reported")
    usage, source, _ = usage_so_far([text], prompt_estimate=999)  # an OpenAI stream: nothing reported until the end
    assert (usage.prompt_tokens, usage.completion_tokens, source) == (999, 10, "estimated")
    final = Usage(prompt_tokens=7, completion_tokens=3)
    assert usage_so_far([text, Finish("stop", final)], prompt_estimate=999)[:2] == (final, "reported")
