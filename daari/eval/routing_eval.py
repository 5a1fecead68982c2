"""`daari eval routing`: send the golden prompts to a running daari, compare tiers, judge the spec's criteria.

The criteria are docs/routing.md, "Golden prompts"; the prompts are evals/routing/prompts.jsonl (the spec's
GP-01..GP-20, then real clients' request shapes). `--set FILE` runs the larger eval instead (routing_set.py).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from daari.eval.requests import request_body

DEFAULT_PROMPTS = Path(__file__).resolve().parents[2] / "evals/routing/prompts.jsonl"
DEFAULT_URL = "http://127.0.0.1:8787"
MODES = ("mvp", "v1")
MVP_L0_IDS = ("GP-01", "GP-05")  # sent twice; the second answer must come from L0
MVP_L3_IDS = ("GP-02", "GP-03", "GP-04", "GP-09", "GP-11", "GP-15", "GP-17")  # must route to L3
SPEC_IDS = tuple(f"GP-{n:02d}" for n in range(1, 21))  # what the v1 criterion counts
V1_MIN_SHARE = 0.9  # v1: at least 90% of GP-01..GP-20 at their v1 tier
SHORTCUT_TIER_NAMES = {"L1": "L1 semantic cache", "L2": "L2 rules", "Lt": "Lt tools", "CCS": "CCS"}
REQUIRED_FIELDS = ("id", "messages", "expected_mvp_tier", "expected_v1_tier", "rule_id", "task_type")


@dataclass
class Reply:
    """One HTTP exchange, reduced to what the criteria look at."""

    status: int | None = None  # None: no HTTP response at all
    tier: str | None = None
    rule_id: str | None = None
    cache_hit: bool = False
    escalated_from: list[str] = field(default_factory=list)
    error_code: str | None = None
    answered: bool = False  # 200 with non-empty content or tool calls
    explicit_error: bool = False  # an error status with an {"error": {"message": ...}} body
    problem: str | None = None  # why the exchange is neither answered nor an explicit error
    confidence: float | None = None
    classifier: str | None = None  # heuristic | slm | slm_fallback

    @property
    def accounted_for(self) -> bool:
        return self.answered or self.explicit_error


@dataclass
class PromptResult:
    id: str
    rule_expected: str
    expected_mvp: str
    expected_v1: str
    expected: str  # the expectation for the mode this run used
    expected_error: str | None
    replies: list[Reply]
    passed: bool
    source: str = "spec"

    @property
    def final(self) -> Reply:
        return self.replies[-1]


@dataclass(frozen=True)
class Criterion:
    name: str
    passed: bool
    detail: str


@dataclass
class EvalReport:
    url: str
    mode: str
    results: list[PromptResult]
    criteria: list[Criterion]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.criteria)


def load_prompts(path: Path) -> list[dict[str, Any]]:
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        prompt = json.loads(line)
        missing = [f for f in REQUIRED_FIELDS if f not in prompt]
        if missing:
            raise ValueError(f"{path}:{number}: golden prompt lacks {', '.join(missing)}")
        prompts.append(prompt)
    return prompts


def _uses_cache(prompt: dict[str, Any], linked: set[str], paraphrased: set[str], mode: str) -> bool:
    """Whether the prompt may read and write the cache. Every other prompt is sent with X-Daari-No-Cache,
    so a second run measures routing rather than the first run's cache entries."""
    if prompt.get("repeat") or "repeat_of" in prompt or prompt["id"] in linked:
        return True
    return mode == "v1" and (prompt["id"] in paraphrased or "paraphrase_of" in prompt)


def _reply(response: httpx.Response) -> Reply:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Reply(status=response.status_code, problem=f"status {response.status_code}, body is not JSON")
    meta: dict[str, Any] = body["daari_meta"] if isinstance(body.get("daari_meta"), dict) else {}
    escalated = meta.get("escalated_from") or []  # the spec's one tier; older servers sent a list
    reply = Reply(status=response.status_code, tier=meta.get("tier"), rule_id=meta.get("rule_id"),
                  cache_hit=bool(meta.get("cache_hit")),
                  escalated_from=[escalated] if isinstance(escalated, str) else list(escalated),
                  confidence=meta.get("confidence"), classifier=meta.get("classifier"))
    if response.status_code == 200:
        choices = body.get("choices") or [{}]
        message: dict[str, Any] = choices[0].get("message") or {}
        reply.answered = bool((message.get("content") or "").strip() or message.get("tool_calls"))
        if not reply.answered:
            reply.problem = "200 with an empty answer"
        return reply
    error = body.get("error")
    if isinstance(error, dict) and error.get("message"):
        reply.explicit_error = True
        reply.error_code = error.get("code") or meta.get("error")
    else:
        reply.problem = f"status {response.status_code} without an error body"
    return reply


