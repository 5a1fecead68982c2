"""Side calls at a priced tier are spend (docs/budget.md, "Side calls"): the judge's self-check, the Phase B
classifier question and shadow calls are billed by their provider, so each is a row of spend.sqlite with its purpose,
counted to the request's project, client and session, through a running daari with fake upstreams on loopback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from actors.shadow import ShadowIdle
from daari.budget.ledger import Ledger, Spend, SpendStore
from daari.budget.report import read_spend, render_spend, spend_summary
from daari.config import PriceConfig, PricingConfig
from daari.pricing import usage_cost
from daari.protocol.chat import Usage
from daari.routing.confidence import SELF_EVAL_INSTRUCTION
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier
from tests.test_hybrid_classifier import NOTES
from tests.test_l1_server import ORIGINAL, PARAPHRASE, ready, settle
from tests.test_responses_endpoints import CONVERSATION as COMPACTED

PRICES = {"tiers": {"L3": {"input_per_mtok": 50.0, "output_per_mtok": 300.0},
                    "L4": {"input_per_mtok": 100.0, "output_per_mtok": 700.0},
                    "L5": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}}}
PRICING = PricingConfig(tiers={tier: PriceConfig(**price) for tier, price in PRICES["tiers"].items()})
Row = tuple[str, str, str, str, str, float, int]  # purpose, tier, project, client, session, usd, calls


def cost(tier: str, usage: dict[str, int]) -> float:
    return usage_cost(PRICING, tier, None, Usage(prompt_tokens=usage["prompt_tokens"],
                                                 completion_tokens=usage["completion_tokens"]))


def rows(data_dir: Path) -> dict[tuple[str, str], Row]:
    """spend.sqlite's rows by (purpose, tier): one each (one day, project, client and session per test)."""
    with sqlite3.connect(data_dir / "spend.sqlite") as conn:
        found: list[Row] = list(conn.execute(
            "SELECT purpose, tier, project, client, session, usd, requests FROM spend"))
    by = {(row[0], row[1]): row for row in found}
    assert len(by) == len(found)
    return by


