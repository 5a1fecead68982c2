"""The routing eval runner against a fake daari on loopback: criteria pass, fail, and the CLI exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daari.eval.routing_eval import (
    DEFAULT_PROMPTS,
    MVP_L3_IDS,
    SPEC_IDS,
    expected_tiers,
    format_report,
    load_prompts,
    main,
    run_routing_eval,
)
from daari.server.asgi_io import answer_lifespan, read_all
from tests.fakes.serving import serve_app_in_thread

Behaviour = Callable[[dict[str, Any], bool, bool], tuple[int, dict[str, Any] | bytes]]


def completion(text: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "daari",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
            "daari_meta": meta}


def meta(tier: str, *, cache_hit: bool = False, escalated_from: str | None = None) -> dict[str, Any]:
    return {"tier": tier, "task_type": "chat", "cache_hit": cache_hit, "rule_id": "R-A1",
            "escalated_from": escalated_from, "agent_turn": False}


def healthy_mvp(body: dict[str, Any], no_cache: bool, seen_before: bool) -> tuple[int, dict[str, Any] | bytes]:
    """What a correct MVP daari answers: L3 for misses, L0 for a cached repeat, an error for tools."""
    if body.get("tools"):
        return 422, {"error": {"message": "no tier can produce tool calls", "type": "invalid_request_error",
                               "param": None, "code": "tool_calls_unsupported_locally"},
                     "daari_meta": {**meta("L3"), "error": "tool_calls_unsupported_locally"}}
    if seen_before and not no_cache:
        return 200, completion("A cached answer.", meta("L0", cache_hit=True))
    return 200, completion("A fresh answer from the local model.", meta("L3"))


class FakeDaari:
    """A tiny ASGI app speaking daari's OpenAI surface; it records what it was sent."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.seen: set[str] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        raw = await read_all(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
            status, payload = 404, {"error": {"message": "not found", "type": "invalid_request_error",
                                              "param": None, "code": "not_found"}}
        else:
            body = json.loads(raw)
            self.requests.append((body, headers))
            key = json.dumps(body["messages"], sort_keys=True)
            no_cache = headers.get("x-daari-no-cache") == "true"
            status, payload = self.behaviour(body, no_cache, key in self.seen)
            if not no_cache:
                self.seen.add(key)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})


def run_against(behaviour: Behaviour, mode: str = "mvp") -> tuple[Any, FakeDaari]:
    app = FakeDaari(behaviour)
    with serve_app_in_thread(app) as url:
        return run_routing_eval(url, DEFAULT_PROMPTS, max_tokens=8, mode=mode, timeout_s=10), app


SPEC_TIERS = {  # the routing spec's golden table: id -> (MVP, v1)
    "GP-01": ("L0", "L0"), "GP-02": ("L3", "L3"), "GP-03": ("L3", "L2/L3"), "GP-04": ("L3", "L3"),
    "GP-05": ("L0", "L0"), "GP-06": ("L3", "Lt"), "GP-07": ("L3", "Lt"), "GP-08": ("L3", "L6"),
    "GP-09": ("L3", "L3"), "GP-10": ("L3", "L5/L6"), "GP-11": ("L3", "L3"), "GP-12": ("L3", "L1"),
    "GP-13": ("L3", "Lt"), "GP-14": ("L3", "L2/L3"), "GP-15": ("L3", "L3"), "GP-16": ("L3", "L4"),
    "GP-17": ("L3", "L3"), "GP-18": ("L3", "L3"), "GP-19": ("L3", "Lt"), "GP-20": ("L3", "L3/L4"),
}


