"""OpenTelemetry traces through a running daari, exported to an in-process OTLP/HTTP receiver (a real loopback
server that records what it was posted): one trace per request, GenAI attributes, escalation attempts as child
spans, no content; and nothing at all when off (the default)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from daari.server.asgi_io import answer_lifespan, read_all
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

SECRET_PROMPT = "please explain the canary-otel-prompt-8841 in detail"


class OtlpReceiver:
    """Accepts POST /v1/traces with OTLP/JSON bodies, as an OpenTelemetry collector's OTLP/HTTP receiver does."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.received = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        body = await read_all(receive)
        ok = scope["path"] == "/v1/traces" and dict(scope["headers"]).get(b"content-type") == b"application/json"
        if ok:
            self.raw.append(body)
            self.bodies.append(json.loads(body))
            self.received.set()
        await send({"type": "http.response.start", "status": 200 if ok else 415,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    def spans(self) -> list[dict[str, Any]]:
        return [span for body in self.bodies for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
                for span in ss["spans"]]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


async def test_one_trace_per_request_with_attempts_as_children(tmp_path: Path) -> None:
    l3, l6, receiver = FakeOpenAI(), FakeOpenAI(), OtlpReceiver()
    async with serve_app(l3) as u3, serve_app(l6) as u6, serve_app(receiver) as collector:
        config = make_config(
            tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1"), "L6": upstream_tier("openai", u6 + "/v1")},
            frontier={"enabled": True},
            otel={"enabled": True, "endpoint": collector + "/v1/traces", "flush_interval_s": 0.05,
                  "headers": {"x-collector-token": "tok-otel-secret"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            l3.script = ["refuse"]  # L3 answers weakly: the request escalates to L6
            response = await client.post("/v1/chat/completions", json={
                "model": "gpt-test", "messages": [{"role": "user", "content": SECRET_PROMPT}]})
            assert response.status_code == 200
            shown = (await client.get("/v1/daari/config")).text
            with trio.fail_after(10):
                await receiver.received.wait()
                # The exporter counts a batch once the collector's answer is back, which is after the collector
                # has it: a /metrics read right away can come first (it does on the h11 front end).
                while "daari_otel_spans_exported_total 1.0" not in (metrics := (await client.get("/metrics")).text):
                    await trio.sleep(0.01)
    spans = receiver.spans()
    roots = [s for s in spans if "parentSpanId" not in s]
    assert len(roots) == 1
    root = roots[0]
    children = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert {s["traceId"] for s in spans} == {root["traceId"]} and len(root["traceId"]) == 32
    a = attrs(root)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "gpt-test"
    assert a["daari.tier"] == "L6" and int(a["gen_ai.usage.output_tokens"]) > 0
    assert a["daari.request_id"] == response.headers["x-daari-request-id"]
    assert int(root["endTimeUnixNano"]) > int(root["startTimeUnixNano"])
    assert [(attrs(c)["daari.tier"], attrs(c)["daari.attempt.outcome"]) for c in children] == [
        ("L3", "low_confidence"), ("L6", "accepted")]
    # Each attempt has its own interval, inside the root's: L3 was asked and judged before L6 was asked.
    (l3_start, l3_end), (l6_start, l6_end), (root_start, root_end) = (
        (int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])) for s in (*children, root))
    assert root_start <= l3_start < l3_end <= l6_start < l6_end <= root_end
    assert (l3_start, l3_end) != (root_start, root_end) and (l6_start, l6_end) != (root_start, root_end)
    assert b"canary-otel-prompt" not in b"".join(receiver.raw)  # no content
    assert "tok-otel-secret" not in shown
    assert "daari_otel_spans_exported_total 1.0" in metrics


async def test_off_by_default_nothing_is_sent(tmp_path: Path) -> None:
    fake, receiver = FakeOpenAI(), OtlpReceiver()
    async with serve_app(fake) as url, serve_app(receiver) as collector:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", url + "/v1")},
                             otel={"endpoint": collector + "/v1/traces", "flush_interval_s": 0.05})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/chat/completions", json={
                "model": "good", "messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 200
            await trio.sleep(0.3)  # six flush intervals, had it been on
            metrics = (await client.get("/metrics")).text
    assert receiver.bodies == []
    # Declared counters are on the page from the start, at 0: nothing was exported, dropped or failed.
    assert {name: otel_value(metrics, name) for name in ("exported", "dropped")} == {"exported": 0, "dropped": 0}
    assert otel_value(metrics, "export_failures") == 0


async def test_a_collector_that_is_down_costs_nothing_but_counts(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", url + "/v1")},
                             otel={"enabled": True, "endpoint": "http://127.0.0.1:9/v1/traces",
                                   "flush_interval_s": 0.05, "timeout_s": 1})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/chat/completions", json={
                "model": "good", "messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 200
            with trio.fail_after(10):
                while otel_value(metrics := (await client.get("/metrics")).text, "export_failures") == 0:
                    await trio.sleep(0.05)
    assert otel_value(metrics, "export_failures") == 1 and otel_value(metrics, "exported") == 0


def otel_value(page: str, what: str) -> float:
    """The value of `daari_otel_<what>_total` (or of `daari_otel_spans_<what>_total`) on a /metrics page."""
    for family in text_string_to_metric_families(page):
        if family.name in (f"daari_otel_{what}", f"daari_otel_spans_{what}"):
            return sum(sample.value for sample in family.samples if sample.name.endswith("_total"))
    raise AssertionError(f"no otel counter {what!r} on the page")
