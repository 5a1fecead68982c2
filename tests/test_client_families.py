"""Client families from real clients' headers: a table of the values their sources build, and the installed
SDKs' own headers captured over loopback (daari/pipeline/client_family.py)."""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

from daari.eval.judge_set import parse_request
from daari.pipeline.client_family import client_family, client_of, refine_family
from evals.judge import judge_prompts as jp
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread

set_tracing_disabled(True)  # the Agents SDK would export traces to OpenAI's servers otherwise

# (User-Agent, other headers, family): each value as the client's source builds it.
REAL_HEADERS = [
    # Claude Code: the CLI's own User-Agent over the Anthropic SDK's (interactive, and `claude -p` / the SDK).
    ("claude-cli/1.0.83 (external, cli)", {}, "claude-code"),
    ("claude-cli/2.1.126 (external, sdk-cli)", {"x-app": "cli"}, "claude-code"),
    # Codex (codex-rs default_client.rs): originator/version (os version; arch) terminal.
    ("codex_cli_rs/0.46.0 (Ubuntu 24.4.0; x86_64) xterm-256color", {"originator": "codex_cli_rs"}, "codex"),
    ("codex_exec/0.58.0 (Mac OS 15.1.0; arm64) unknown", {"originator": "codex_exec"}, "codex"),
    ("codex_vscode/0.58.0 (Windows 11.0.26100; x86_64) vscode/1.105.1", {}, "codex"),
    # opencode (session/llm.ts sets opencode/<version>; the AI SDK appends its parts).
    ("opencode/1.15.4 (darwin 25.4.0; arm64) ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.13", {}, "opencode"),
    ("opencode/0.15.8", {}, "opencode"),
    # The OpenAI Agents SDK (agents/models/openai_responses.py, chatcmpl_helpers.py).
    ("Agents/Python 0.24.0", {"x-stainless-lang": "python"}, "openai-agents"),
    # aider 0.86 through litellm 1.82: the openai SDK's with_raw_response, or litellm's own client.
    ("OpenAI/Python 2.28.0", {"x-stainless-raw-response": "true"}, "litellm"),
    ("litellm/1.82.3", {}, "litellm"),
    # Plain SDKs and tools.
    ("OpenAI/Python 2.28.0", {}, "openai-python"),
    ("AsyncOpenAI/Python 1.109.1", {}, "openai-python"),
    ("Anthropic/Python 0.69.0", {}, "anthropic-python"),
    ("ai-sdk/openai-compatible/1.0.19 ai-sdk/provider-utils/3.0.10 runtime/node.js/22", {}, "ai-sdk"),
    ("curl/8.5.0", {}, "curl"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36", {},
     "browser"),
    ("SomethingElse/1.0", {}, "other"),
    (None, {}, "unknown"),
]


@pytest.mark.parametrize(("user_agent", "headers", "family"), REAL_HEADERS)
def test_real_header_values(user_agent: str | None, headers: dict[str, str], family: str) -> None:
    sent = {**headers, **({"user-agent": user_agent} if user_agent is not None else {})}
    assert client_of(sent) == family


def test_aider_is_named_by_its_prompts_when_litellm_sent_the_request() -> None:
    commit = parse_request(jp.aider_commit("readme-typo"))
    summary = parse_request(jp.aider_summary([("USER", "hi")]))
    assert refine_family("litellm", commit) == "aider" and refine_family("openai-python", summary) == "aider"
    assert refine_family("claude-code", commit) == "claude-code"  # an app's own User-Agent wins
    assert refine_family("litellm", parse_request(jp.opencode_title("hi"))) == "litellm"


def test_the_installed_sdks_headers() -> None:
    """What the openai SDK (plain, and as litellm calls it), the Agents SDK and the anthropic SDK really send."""
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        client.chat.completions.create(model="good", messages=[{"role": "user", "content": "hi"}])
        # litellm's call (litellm/llms/openai/openai.py, make_sync_openai_chat_completion_request)
        client.chat.completions.with_raw_response.create(model="good", messages=[{"role": "user", "content": "hi"}])
        agent = Agent(name="a", instructions="Answer.", model=OpenAIChatCompletionsModel(
            model="good", openai_client=openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)))
        asyncio.run(Runner.run(agent, "hi"))
    plain, raw, agents_sdk = (r.headers for r in fake.requests)
    assert plain["user-agent"].startswith("OpenAI/Python ") and client_of(plain) == "openai-python"
    assert client_of(raw) == "litellm"
    assert agents_sdk["user-agent"].startswith("Agents/Python ") and client_of(agents_sdk) == "openai-agents"
    fake_anthropic = FakeAnthropic()
    with serve_app_in_thread(fake_anthropic) as url:
        anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0).messages.create(
            model="claude-x", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert client_of(fake_anthropic.requests[-1].headers) == "anthropic-python"


def test_the_family_lookup_is_memoised_per_user_agent() -> None:
    client_family.cache_clear()
    for _ in range(3):
        client_family("claude-cli/1.0.83 (external, cli)")
    assert client_family.cache_info().hits == 2