def test_golden_file_is_the_specs_table_then_real_clients() -> None:
    prompts = load_prompts(DEFAULT_PROMPTS)
    by_id = {p["id"]: p for p in prompts}
    assert [p["id"] for p in prompts][:20] == list(SPEC_IDS)
    assert {i: (by_id[i]["expected_mvp_tier"], by_id[i]["expected_v1_tier"]) for i in SPEC_IDS} == SPEC_TIERS
    assert by_id["GP-01"].get("repeat") and by_id["GP-05"]["repeat_of"] == "GP-04"
    assert by_id["GP-05"]["messages"] == by_id["GP-04"]["messages"]
    assert by_id["GP-12"]["paraphrase_of"] == "GP-04"
    assert all(by_id[i]["expected_mvp_tier"] == "L3" for i in MVP_L3_IDS)
    assert by_id["GP-18"]["tools"] and len(by_id["GP-20"]["messages"]) == 5
    assert "Is this a test file?" in by_id["GP-02"]["messages"][0]["content"]
    assert by_id["GP-10"]["messages"][0]["content"].count("\n") >= 500  # the 500-line class
    clients = {p["source"] for p in prompts if p["id"] not in SPEC_IDS}
    assert clients == {"aider", "claude-code", "codex", "roo-code", "tools"}  # tools: both sides of Lt and L2
    tools_rows = [p for p in prompts if p["source"] == "tools"]
    assert {p["expected_v1_tier"] for p in tools_rows} == {"Lt", "L3"} and len(tools_rows) >= 6


def test_expected_tier_alternatives() -> None:
    assert expected_tiers("L2/L3") == ["L2", "L3"] == expected_tiers("L2 or L3")
    assert expected_tiers("L6") == ["L6"]


def test_healthy_daari_passes_and_only_repeats_use_the_cache() -> None:
    report, app = run_against(healthy_mvp)
    assert report.passed, format_report(report)
    assert all(r.passed for r in report.results), format_report(report)
    prompts = load_prompts(DEFAULT_PROMPTS)
    assert len(app.requests) == len(prompts) + 1  # GP-01 is sent twice
    repeats = [p["messages"] for p in prompts if p["id"] in ("GP-01", "GP-04", "GP-05")]
    for body, headers in app.requests:
        assert body["model"] == "daari" and body["temperature"] == 0
        assert body["max_tokens"] == (1 if body["messages"] == [{"role": "user", "content": "quota"}] else 8)
        assert (headers.get("x-daari-no-cache") == "true") is (body["messages"] not in repeats)
    assert len([body for body, _ in app.requests if body.get("tools")]) == 2  # GP-18 and the Codex turn


def test_report_lists_every_prompt_and_the_verdict() -> None:
    report, _ = run_against(healthy_mvp)
    text = format_report(report)
    for n in range(1, 21):
        assert f"GP-{n:02d}" in text
    assert "L3 then L0" in text
    assert "error(tool_calls_unsupported_locally)" in text
    assert "GP-05" in text and "MVP criteria (routing spec)" in text
    assert text.count("[PASS]") == 3
    assert text.rstrip().endswith("VERDICT: PASS")


def broken(body: dict[str, Any], no_cache: bool, seen_before: bool) -> tuple[int, dict[str, Any] | bytes]:
    """Never caches, sends GP-11 to L4, answers GP-17 with an empty 200, and GP-15 with a bare 500."""
    text = body["messages"][-1]["content"] or ""
    if text.startswith("What does this regex"):
        return 200, completion("Seven digits with a dash.", meta("L4"))
    if text == "hi":
        return 200, completion("", meta("L3"))
    if text.startswith("Summarize this error log"):
        return 500, b"Internal Server Error"
    return healthy_mvp(body, no_cache, False)


def test_failures_are_reported_and_fail_the_verdict() -> None:
    report, _ = run_against(broken)
    assert not report.passed
    l0, l3, silent = report.criteria
    assert not l0.passed and "GP-01" in l0.detail and "GP-05" in l0.detail
    assert not l3.passed and "GP-11 (L4)" in l3.detail and "GP-15" in l3.detail and "GP-17" in l3.detail
    assert not silent.passed and "GP-15 (status 500, body is not JSON)" in silent.detail
    assert "GP-17 (200 with an empty answer)" in silent.detail
    failing_rows = {r.id for r in report.results if not r.passed}
    assert failing_rows == {"GP-01", "GP-05", "GP-11", "GP-15", "GP-17"}
    assert format_report(report).rstrip().endswith("VERDICT: FAIL")


def test_an_unexplained_tool_answer_fails_its_row() -> None:
    def answers_tools_with_wrong_code(body: dict[str, Any], no_cache: bool, seen: bool) -> Any:
        if body.get("tools"):
            return 400, {"error": {"message": "bad", "type": "invalid_request_error", "code": "other"}}
        return healthy_mvp(body, no_cache, seen)

    report, _ = run_against(answers_tools_with_wrong_code)
    assert report.passed  # an explicit error is not a silent failure, and the row is not a criterion
    assert [r.id for r in report.results if not r.passed] == ["GP-18", "GP-25"]


