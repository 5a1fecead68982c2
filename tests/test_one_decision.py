"""Exactly one decision per chat request, whatever ends it (an unexpected fault in the Responses route's
`prepare` included), and count_tokens parsing a large body on a worker thread, through a running daari."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from daari.pipeline.decision import RoutingDecision
from tests.support import daari_server, make_config

BAD_JSON = {"content-type": "application/json"}


async def next_decision(sub: object) -> RoutingDecision:
    with trio.fail_after(10):
        return await sub.receive()  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_fault_in_the_responses_prepare_step_is_one_decision_and_a_shaped_500(
        tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    config = make_config(tmp_path)
    data = trio.Path(config.data_dir)
    await data.mkdir(parents=True, exist_ok=True)
    # A stored-responses file that is not SQLite: the archive raises sqlite3.DatabaseError (not a DaariError)
    # from inside `prepare`, when it looks the previous response up.
    await (data / "responses.sqlite").write_bytes(b"this is not a database" * 200)
    body = {"model": "m", "input": "hi", "previous_response_id": "resp_123", "stream": stream}
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        with server.parts.decisions.subscribe("test") as sub:
            failed = await client.post("/v1/responses", json=body)
            decision = await next_decision(sub)
            # The next request's decision comes next: the failed one published exactly one.
            marker = await client.post("/v1/chat/completions", content=b"{", headers=BAD_JSON)
            following = await next_decision(sub)
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()
    assert failed.status_code == 500
    error = failed.json()["error"]
    assert error["type"] == "api_error" and "internal error in daari" in error["message"]
    assert "Traceback" not in failed.text and "sqlite" not in failed.text.lower()
    assert (decision.status, decision.protocol) == (500, "responses")
    assert decision.error is not None
    assert marker.status_code == 400 and (following.status, following.protocol) == (400, "openai")
    assert any("DatabaseError" in (r.exc_text or "") for r in caplog.records)  # the traceback is in the log


async def test_count_tokens_parses_a_large_body_on_a_worker_thread(tmp_path: Path) -> None:
    config = make_config(tmp_path, server={"thread_parse_bytes": 100_000})
    small = {"model": "claude-x", "messages": [{"role": "user", "content": "count me"}]}
    large = {"model": "claude-x", "messages": [
        {"role": "user", "content": f"file {i}\n" + "def f(x):\n    return x * 2\n" * 200} for i in range(100)]}
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        limiter = server.parts.body_work.limiter
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for holder in holders:  # every worker thread is taken
            await limiter.acquire_on_behalf_of(holder)
        answers: list[httpx.Response] = []

        async def send_large() -> None:
            answers.append(await client.post("/v1/messages/count_tokens", json=large))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_large)
            with trio.fail_after(10):  # until the large body waits for a thread (or, parsed inline, is answered)
                while not (limiter.statistics().tasks_waiting or answers):
                    await trio.sleep(0.005)
            assert not answers, "count_tokens parsed the large body on the event loop"
            counted = await client.post("/v1/messages/count_tokens", json=small)  # small: inline, answered
            assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
            assert not answers
            for holder in holders:
                limiter.release_on_behalf_of(holder)
    assert answers[0].status_code == 200
    assert answers[0].json()["input_tokens"] > counted.json()["input_tokens"] * 100
    assert answers[0].headers["x-daari-estimate"] == "true"


async def test_count_tokens_bad_body_on_a_worker_thread_is_anthropics_400(tmp_path: Path) -> None:
    config = make_config(tmp_path, server={"thread_parse_bytes": 1000})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        with server.parts.decisions.subscribe("test") as sub:
            bad = await client.post("/v1/messages/count_tokens", content=b"[" + b"1," * 2000, headers=BAD_JSON)
            wrong = await client.post("/v1/messages/count_tokens",
                                      json={"model": "m", "messages": "x" * 5000})
            with pytest.raises(trio.WouldBlock):  # count_tokens is not a routing decision (docs/operations.md)
                sub.receive_nowait()
    for answer in (bad, wrong):
        assert answer.status_code == 400
        assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "invalid_request_error"
