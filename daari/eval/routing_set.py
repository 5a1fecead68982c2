"""`daari eval routing --set FILE`: the larger routing eval: accuracy per expected tier, the confusion between
tiers, and the cost of the routed tiers against sending everything to L6 (docs/routing.md).

Live (default): each prompt goes to a running daari (X-Daari-No-Cache) and the tier routing chose is read
from daari_meta (the first attempt's tier, so escalation does not hide a routing miss). `--offline`: the
classifier and the tier plan run in-process for the configured `--tiers`; shortcut tiers (L2, Lt) cannot be
asked offline, so prompts that expect one are counted apart. `--router spec` (offline) routes with the
routing spec's rules R-A1..R-A5 alone, as the baseline the project's rules are measured against.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from daari.config import PricingConfig
from daari.eval.requests import request_body, to_request
from daari.pricing import estimate_cost, frontier_cost
from daari.protocol.chat import ChatRequest
from daari.protocol.tokens import estimate_request_tokens
from daari.routing import classifier as rules
from daari.routing.agent_turn import is_agent_turn
from daari.routing.plan import plan_tiers

DEFAULT_SET = Path(__file__).resolve().parents[2] / "evals/routing/routing_set.jsonl"
TIER_RANK = {"L0": 0, "L1": 1, "CCS": 2, "L2": 2, "Lt": 2, "L3": 3, "L4": 4, "L5": 5, "L6": 6}
SHORTCUTS = ("L1", "L2", "Lt", "CCS")
ANSWER_TOKENS = 300  # assumed answer length for the cost estimate (the same for every tier and router)
ROUTERS = ("daari", "spec")


@dataclass(frozen=True)
class Routed:
    id: str
    split: str
    kind: str
    expected: str  # "L4" or alternatives "L5/L6"
    actual: str  # a tier, or "error" / "no answer"
    rule_id: str
    prompt_tokens: int

    @property
    def correct(self) -> bool:
        return self.actual in self.expected.split("/")

    @property
    def expected_first(self) -> str:
        return self.expected.split("/")[0]


def load_set(path: Path) -> list[dict[str, Any]]:
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        prompt = json.loads(line)
        missing = [k for k in ("id", "split", "expected_tier", "reason", "messages") if k not in prompt]
        if missing or prompt["split"] not in ("tune", "holdout"):
            raise ValueError(f"{path}:{number}: needs id, split (tune|holdout), expected_tier, reason, messages")
        prompts.append(prompt)
    return prompts


def spec_classify(request: ChatRequest) -> rules.Classification:
    """The routing spec's table alone: R-A1..R-A5 top to bottom (agent turns: ADR-0004, by size)."""
    text = rules.last_user_text(request).strip()
    tokens = estimate_request_tokens(request)
    size_id, size_ceiling = rules.size_rule(tokens)
    if not is_agent_turn(request):
        if tokens < rules.CLASSIFY_MAX_TOKENS and rules.CLASSIFY.search(text):
            return rules.Classification("classify", "R-A1", "L3", tokens)
        if tokens < rules.TRANSFORM_MAX_TOKENS and (rules.TRANSFORM.search(text) or rules.EXTRACT.search(text)):
            return rules.Classification("transform", "R-A2", "L3", tokens)
    return rules.Classification("generate_small", size_id, size_ceiling, tokens)


def route_offline(prompt: dict[str, Any], tiers: list[str], router: str) -> Routed:
    request = to_request(prompt)
    verdict = spec_classify(request) if router == "spec" else rules.classify(request)
    chain = plan_tiers(verdict.ceiling, tiers, None, escalation=True)
    return _routed(prompt, chain[0], verdict.rule_id, estimate_request_tokens(request))


def route_live(client: httpx.Client, url: str, prompt: dict[str, Any]) -> Routed:
    tokens = estimate_request_tokens(to_request(prompt))
    try:
        response = client.post(f"{url}/v1/chat/completions", json=request_body(prompt, 64),
                                headers={"X-Daari-No-Cache": "true"})
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return _routed(prompt, "no answer", "-", tokens)
    meta = body.get("daari_meta") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        return _routed(prompt, "no answer", "-", tokens)
    attempts = meta.get("attempts") or []
    first = attempts[0].get("tier") if attempts and isinstance(attempts[0], dict) else None
    tier = meta.get("tier") if meta.get("tier") in SHORTCUTS or not first else first
    if response.status_code != 200:
        tier = "error"
    return _routed(prompt, str(tier or "no answer"), str(meta.get("rule_id") or "-"), tokens)


def _routed(prompt: dict[str, Any], actual: str, rule_id: str, tokens: int) -> Routed:
    return Routed(prompt["id"], prompt["split"], prompt.get("kind", "-"), prompt["expected_tier"], actual,
                  rule_id, tokens)


@dataclass
class SetReport:
    title: str
    rows: list[Routed]
    excluded: list[Routed]  # offline: prompts that expect a shortcut tier

    def accuracy(self, rows: list[Routed] | None = None) -> tuple[int, int]:
        rows = self.rows if rows is None else rows
        return sum(r.correct for r in rows), len(rows)


