"""Stored responses obey the cache's credential partition: with forward_client_key, a response made with key A
is, to key B or a keyless caller, exactly an unknown id (GET, DELETE, input_items, previous_response_id)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import httpx

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

KEY_A = "sk-KEYAAAAAAAAAAAAAAAAAAAA"
KEY_B = "sk-KEYBBBBBBBBBBBBBBBBBBBB"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def assert_unknown(reply: httpx.Response, response_id: str, code: str, param: str) -> None:
    """The 404 an id nobody ever stored gets: nothing in it tells that the response exists elsewhere."""
    assert reply.status_code == 404, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == code and error["param"] == param
    assert response_id in error["message"] and "partition" not in reply.text


async def test_a_stored_response_is_found_only_with_the_key_that_made_it(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1",
                                                                  forward_client_key=True)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            made = await client.post("/v1/responses", json={"model": "good", "input": "my name is Ada"},
                                     headers=bearer(KEY_A))
            assert made.status_code == 200, made.text
            response_id = made.json()["id"]
            unknown = "resp_" + "0" * 24
            for_nobody = await client.get(f"/v1/responses/{unknown}", headers=bearer(KEY_B))

            for headers in (bearer(KEY_B), {}):
                got = await client.get(f"/v1/responses/{response_id}", headers=headers)
                assert_unknown(got, response_id, "not_found", "response_id")
                assert got.text.replace(response_id, unknown) == for_nobody.text  # word for word the same
                items = await client.get(f"/v1/responses/{response_id}/input_items", headers=headers)
                assert_unknown(items, response_id, "not_found", "response_id")
                deleted = await client.delete(f"/v1/responses/{response_id}", headers=headers)
                assert_unknown(deleted, response_id, "not_found", "response_id")
                asked = len(fake.requests)
                chained = await client.post("/v1/responses", headers=headers, json={
                    "model": "good", "input": "what is my name?", "previous_response_id": response_id})
                assert_unknown(chained, response_id, "previous_response_not_found", "previous_response_id")
                assert len(fake.requests) == asked  # nothing of A's history went upstream on B's key

            # Key A still has it all (B's deletes did not delete it).
            got = await client.get(f"/v1/responses/{response_id}", headers=bearer(KEY_A))
            assert got.status_code == 200 and got.json()["id"] == response_id
            items = await client.get(f"/v1/responses/{response_id}/input_items", headers=bearer(KEY_A))
            assert items.status_code == 200 and items.json()["data"][0]["content"][0]["text"] == "my name is Ada"
            chained = await client.post("/v1/responses", headers=bearer(KEY_A), json={
                "model": "good", "input": "what is my name?", "previous_response_id": response_id})
            assert chained.status_code == 200, chained.text
            sent = fake.requests[-1]
            assert sent.headers["authorization"] == f"Bearer {KEY_A}"
            assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "user"]
            # The chained response is A's too.
            second = chained.json()["id"]
            other = await client.get(f"/v1/responses/{second}", headers=bearer(KEY_B))
            assert_unknown(other, second, "not_found", "response_id")
            deleted = await client.delete(f"/v1/responses/{response_id}", headers=bearer(KEY_A))
            assert deleted.status_code == 200 and deleted.json()["deleted"] is True
            gone = await client.get(f"/v1/responses/{response_id}", headers=bearer(KEY_A))
            assert_unknown(gone, response_id, "not_found", "response_id")
    rows = repr(sqlite3.connect(tmp_path / "data" / "responses.sqlite").execute(
        "select id, owner from responses").fetchall())
    for secret in (KEY_A, KEY_B, "KEYAAAA", hashlib.sha256(KEY_A.encode()).hexdigest()):
        assert secret not in rows  # the owner is the cache's keyed hash, never the key