def test_escalation_from_l3_is_not_routed_to_l3_in_mvp() -> None:
    def escalates_l3(body: dict[str, Any], no_cache: bool, seen_before: bool) -> Any:
        status, payload = healthy_mvp(body, no_cache, seen_before)
        if isinstance(payload, dict) and payload.get("daari_meta", {}).get("tier") == "L3" and status == 200:
            payload["daari_meta"] = meta("L4", escalated_from="L3")
        return status, payload

    report, _ = run_against(escalates_l3, mode="mvp")
    assert not report.criteria[1].passed
    assert "L3+L4" in format_report(report)


def v1_tiers(body: dict[str, Any], no_cache: bool, seen_before: bool) -> tuple[int, dict[str, Any]]:
    """Answers every prompt at the first tier of its v1 expectation, except the ones listed in MISS."""
    prompt = next(p for p in load_prompts(DEFAULT_PROMPTS) if p["messages"] == body["messages"])
    tier = "L0" if seen_before and not no_cache else expected_tiers(prompt["expected_v1_tier"])[0]
    if prompt["id"] in v1_tiers.miss:  # type: ignore[attr-defined]
        tier = "L3"
    return 200, completion("An answer from the expected tier.", meta(tier, cache_hit=tier == "L0"))


@pytest.mark.parametrize(("miss", "passed"), [((), True), (("GP-12", "GP-13"), True),
                                              (("GP-06", "GP-07", "GP-13"), False)])
def test_v1_verdict_needs_ninety_percent_of_the_spec_prompts(miss: tuple[str, ...], passed: bool) -> None:
    v1_tiers.miss = miss  # type: ignore[attr-defined]
    report, _ = run_against(v1_tiers, mode="v1")
    share, silent = report.criteria
    assert share.passed is passed and silent.passed, format_report(report)
    assert f"{20 - len(miss)}/20" in share.name
    text = format_report(report)
    assert ("L1 semantic cache: GP-12" in text) is ("GP-12" in miss)
    assert ("Lt tools: " + ", ".join(m for m in miss if m != "GP-12") in text) is bool(miss)


def test_v1_lets_the_paraphrase_pair_use_the_cache() -> None:
    _, app = run_against(healthy_mvp, mode="v1")
    prompts = {json.dumps(p["messages"]): p for p in load_prompts(DEFAULT_PROMPTS)}
    cached = {prompts[json.dumps(body["messages"])]["id"] for body, headers in app.requests
              if headers.get("x-daari-no-cache") != "true"}
    assert cached == {"GP-01", "GP-05", "GP-12"}  # GP-04 sends GP-05's very body
    assert sum(headers.get("x-daari-no-cache") != "true" for _, headers in app.requests) == 5


def test_unreachable_daari_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(DEFAULT_PROMPTS.read_text().splitlines()[1] + "\n")
    report = run_routing_eval("http://127.0.0.1:9", prompts, timeout_s=2)
    assert not report.passed
    assert "no response" in report.criteria[2].detail


def test_main_exit_code_follows_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    for behaviour, code in ((healthy_mvp, 0), (broken, 1)):
        with serve_app_in_thread(FakeDaari(behaviour)) as url:
            assert main(["--url", url + "/v1", "--max-tokens", "4"]) == code
        out = capsys.readouterr().out
        assert ("VERDICT: PASS" if code == 0 else "VERDICT: FAIL") in out


def test_prompt_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "GP-01", "messages": []}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_prompts(bad)


@pytest.mark.parametrize(("answered_by_l2", "passed"), [("Format as JSON", True), ("Is this a test file?", False)])
def test_mvp_accepts_a_shortcut_tier_only_where_v1_names_it(answered_by_l2: str, passed: bool) -> None:
    def with_rules(body: dict[str, Any], no_cache: bool, seen_before: bool) -> Any:
        if (body["messages"][-1]["content"] or "").startswith(answered_by_l2):
            return 200, completion('{"foo": 1}', meta("L2"))
        return healthy_mvp(body, no_cache, seen_before)

    report, _ = run_against(with_rules)
    assert report.criteria[1].passed is passed, format_report(report)