async def post(client: httpx.AsyncClient, repo: Path, model: str, content: str) -> dict[str, Any]:
    response = await client.post("/v1/chat/completions", headers={"user-agent": "curl/8.5", "x-daari-repo": str(repo)},
                                 json={"model": model, "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 200, response.text
    meta: dict[str, Any] = response.json()["daari_meta"]
    return meta


def assert_same_payer(found: dict[tuple[str, str], Row], repo: Path) -> None:
    """Every row is the request's: its project (the directory X-Daari-Repo named), client family and session."""
    payers = {row[2:5] for row in found.values()}
    [(project, client, session)] = payers
    assert project.endswith(repo.name) and client == "curl" and session


async def test_a_self_check_at_a_priced_tier_is_spend(tmp_path: Path) -> None:
    """L4 answers without logprobs, L5 is above it: the judge asks L4 to rate its own answer. L4's provider bills
    both calls: the answer and the self-check are a row each, at the usage each reported."""
    repo = tmp_path / "app"
    repo.mkdir()
    l4, l5 = FakeOpenAI(), FakeOpenAI()
    async with serve_app(l4) as u4, serve_app(l5) as u5:
        config = make_config(tmp_path, tiers={"L4": upstream_tier("openai", u4 + "/v1", "good"),
                                              "L5": upstream_tier("openai", u5 + "/v1", "good")},
                             pricing=PRICES, routing={"models": {"gpt-mid": "L4"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await post(client, repo, "gpt-mid", "what does a git rebase do?")
            state = (await client.get("/v1/daari/budget")).json()
            report = (await client.get("/v1/daari/report")).json()
    assert meta["tier"] == "L4" and l5.usages == []
    assert SELF_EVAL_INSTRUCTION[:30] in json.dumps(l4.requests[-1].body)  # the second call was the self-check
    answer, self_check = l4.usages
    found = rows(tmp_path / "data")
    assert {key: row[5:] for key, row in found.items()} == {
        ("answer", "L4"): (pytest.approx(cost("L4", answer)), 1),
        ("self_check", "L4"): (pytest.approx(cost("L4", self_check)), 1)}
    assert_same_payer(found, repo)
    assert state["spent_usd"]["day"]["all"][""] == pytest.approx(cost("L4", answer) + cost("L4", self_check))
    assert report["spend"]["by_purpose"]["self_check"] == {"usd": pytest.approx(cost("L4", self_check)),
                                                           "calls": 1}


async def test_a_classifier_question_to_a_priced_tier_is_spend(tmp_path: Path) -> None:
    """routing.slm_classifier puts an ambiguous request to the first tier, a priced L4: the question is a row of
    its own, counted to the same project, client and session as the answer it routed."""
    repo = tmp_path / "app"
    repo.mkdir()
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L4": upstream_tier("openai", upstream + "/v1")},
                             pricing=PRICES, routing={"slm_classifier": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await post(client, repo, "good", NOTES)
    assert meta["classifier"] == "slm" and meta["tier"] == "L4"
    question, answer = fake.usages
    found = rows(tmp_path / "data")
    assert {key: row[5:] for key, row in found.items()} == {
        ("classifier", "L4"): (pytest.approx(cost("L4", question)), 1),
        ("answer", "L4"): (pytest.approx(cost("L4", answer)), 1)}
    assert_same_payer(found, repo)


async def test_a_shadow_call_to_a_priced_tier_is_spend(tmp_path: Path) -> None:
    """An L0 hit is asked again of L3, a priced tier, in the background: the shadow call is a row, counted to the
    sampled request's project (looked up by the actor: a hit comes before the project step) and client."""
    repo = tmp_path / "app"
    repo.mkdir()
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, pricing=PRICES,
                             trust={"shadow": {"rate": 1.0, "tier_rate": 0.0, "max_per_minute": 1000,
                                               "daily_tokens": 1_000_000}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            first = await post(client, repo, "good", "Write a Python function that sorts a list")
            hit = await post(client, repo, "good", "Write a Python function that sorts a list")
            with trio.fail_after(60):
                while server.parts.metrics.value("shadow_drawn_total", kind="cache") < 1:
                    await trio.sleep(0.01)
                assert await server.parts.table.address("shadow").call(ShadowIdle()) == 1
            state = (await client.get("/v1/daari/budget")).json()
    assert first["tier"] == "L3" and hit["tier"] == "L0"
    answer, shadow = fake.usages
    found = rows(tmp_path / "data")
    assert {key: row[5:] for key, row in found.items()} == {
        ("answer", "L3"): (pytest.approx(cost("L3", answer)), 1),
        ("shadow", "L3"): (pytest.approx(cost("L3", shadow)), 1)}
    assert_same_payer(found, repo)
    assert state["spent_usd"]["day"]["client"]["curl"] == pytest.approx(cost("L3", answer) + cost("L3", shadow))


async def test_a_tier_shadow_eval_at_a_priced_tier_is_spend(tmp_path: Path) -> None:
    """An unpriced L3's answer is asked again of the priced L4 (a tier shadow eval): only that call costs."""
    repo = tmp_path / "app"
    repo.mkdir()
    l3, l4 = FakeOpenAI(), FakeOpenAI()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "good"),
                                              "L4": upstream_tier("openai", u4 + "/v1", "good")},
                             pricing={"tiers": {"L4": PRICES["tiers"]["L4"]}}, routing={"models": {"gpt-small": "L3"}},
                             trust={"shadow": {"rate": 0.0, "tier_rate": 1.0, "max_per_minute": 1000,
                                               "daily_tokens": 1_000_000}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await post(client, repo, "gpt-small", "Write a Python function that sorts a list")
            with trio.fail_after(60):
                while server.parts.metrics.value("shadow_drawn_total", kind="tier") < 1:
                    await trio.sleep(0.01)
                recorded = await server.parts.table.address("shadow").call(ShadowIdle())
            assert recorded == 1
    assert meta["tier"] == "L3" and len(l3.usages) == 1
    [shadow] = l4.usages
    found = rows(tmp_path / "data")
    assert {key: row[5:] for key, row in found.items()} == {("shadow", "L4"): (pytest.approx(cost("L4", shadow)), 1)}
    [(project, client, _session)] = {row[2:5] for row in found.values()}
    assert project.endswith("app") and client == "curl"


async def test_the_l1_verifiers_question_to_a_priced_tier_is_daaris_spend(tmp_path: Path) -> None:
    """cache.l1.verify: model asks the first tier, a priced L3, whether a paraphrase is the same question: the
    question is billed and, asked for a lookup with no request's payer at hand, counted to daari's own client."""
    repo = tmp_path / "app"
    repo.mkdir()
    fake = FakeOpenAI()  # answers the verifier with a sentence: malformed, so the lookup is rejected
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, pricing=PRICES,
                             cache={"l1": {"verify": "model"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            tier = await ready(server)
            await post(client, repo, "good", ORIGINAL)
            await settle(server, tier, 1)
            meta = await post(client, repo, "good", PARAPHRASE)
    assert meta["tier"] == "L3" and meta["verified_by"] == "model"
    first, question, second = fake.usages
    assert "Request A:" in json.dumps(fake.requests[1].body)
    with sqlite3.connect(tmp_path / "data" / "spend.sqlite") as conn:  # two answers: two sessions, one project
        found = {row[0]: row[1:] for row in conn.execute(
            "SELECT purpose, tier, client, project, SUM(usd), SUM(requests) FROM spend GROUP BY purpose")}
    assert found == {"answer": ("L3", "curl", str(repo), pytest.approx(cost("L3", first) + cost("L3", second)), 2),
                     "verify": ("L3", "daari", "", pytest.approx(cost("L3", question)), 1)}


def test_an_older_spend_file_is_read_and_upgraded(tmp_path: Path) -> None:
    """A spend.sqlite from before `purpose`: the report reads its rows as answers without touching it; opening it
    for writing rebuilds the table, rows kept, so a side call gets a row of its own beside the answer's."""
    path = tmp_path / "spend.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE spend (day TEXT, project TEXT, client TEXT, session TEXT, tier TEXT, usd REAL, "
                     "requests INTEGER, PRIMARY KEY (day, project, client, session, tier))")
        conn.execute("INSERT INTO spend VALUES ('2026-12-01', '/p', 'codex', 's', 'L6', 0.5, 2)")
    conn.close()
    old = [("2026-12-01", "/p", "codex", "s", "L6", 0.5, 2, "answer")]
    assert read_spend(str(tmp_path), "2026-12-01") == old
    store = SpendStore(path)
    noon = 1_796_126_400.0  # 2026-12-01 12:00 UTC
    store.add(Spend(noon, "/p", "codex", "s", "L6", 0.25, "self_check"))
    store.add(Spend(noon, "/p", "codex", "s", "L6", 0.25))
    upgraded = store.rows("2026-12-01")
    store.close()
    assert sorted(upgraded, key=lambda row: row[7]) == [("2026-12-01", "/p", "codex", "s", "L6", 0.75, 3, "answer"),
                                ("2026-12-01", "/p", "codex", "s", "L6", 0.25, 1, "self_check")]
    ledger = Ledger()
    ledger.load(upgraded)
    assert ledger.by_scope(noon)["day"]["project"] == {"/p": 1.0}  # caps count every purpose
    summary = spend_summary(read_spend(str(tmp_path), "2026-12-01"))
    assert summary["by_purpose"] == {"answer": {"usd": 0.75, "calls": 3}, "self_check": {"usd": 0.25, "calls": 1}}
    assert "purpose  self_check" in render_spend(summary)


async def test_a_compaction_at_a_priced_responses_tier_is_spend(tmp_path: Path) -> None:
    """POST /v1/responses/compact forwarded to a priced Responses tier: the provider bills the compaction, so its
    reported usage is a `compact` row, counted to the caller (Codex compacts long sessions there)."""
    repo = tmp_path / "app"
    repo.mkdir()
    fake = FakeResponses()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1", wire_api="responses")},
                             pricing=PRICES)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            reply = await client.post("/v1/responses/compact", json=COMPACTED, headers={
                "user-agent": "codex_cli_rs/0.171.0", "x-daari-repo": str(repo), "session_id": "s-compact"})
            assert reply.status_code == 200 and reply.content == fake.sent
            for _ in range(100):  # counted once the answer is handed over: it may land just after the client has it
                state = (await client.get("/v1/daari/budget")).json()
                if "codex" in state["spent_usd"]["day"]["client"]:
                    break
                await trio.sleep(0.05)
    usage = json.loads(fake.sent)["usage"]
    expected = cost("L3", {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"]})
    found = rows(tmp_path / "data")
    _purpose, _tier, project, client, session, usd, calls = found[("compact", "L3")]
    assert usd == pytest.approx(expected) and calls == 1 and expected > 0
    assert project.endswith(repo.name) and client == "codex" and session
    assert state["spent_usd"]["day"]["client"]["codex"] == pytest.approx(expected)


async def test_no_shadow_call_once_a_cap_nears_its_mark(tmp_path: Path) -> None:
    """A shadow call is daari's own spend: with the overall cap past its soft mark (the first answer's cost), an L0
    hit that would be sampled is skipped with reason budget_cap, and L3's upstream hears nothing more."""
    repo = tmp_path / "app"
    repo.mkdir()
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, pricing=PRICES,
                             budget={"daily_usd": 1.0, "soft_ratio": 0.000001},
                             trust={"shadow": {"rate": 1.0, "tier_rate": 0.0, "max_per_minute": 1000,
                                               "daily_tokens": 1_000_000}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            first = await post(client, repo, "good", "Write a Python function that sorts a list")
            hit = await post(client, repo, "good", "Write a Python function that sorts a list")
            metrics = server.parts.metrics
            with trio.fail_after(60):
                while metrics.value("shadow_skipped_total", reason="budget_cap") < 1:
                    await trio.sleep(0.01)
            assert await server.parts.table.address("shadow").call(ShadowIdle()) == 0
    assert first["tier"] == "L3" and hit["tier"] == "L0"
    assert len(fake.usages) == 1  # the answer only: no shadow call reached the priced tier
    assert set(rows(tmp_path / "data")) == {("answer", "L3")}
