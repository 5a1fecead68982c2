"""Property tests over the three request protocols, through the HTTP interface of a running daari (so they
hold whatever parses the bodies): any body, near-valid or not, gets an answer or an error in its protocol's
shape, never a 500 or a traceback, and once the clients are gone daari holds no more tasks or files than
before. `make fuzz` runs them with many more examples (HYPOTHESIS_PROFILE=fuzz)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from daari.server.serve import RunningServer
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.fuzz_support import check_shaped, check_stream, loop_tasks, open_fds, upstream_connections
from tests.support import daari_loop_in_thread, make_config, upstream_tier

# Upstream behaviours by model name (tests/fakes/openai_upstream.py), those that end by themselves.
MODELS = ["good", "refuse", "short", "ack", "tools", "length", "drop", "truncate", "malformed", "error500",
          "error429", "error400", "error401"]
POST_PATHS = ["/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/messages/count_tokens",
              "/v1/responses", "/responses", "/v1/responses/compact", "/v1/responses/input_tokens"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=24)


def maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a valid value, sometimes any JSON value at all."""
    return st.one_of(valid, valid, valid, json_values)


text = st.text(max_size=60)
models = st.sampled_from(MODELS) | st.text(max_size=20).filter(lambda m: not m.startswith("hang"))
openai_parts = st.lists(st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(["text", "image_url", "input_audio", "file", "refusal"]))},
    optional={"text": maybe(text), "image_url": maybe(st.fixed_dictionaries({"url": maybe(text)}))}), max_size=3)
tool_functions = st.fixed_dictionaries(
    {"type": maybe(st.just("function")),
     "function": maybe(st.fixed_dictionaries({"name": maybe(st.from_regex(r"[a-z_]{1,12}", fullmatch=True))},
                                             optional={"description": text, "parameters": json_values}))})
openai_messages = st.lists(st.fixed_dictionaries(
    {"role": maybe(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))},
    optional={"content": maybe(text | openai_parts | st.none()),
              "tool_calls": maybe(st.lists(st.fixed_dictionaries(
                  {"id": text, "type": st.just("function"),
                   "function": st.fixed_dictionaries({"name": text, "arguments": text})}), max_size=2)),
              "tool_call_id": maybe(text), "name": maybe(text)}), max_size=4)
chat_bodies = st.fixed_dictionaries(
    {"model": maybe(models), "messages": maybe(openai_messages)},
    optional={"stream": maybe(st.booleans()), "max_tokens": maybe(st.integers(-5, 100_000)),
              "temperature": maybe(st.floats(-1, 3)), "tools": maybe(st.lists(tool_functions, max_size=2)),
              "tool_choice": maybe(st.sampled_from(["auto", "none", "required"])), "stop": maybe(text),
              "n": maybe(st.integers(0, 3)), "stream_options": maybe(st.fixed_dictionaries(
                  {"include_usage": st.booleans()})), "response_format": json_values, "logprobs": maybe(st.booleans()),
              "reasoning_effort": maybe(st.sampled_from(["low", "medium", "high"])), "seed": json_values})

anthropic_blocks = st.lists(st.fixed_dictionaries(
    {"type": maybe(st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "document"]))},
    optional={"text": maybe(text), "id": maybe(text), "name": maybe(text), "input": maybe(json_values),
              "tool_use_id": maybe(text), "content": maybe(text), "thinking": maybe(text),
              "signature": maybe(text), "is_error": maybe(st.booleans()),
              "source": maybe(st.fixed_dictionaries({"type": st.sampled_from(["base64", "url"])},
                                                    optional={"media_type": text, "data": text, "url": text})),
              "cache_control": maybe(st.fixed_dictionaries({"type": st.just("ephemeral")}))}), max_size=3)
anthropic_messages = st.lists(st.fixed_dictionaries(
    {"role": maybe(st.sampled_from(["user", "assistant"])), "content": maybe(text | anthropic_blocks)}),
    max_size=4)
anthropic_tools = st.lists(st.fixed_dictionaries(
    {"name": maybe(st.from_regex(r"[a-zA-Z_]{1,12}", fullmatch=True))},
    optional={"description": maybe(text), "input_schema": maybe(st.just({"type": "object", "properties": {}})),
              "type": maybe(text)}), max_size=2)
