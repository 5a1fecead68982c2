"""Compressed request bodies through a running daari: gzip, deflate, br and zstd decoded (the cache keyed on the
decoded bytes), bombs refused with 413 in the client's shape without holding what they expand to, unknown
codings 415, corrupt ones 400."""

from __future__ import annotations

import json
import random
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brotli  # type: ignore[import-untyped]
import httpx
import pytest
import trio
from backports import zstd

from daari.errors import InvalidRequest, PayloadTooLarge
from daari.server.content_coding import SLICE, body_decoder
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def gzip(data: bytes) -> bytes:
    encoder = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return encoder.compress(data) + encoder.flush()


def raw_deflate(data: bytes) -> bytes:
    encoder = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return encoder.compress(data) + encoder.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip, "deflate": zlib.compress, "br": lambda data: brotli.compress(data, quality=5), "zstd": zstd.compress,
}


def streamed(encoding: str, zeros: int) -> bytes:
    """`zeros` zero bytes, encoded a MiB at a time (a bomb, built without holding it whole)."""
    block = bytes(1 << 20)
    if encoding == "gzip":
        encoder = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return b"".join(encoder.compress(block) for _ in range(zeros >> 20)) + encoder.flush()
    if encoding == "deflate":
        encoder = zlib.compressobj(6)
        return b"".join(encoder.compress(block) for _ in range(zeros >> 20)) + encoder.flush()
    if encoding == "br":
        compressor = brotli.Compressor(quality=5)
        return b"".join(compressor.process(block) for _ in range(zeros >> 20)) + compressor.finish()
    compressor = zstd.ZstdCompressor(level=3)
    return b"".join(compressor.compress(block) for _ in range(zeros >> 20)) + compressor.flush()


def chat(text: str) -> bytes:
    return json.dumps({"model": "good", "messages": [{"role": "user", "content": text}]}).encode()


@pytest.fixture
async def daari(tmp_path: Path):  # type: ignore[no-untyped-def]
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            yield client, fake


