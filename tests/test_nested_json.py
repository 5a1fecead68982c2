"""Deeply nested JSON bodies: a 400 in the client's own shape, never a 500 or a traceback."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from daari.errors import InvalidRequest
from daari.jsonio import loads
from daari.pipeline.body_work import MAX_BODY_DEPTH, decode_json
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

DEEP = 100_000


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_a_body_orjson_refuses_for_depth_is_not_parsed_again() -> None:
    with pytest.raises(ValueError, match="nested"):
        loads(nested(DEEP))
    with pytest.raises(InvalidRequest, match="nested"):
        decode_json(nested(DEEP))


def test_what_only_the_standard_library_takes_still_parses() -> None:
    assert loads(b'{"x": NaN}')["x"] != 0  # NaN: orjson refuses it, the stdlib takes it


@pytest.mark.parametrize(("path", "shape"), [
    ("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"), ("/v1/messages/count_tokens", "anthropic"),
    ("/v1/responses", "openai"),
])
async def test_a_body_nested_100k_deep_is_a_400_in_the_clients_shape(tmp_path: Path, path: str,
                                                                      shape: str) -> None:
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            deep = await client.post(path, content=nested(DEEP), headers={"content-type": "application/json"})
            inside = b'{"model": "good", "messages": [{"role": "user", "content": "hi"}], "metadata": ' + \
                nested(DEEP) + b"}"
            deep_field = await client.post(path, content=inside, headers={"content-type": "application/json"})
    for response in (deep, deep_field):
        assert response.status_code == 400, response.text
        body = response.json()
        if shape == "anthropic":
            assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        else:
            assert body["error"]["type"] == "invalid_request_error"
        assert "internal error" not in response.text


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 300, 1000, 1020])
def test_a_body_deeper_than_daari_encodes_again_is_refused(depth: int) -> None:
    """orjson parses up to 1024 levels but encodes only 254, and Python's own recursion limit is about 1000:
    a body deeper than MAX_BODY_DEPTH is refused before anything walks or encodes it."""
    inside = b'{"model": "good", "metadata": ' + nested(depth - 1) + b"}"
    with pytest.raises(InvalidRequest, match="nested more than"):
        decode_json(inside)


async def test_bodies_up_to_the_depth_limit_are_answered_in_both_protocols(tmp_path: Path) -> None:
    """A deep tool schema and metadata at the limit go through parsing, the cache key, translation to the
    upstream's protocol and back: answered, never a 500 or a 502."""
    fake = FakeOpenAI()
    deep = nested(MAX_BODY_DEPTH - 8)  # room for the levels around it in each request
    schema = b'{"type": "object", "properties": {"x": {"default": ' + deep + b"}}}"
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            openai = await client.post("/v1/chat/completions", headers={"content-type": "application/json"},
                                       content=b'{"model": "good", "messages": [{"role": "user", "content": "hi"}], '
                                               b'"metadata": {"x": ' + deep + b'}, "tools": [{"type": "function", '
                                               b'"function": {"name": "f", "parameters": ' + schema + b"}}]}")
            anthropic = await client.post("/v1/messages", headers={"content-type": "application/json"},
                                          content=b'{"model": "good", "max_tokens": 10, "messages": [{"role": "user",'
                                                  b' "content": "hi"}], "tools": [{"name": "f", "input_schema": ' +
                                                  schema + b"}]}")
    assert openai.status_code == 200, openai.text
    assert anthropic.status_code == 200, anthropic.text
    assert len(fake.requests) == 2