def _send(client: httpx.Client, url: str, prompt: dict[str, Any], max_tokens: int, use_cache: bool) -> Reply:
    body = request_body(prompt, max_tokens)
    headers = {} if use_cache else {"X-Daari-No-Cache": "true"}
    try:
        return _reply(client.post(f"{url}/v1/chat/completions", json=body, headers=headers))
    except httpx.HTTPError as exc:
        return Reply(problem=f"no response: {type(exc).__name__}")


def expected_tiers(expected: str) -> list[str]:
    """"L2/L3" and "L2 or L3" both mean either tier."""
    return [t.strip() for t in expected.replace(" or ", "/").split("/") if t.strip()]


def shortcut_first(reply: Reply, expected_v1: str) -> bool:
    """A shortcut tier the v1 table names for this prompt answered before any routing (an MVP-era
    expectation of L3 does not fault a daari that already has L2 or Lt: they answer before step 9)."""
    return reply.answered and reply.tier in SHORTCUT_TIER_NAMES and reply.tier in expected_tiers(expected_v1)


def _meets(expected: str, expected_error: str | None, reply: Reply, accepted_errors: list[str],
           expected_v1: str = "") -> bool:
    if shortcut_first(reply, expected_v1):
        return True
    if expected == "error":
        return reply.explicit_error and (expected_error is None or reply.error_code == expected_error)
    if reply.explicit_error and reply.error_code in accepted_errors:
        return True  # routed as expected; the tier said plainly why it cannot answer (no tool-capable L3)
    return reply.answered and reply.tier in expected_tiers(expected)


def _criteria(results: list[PromptResult], mode: str) -> list[Criterion]:
    by_id = {r.id: r for r in results}

    def routed_to_l3(result: PromptResult) -> bool:
        # v1 may escalate a weak L3 answer: it still routed to L3 first.
        reply = result.final
        if shortcut_first(reply, result.expected_v1):
            return True
        return reply.answered and (reply.tier == "L3" or (mode == "v1" and "L3" in reply.escalated_from))

    def l0_on_repeat(result: PromptResult) -> bool:
        return result.final.tier == "L0" and result.final.cache_hit

    def check(name: str, ids: tuple[str, ...], rule: Any) -> Criterion:
        bad = [i for i in ids if i not in by_id or not rule(by_id[i])]
        detail = "ok" if not bad else "failing: " + ", ".join(
            f"{i} ({_actual(by_id[i]) if i in by_id else 'missing'})" for i in bad)
        return Criterion(name, not bad, detail)

    replies = [(r.id, reply) for r in results for reply in r.replies]
    silent = [f"{i} ({reply.problem})" for i, reply in replies if not reply.accounted_for]
    no_silent = Criterion(f"no silent failures ({len(replies)} requests: 200 with an answer or an explicit error)",
                          not silent, "ok" if not silent else "failing: " + ", ".join(silent))
    if mode == "v1":
        spec = [r for r in results if r.id in SPEC_IDS]
        matched = [r for r in spec if r.passed]
        share = len(matched) / len(spec) if spec else 0.0
        missed = [f"{r.id} ({_actual(r)}, expected {r.expected})" for r in spec if not r.passed]
        return [Criterion(f">= {V1_MIN_SHARE:.0%} of GP-01..GP-20 at their v1 tier: {len(matched)}/{len(spec)} "
                          f"({share:.0%})", bool(spec) and share >= V1_MIN_SHARE,
                          "ok" if not missed else "missing: " + ", ".join(missed)), no_silent]
    return [
        check(f"{', '.join(MVP_L0_IDS)} served from L0 on repeat", MVP_L0_IDS, l0_on_repeat),
        check(f"{', '.join(MVP_L3_IDS)} route to L3", MVP_L3_IDS, routed_to_l3),
        no_silent,
    ]