def cost(rows: list[Routed], pricing: PricingConfig) -> tuple[float, float]:
    """(routed, everything at L6) in USD, ANSWER_TOKENS assumed per answer."""
    routed = sum(estimate_cost(pricing, r.actual, None, r.prompt_tokens, ANSWER_TOKENS) for r in rows
                 if r.actual in TIER_RANK)
    frontier = sum(frontier_cost(pricing, r.prompt_tokens, ANSWER_TOKENS) for r in rows)
    return routed, frontier


def format_set_report(report: SetReport, pricing: PricingConfig) -> str:
    rows = report.rows
    lines = [report.title, ""]
    right, total = report.accuracy()
    lines.append(f"accuracy: {right}/{total} ({_pct(right, total)})" + "".join(
        f"   {split}: {a}/{n} ({_pct(a, n)})" for split in ("tune", "holdout")
        for a, n in [report.accuracy([r for r in rows if r.split == split])]))
    under = sum(1 for r in rows if r.actual in TIER_RANK and TIER_RANK[r.actual] < TIER_RANK[r.expected_first])
    over = sum(1 for r in rows if not r.correct and r.actual in TIER_RANK
               and TIER_RANK[r.actual] > max(TIER_RANK[t] for t in r.expected.split("/")))
    lines.append(f"misses: {under} to a cheaper tier than expected (quality risk; escalation may catch them), "
                 f"{over} to a dearer one (cost), {total - right - under - over} other (errors, no answer)")
    if report.excluded:
        lines.append(f"not evaluated offline: {len(report.excluded)} prompts expect a shortcut tier "
                     f"({', '.join(sorted({r.expected for r in report.excluded}))}); run against a daari for them")
    lines += ["", "per expected tier:"]
    for tier in sorted({r.expected for r in rows}, key=lambda t: TIER_RANK[t.split("/")[0]]):
        group = [r for r in rows if r.expected == tier]
        a, n = report.accuracy(group)
        lines.append(f"  {tier:6} {a:>3}/{n:<3} {_pct(a, n):>5}")
    actuals = sorted({r.actual for r in rows}, key=lambda t: TIER_RANK.get(t, 99))
    expecteds = sorted({r.expected for r in rows}, key=lambda t: TIER_RANK[t.split("/")[0]])
    counts = Counter((r.expected, r.actual) for r in rows)
    lines += ["", "confusion (rows: expected, columns: routed):", "  " + " " * 7 + "".join(f"{a:>8}" for a in actuals)]
    for e in expecteds:
        lines.append(f"  {e:7}" + "".join(f"{counts[(e, a)] or '.':>8}" for a in actuals))
    routed, frontier = cost(rows, pricing)
    saving = 1 - routed / frontier if frontier else 0.0
    l6 = pricing.tiers.get("L6")
    price = f"L6 ${l6.input_per_mtok:g}/${l6.output_per_mtok:g} per Mtok in/out" if l6 else "L6 unpriced"
    lines += ["", f"cost: ${routed:.4f} routed vs ${frontier:.4f} with every prompt at L6 "
                  f"({saving:.0%} saved; {price}, other tiers as priced in `pricing:`, "
                  f"{ANSWER_TOKENS} answer tokens assumed per prompt)"]
    misses = [r for r in rows if not r.correct]
    if misses:
        lines += ["", "misses:"] + [f"  {r.id} {r.split:7} {r.kind:15} expected {r.expected:6} got {r.actual:6} "
                                    f"({r.rule_id}, {r.prompt_tokens} tok)" for r in misses]
    return "\n".join(lines)


def _pct(a: int, n: int) -> str:
    return f"{a / n:.0%}" if n else "-"


def run_set(path: Path, *, split: str = "all", offline: bool = False, tiers: list[str] | None = None,
            router: str = "daari", url: str = "http://127.0.0.1:8787", timeout_s: float = 600.0) -> SetReport:
    prompts = [p for p in load_set(path) if split == "all" or p["split"] == split]
    if offline:
        tiers = tiers or ["L3", "L4", "L6"]
        routed = [route_offline(p, tiers, router) for p in prompts]
        shortcut = [r for r in routed if any(t in SHORTCUTS for t in r.expected.split("/"))]
        rows = [r for r in routed if r not in shortcut]
        title = (f"daari eval routing --set {path.name}: {len(prompts)} prompts ({split}), offline, router {router}, "
                 f"tiers {','.join(tiers)}")
        return SetReport(title, rows, shortcut)
    base = url.rstrip("/").removesuffix("/v1")
    with httpx.Client(timeout=timeout_s) as client:
        rows = [route_live(client, base, p) for p in prompts]
    return SetReport(f"daari eval routing --set {path.name}: {len(prompts)} prompts ({split}) against {base}",
                     rows, [])


def run_set_cli(args: argparse.Namespace) -> int:
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    if args.router != "daari" and not args.offline:
        raise SystemExit("daari eval routing: --router spec needs --offline "
                         "(a running daari routes with its own rules)")
    report = run_set(args.eval_set, split=args.split, offline=args.offline, tiers=tiers, router=args.router,
                     url=args.url, timeout_s=args.timeout)
    print(format_set_report(report, PricingConfig()))
    return 0