async def post(client: httpx.AsyncClient, path: str, body: bytes, encoding: str | None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if encoding is not None:
        headers["content-encoding"] = encoding
    return await client.post(path, content=body, headers=headers)


@pytest.mark.parametrize("encoding", list(ENCODERS))
async def test_each_coding_is_decoded_and_the_cache_keys_the_decoded_bytes(daari: Any, encoding: str) -> None:
    client, fake = daari
    body = chat(f"explain {encoding} please")
    first = await post(client, "/v1/chat/completions", ENCODERS[encoding](body), encoding)
    again = await post(client, "/v1/chat/completions", ENCODERS[encoding](body), encoding)  # the hit lane
    plain = await post(client, "/v1/chat/completions", body, None)
    assert first.status_code == 200, first.text
    assert [r.headers["x-daari-cache"] for r in (first, again, plain)] == ["miss", "hit", "hit"]
    assert len(fake.requests) == 1 and fake.requests[0].body["messages"][0]["content"] == f"explain {encoding} please"


async def test_claude_codes_gzip_bodies_and_raw_deflate_are_decoded(daari: Any) -> None:
    client, fake = daari
    anthropic = json.dumps({"model": "good", "max_tokens": 50, "stream": True,
                            "messages": [{"role": "user", "content": "list the files"}]}).encode()
    messages = await post(client, "/v1/messages", gzip(anthropic), "gzip")
    count = await post(client, "/v1/messages/count_tokens", gzip(anthropic), "gzip")
    deflated = await post(client, "/v1/chat/completions", raw_deflate(chat("raw deflate")), "deflate")
    assert messages.status_code == 200 and "message_stop" in messages.text
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
    assert deflated.status_code == 200


@pytest.mark.parametrize("encoding", list(ENCODERS))
async def test_a_decompression_bomb_is_413_in_the_clients_shape_with_bounded_memory(daari: Any,
                                                                                    encoding: str) -> None:
    client, fake = daari
    bomb = streamed(encoding, 128 << 20)  # 128 MiB of zeros (16 times the limit) in at most ~130 KB on the wire
    tracemalloc.start()
    try:
        with trio.fail_after(60):
            openai = await post(client, "/v1/chat/completions", bomb, encoding)
            anthropic = await post(client, "/v1/messages", bomb, encoding)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert openai.status_code == 413 and openai.json()["error"]["code"] == "request_too_large"
    assert anthropic.status_code == 413 and anthropic.json()["error"]["type"] == "request_too_large"
    assert peak < 64 << 20  # daari held about the 8 MiB limit (plus the bomb itself), never what it expands to
    assert fake.requests == []


async def test_a_body_that_expands_too_many_times_is_refused_below_the_size_limit(daari: Any) -> None:
    client, _ = daari
    expands = zstd.compress(b'{"model": "good", "messages": [], "pad": "' + b" " * (3 << 20) + b'"}')  # 3 MiB
    response = await post(client, "/v1/chat/completions", expands, "zstd")
    assert response.status_code == 413 and "max_expansion_ratio" in response.json()["error"]["message"]


@pytest.mark.parametrize(("encoding", "body", "status", "needle"), [
    ("compress", b"x", 415, "not supported"),
    ("lzma", b"x", 415, "not supported"),
    ("gzip, br", b"x", 415, "several content codings"),
    ("gzip", b"not gzip at all", 400, "not valid gzip"),
    ("gzip", gzip(chat("cut short"))[:-12], 400, "ends before"),
    ("zstd", zstd.compress(chat("cut"))[:-5], 400, "ends before"),
    ("br", b"\xff\xff\xff\xff", 400, "not valid br"),
])
async def test_unknown_or_broken_codings_get_a_clear_error(daari: Any, encoding: str, body: bytes, status: int,
                                                          needle: str) -> None:
    client, fake = daari
    openai = await post(client, "/v1/chat/completions", body, encoding)
    anthropic = await post(client, "/v1/messages", body, encoding)
    assert openai.status_code == status and needle in openai.json()["error"]["message"]
    assert anthropic.status_code == status and anthropic.json()["type"] == "error"
    assert fake.requests == []


async def test_identity_and_concatenated_members_are_taken(daari: Any) -> None:
    client, _ = daari
    body = chat("two members")
    assert (await post(client, "/v1/chat/completions", body, "identity")).status_code == 200
    members = gzip(body[:20]) + gzip(body[20:])
    assert (await post(client, "/v1/chat/completions", members, "gzip")).status_code == 200
    frames = zstd.compress(body[:20]) + zstd.compress(body[20:])
    assert (await post(client, "/v1/chat/completions", frames, "zstd")).status_code == 200


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_the_decoder_hands_out_bounded_slices_however_the_body_is_split(encoding: str) -> None:
    data = random.Random(7).randbytes(1 << 20) + b"end"  # 1 MiB + 3, incompressible: ratio ~1
    encoded = ENCODERS[encoding](data)
    # Whole, then split everywhere a header can be (a byte at a time at first) and at odd offsets after.
    split = [encoded[i:i + 1] for i in range(64)] + [encoded[i:i + 997] for i in range(64, len(encoded), 997)]
    for feed in ([encoded], split):
        decoder = body_decoder(encoding, 8 << 20, 1000)
        assert decoder is not None
        pieces = [piece for chunk in feed for piece in decoder.feed(chunk)]
        decoder.finish()
        assert b"".join(pieces) == data and max(len(p) for p in pieces) <= SLICE
    with pytest.raises(PayloadTooLarge):
        small = body_decoder(encoding, 1 << 19, 1000)
        assert small is not None
        list(small.feed(encoded))
    with pytest.raises(InvalidRequest):
        cut = body_decoder(encoding, 8 << 20, 1000)
        assert cut is not None
        list(cut.feed(encoded[: len(encoded) // 2]))
        cut.finish()