def run_routing_eval(url: str, prompts_path: Path = DEFAULT_PROMPTS, max_tokens: int = 48,
                     mode: str = "mvp", timeout_s: float = 600.0) -> EvalReport:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    base = url.rstrip("/").removesuffix("/v1")
    prompts = load_prompts(prompts_path)
    paraphrased = {p["paraphrase_of"] for p in prompts if "paraphrase_of" in p}
    linked = {p["repeat_of"] for p in prompts if "repeat_of" in p}
    results = []
    with httpx.Client(timeout=timeout_s) as client:
        for prompt in prompts:
            use_cache = _uses_cache(prompt, linked, paraphrased, mode)
            sends = 2 if prompt.get("repeat") else 1
            replies = [_send(client, base, prompt, max_tokens, use_cache) for _ in range(sends)]
            expected = prompt["expected_mvp_tier"] if mode == "mvp" else prompt["expected_v1_tier"]
            results.append(PromptResult(
                id=prompt["id"], rule_expected=prompt["rule_id"], expected_mvp=prompt["expected_mvp_tier"],
                expected_v1=prompt["expected_v1_tier"], expected=expected,
                expected_error=prompt.get("expected_error"), replies=replies,
                passed=_meets(expected, prompt.get("expected_error"), replies[-1],
                              list(prompt.get("accepted_errors") or []), prompt["expected_v1_tier"]),
                source=prompt.get("source", "spec")))
    return EvalReport(url=base, mode=mode, results=results, criteria=_criteria(results, mode))


def _actual(result: PromptResult) -> str:
    def one(reply: Reply) -> str:
        if reply.explicit_error:
            return f"error({reply.error_code or '?'})"
        if not reply.answered:
            return "silent failure"
        chain = "+".join([*reply.escalated_from, reply.tier or "?"]) if reply.escalated_from else reply.tier
        return chain or "?"

    return " then ".join(one(r) for r in result.replies)


def waiting_for(report: EvalReport) -> dict[str, list[str]]:
    """Rows that expected a shortcut tier (L1, L2, Lt) and did not get it: they wait for that tier (or for the
    pattern of it that serves them, such as an Lt tool this daari does not run)."""
    waiting: dict[str, list[str]] = {}
    for r in report.results:
        if r.passed:
            continue
        tiers = [t for t in expected_tiers(r.expected) if t in SHORTCUT_TIER_NAMES]
        if tiers:
            waiting.setdefault(tiers[0], []).append(r.id)
    return waiting


def format_report(report: EvalReport) -> str:
    header = ("id", "rule (exp/act)", "exp MVP", "exp v1", "actual", "confidence", "classifier", "result")
    rows = []
    for r in report.results:
        actual_rule = r.final.rule_id or "-"
        rule = r.rule_expected if actual_rule == r.rule_expected else f"{r.rule_expected}/{actual_rule}"
        confidence = "-" if r.final.confidence is None else f"{r.final.confidence:.2f}"
        rows.append((r.id, rule, r.expected_mvp, r.expected_v1, _actual(r), confidence,
                     r.final.classifier or "-", "pass" if r.passed else "FAIL"))
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"daari eval routing: {report.url}, mode {report.mode}", ""]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        lines.append("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    matched = sum(r.passed for r in report.results)
    lines += ["", f"tiers as expected for mode {report.mode}: {matched}/{len(report.results)}"]
    waiting = waiting_for(report)
    if waiting:
        lines += ["waiting for shortcut tiers (or their patterns) this daari does not serve: " + "; ".join(
            f"{SHORTCUT_TIER_NAMES.get(tier, tier)}: {', '.join(ids)}" for tier, ids in waiting.items())]
    lines += ["", f"{report.mode.upper()} criteria (routing spec):"]
    lines += [f"  [{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in report.criteria]
    lines += ["", f"VERDICT: {'PASS' if report.passed else 'FAIL'}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval routing",
                                     description="Send the golden prompts to a running daari and check routing.")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"daari's base URL (default {DEFAULT_URL})")
    parser.add_argument("--mode", choices=MODES, default="mvp", help="which expected tier column to check")
    parser.add_argument("--max-tokens", type=int, default=48, help="max_tokens of every request (default 48)")
    parser.add_argument("--prompts", type=Path, default=DEFAULT_PROMPTS, help="golden prompts JSONL")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    parser.add_argument("--set", type=Path, default=None, dest="eval_set",
                        help="run the larger routing eval in FILE instead (accuracy per tier, confusion, cost)")
    parser.add_argument("--split", choices=("all", "tune", "holdout"), default="all",
                        help="with --set: which half of the set to run (default all)")
    parser.add_argument("--offline", action="store_true",
                        help="with --set: classify and plan in-process instead of asking a running daari")
    parser.add_argument("--tiers", default="L3,L4,L6",
                        help="with --set --offline: the configured model tiers (default L3,L4,L6)")
    parser.add_argument("--router", choices=("daari", "spec"), default="daari",
                        help="with --set --offline: daari's rules, or the routing spec's R-A1..R-A5 alone")
    args = parser.parse_args(argv)
    if args.eval_set is not None:
        from daari.eval.routing_set import run_set_cli

        return run_set_cli(args)
    report = run_routing_eval(args.url, args.prompts, args.max_tokens, args.mode, args.timeout)
    print(format_report(report))
    return 0 if report.passed else 1