messages_bodies = st.fixed_dictionaries(
    {"model": maybe(models), "messages": maybe(anthropic_messages)},
    optional={"max_tokens": maybe(st.integers(-5, 100_000)), "stream": maybe(st.booleans()),
              "system": maybe(text | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}),
                                                max_size=2)),
              "temperature": maybe(st.floats(-1, 2)), "top_k": maybe(st.integers(-2, 50)),
              "top_p": maybe(st.floats(-1, 2)), "stop_sequences": maybe(st.lists(text, max_size=2)),
              "tools": maybe(anthropic_tools), "tool_choice": maybe(st.fixed_dictionaries(
                  {"type": st.sampled_from(["auto", "any", "tool", "none", "other"])}, optional={"name": text})),
              "thinking": maybe(st.fixed_dictionaries({"type": st.sampled_from(["enabled", "disabled"])},
                                                      optional={"budget_tokens": st.integers(0, 5000)})),
              "metadata": json_values})

responses_items = st.lists(st.one_of(
    st.fixed_dictionaries({"role": maybe(st.sampled_from(["user", "assistant", "system", "developer"])),
                           "content": maybe(text | st.lists(st.fixed_dictionaries(
                               {"type": maybe(st.sampled_from(["input_text", "output_text", "input_image",
                                                               "input_file", "refusal"]))},
                               optional={"text": maybe(text), "image_url": maybe(text)}), max_size=2))},
                          optional={"type": maybe(st.just("message"))}),
    st.fixed_dictionaries({"type": maybe(st.sampled_from(["function_call", "function_call_output", "reasoning",
                                                          "custom_tool_call", "item_reference"]))},
                          optional={"call_id": maybe(text), "name": maybe(text), "arguments": maybe(text),
                                    "output": maybe(text), "id": maybe(text), "summary": json_values,
                                    "input": maybe(text)})), max_size=4)
responses_bodies = st.fixed_dictionaries(
    {"model": maybe(models), "input": maybe(text | responses_items)},
    optional={"stream": maybe(st.booleans()), "store": maybe(st.booleans()), "instructions": maybe(text),
              "max_output_tokens": maybe(st.integers(-5, 100_000)),
              "previous_response_id": maybe(st.just("resp_missing") | text),
              "tools": maybe(st.lists(st.fixed_dictionaries(
                  {"type": maybe(st.sampled_from(["function", "custom", "web_search", "namespace", "mcp"]))},
                  optional={"name": maybe(text), "parameters": json_values, "description": maybe(text),
                            "tools": json_values}), max_size=2)),
              "tool_choice": json_values, "reasoning": maybe(st.fixed_dictionaries(
                  {"effort": st.sampled_from(["low", "medium", "high"])})), "text": json_values,
              "include": json_values, "truncation": json_values})


@pytest.fixture(scope="module")
def daari(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, trio.lowlevel.TrioToken]]:
    tmp_path: Path = tmp_path_factory.mktemp("fuzz")
    with serve_app_in_thread(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier(
            "openai", upstream + "/v1", breaker={"failure_threshold": 1_000_000}, retry={"max_retries": 0})},
            cache={"l1": {"enabled": False}}, server={"header_timeout_s": 2})
        with daari_loop_in_thread(config) as running:
            yield running


def leaves_nothing_behind(daari: tuple[RunningServer, trio.lowlevel.TrioToken],
                          run: Callable[[httpx.Client], None],
                          warm_up: Callable[[httpx.Client], None] | None = None,
                          upstream_port: int | None = None) -> None:
    """Run `run` with a fresh client; once it is closed, daari's tasks and open files come back to where they
    were. Within a bound: a connection closes when the server notices its client left, or at the latest after
    `server.header_timeout_s` idle (2 s here: a few connections whose client left unnoticed stay until then).
    With `upstream_port` (a fake upstream in this process), connections on that port are counted apart: daari's
    pools keep idle connections up to their keep-alive bound, which is what is checked for them."""
    server, token = daari
    deadline = time.monotonic() + 120  # the decision log's writer starts after daari listens (a child process)
    while not server.parts.health.healthy or any(
            status.state != "running" for status in server.parts.health.actors.values()):
        assert time.monotonic() < deadline, server.parts.health.actors
        time.sleep(0.05)
    with httpx.Client(base_url=server.url, timeout=60) as warm:  # pools and stores opened lazily, before counting
        warm.post("/v1/chat/completions", json={"model": "good", "messages": [{"role": "user", "content": "x"}]})
        warm.post("/v1/responses", json={"model": "good", "input": "x"})
        if warm_up is not None:
            warm_up(warm)
    tasks, fds = _settled(token, upstream_port)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run(client)
    deadline = time.monotonic() + 20
    while True:
        now_tasks, now_fds = loop_tasks(token), open_fds(upstream_port)
        if (now_tasks.total() <= tasks.total() and now_fds <= fds) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert now_tasks.total() <= tasks.total(), f"tasks left on daari's loop: {now_tasks - tasks}"
    assert now_fds <= fds, f"open files: {fds} before, {now_fds} after"
    if upstream_port is not None:  # idle connections an upstream pool keeps, at most its keep-alive bound each
        kept_alive = sum(tier.concurrency() for tier in server.parts.config.tiers.values())
        assert upstream_connections(upstream_port) <= kept_alive


