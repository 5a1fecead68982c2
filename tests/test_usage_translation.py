"""Usage objects reach clients: unchanged from an upstream of their protocol, translated across protocols
(prompt cache reads and writes, reasoning tokens) where the other side has an equivalent."""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai

from tests.clients.agent_upstream import AgentUpstream
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

ASK = [{"role": "user", "content": "usage please"}]


def test_openai_upstream_usage(tmp_path: Path) -> None:
    with serve_app_in_thread(AgentUpstream()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
            reply = oa.chat.completions.create(model="m", messages=ASK)  # type: ignore[arg-type]
            assert reply.usage is not None and reply.usage.model_dump(exclude_none=True) == {
                "prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129,
                "prompt_tokens_details": {"cached_tokens": 80}}  # the upstream's own object
            client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
            message = client.messages.create(model="m", max_tokens=50, messages=ASK)  # type: ignore[arg-type]
            assert (message.usage.input_tokens, message.usage.cache_read_input_tokens,
                    message.usage.output_tokens) == (40, 80, 9)


def test_anthropic_upstream_usage(tmp_path: Path) -> None:
    with serve_app_in_thread(AgentUpstream()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("anthropic", upstream)})
        with daari_in_thread(config) as server:
            oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
            chunks = list(oa.chat.completions.create(model="m", messages=ASK, stream=True,  # type: ignore[arg-type]
                                                     stream_options={"include_usage": True}))
            usage = chunks[-1].usage
            assert usage is not None and usage.prompt_tokens == 200 and usage.completion_tokens == 9
            assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 80
            client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
            message = client.messages.create(model="m", max_tokens=50, messages=[  # type: ignore[arg-type]
                {"role": "user", "content": "native usage"}])
            assert message.usage.model_dump(exclude_none=True) == {
                "input_tokens": 120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 80,
                "output_tokens": 9}