def _settled(token: trio.lowlevel.TrioToken, upstream_port: int | None) -> tuple[Counter[str], int]:
    """Tasks and files once the warm-up's connections are gone (they close a moment after their client)."""
    last: tuple[Counter[str], int] = (Counter(), -1)
    for _ in range(100):
        now = (loop_tasks(token), open_fds(upstream_port))
        if now == last:
            return now
        last = now
        time.sleep(0.05)
    return last


def post(client: httpx.Client, path: str, body: Any, **kw: Any) -> httpx.Response:
    response = client.post(path, json=body, **kw)
    check_shaped(path, response)
    if response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
        check_stream(path, response)
    elif response.status_code == 200:
        assert isinstance(response.json(), dict)
    return response


def test_chat_completions_bodies(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    def run(client: httpx.Client) -> None:
        @given(chat_bodies, st.sampled_from(["/v1/chat/completions", "/chat/completions"]))
        def each(body: dict[str, Any], path: str) -> None:
            post(client, path, body)
        each()
    leaves_nothing_behind(daari, run)


def test_anthropic_messages_and_count_tokens_bodies(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    def run(client: httpx.Client) -> None:
        @given(messages_bodies, st.sampled_from(["/v1/messages", "/v1/messages/count_tokens"]))
        def each(body: dict[str, Any], path: str) -> None:
            post(client, path, body, headers={"anthropic-version": "2023-06-01"})
        each()
    leaves_nothing_behind(daari, run)


def test_responses_bodies(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    def run(client: httpx.Client) -> None:
        @given(responses_bodies, st.sampled_from(["/v1/responses", "/responses", "/v1/responses/compact",
                                                  "/v1/responses/input_tokens"]))
        def each(body: dict[str, Any], path: str) -> None:
            post(client, path, body)
        each()
    leaves_nothing_behind(daari, run)


def test_any_bytes_and_any_json_to_every_endpoint(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    def run(client: httpx.Client) -> None:
        @given(st.sampled_from(POST_PATHS), st.binary(max_size=300) | json_values.map(
            lambda v: httpx.Request("POST", "/", json=v).content))
        def each(path: str, raw: bytes) -> None:
            response = client.post(path, content=raw, headers={"content-type": "application/json"})
            check_shaped(path, response)
        each()
    leaves_nothing_behind(daari, run)


def test_any_control_header_value(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    # printable ASCII; no space at either end, which HTTP clients refuse to send (h11 raises before sending)
    header_value = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=20).map(
        lambda v: v.strip(" "))

    def run(client: httpx.Client) -> None:
        @given(st.sampled_from(["x-daari-tier-override", "x-daari-no-cache", "content-encoding",
                                "x-daari-repo", "anthropic-version", "anthropic-beta", "x-claude-code-session-id"]),
               header_value, st.sampled_from(["/v1/chat/completions", "/v1/messages", "/v1/responses"]))
        def each(name: str, value: str, path: str) -> None:
            body = {"model": "good", "max_tokens": 20, "messages": [{"role": "user", "content": "hello there"}]}
            if path == "/v1/responses":
                body = {"model": "good", "input": "hello there"}
            response = client.post(path, json=body, headers={name: value})
            check_shaped(path, response)
        each()
    leaves_nothing_behind(daari, run)


def test_a_message_role_that_is_not_a_string_is_a_400(daari: tuple[RunningServer, trio.lowlevel.TrioToken]) -> None:
    # found by test_chat_completions_bodies: it was a TypeError, a 500
    server, _ = daari
    for role in ({"x": 1}, ["user"], 3):
        response = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                              json={"model": "good", "messages": [{"role": role, "content": "hi"}]})
        assert response.status_code == 400, response.text
        check_shaped("/v1/chat/completions", response)
