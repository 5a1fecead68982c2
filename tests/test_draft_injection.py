"""Draft injection (`cache.l1.draft_injection`, off by default): an L1 candidate the verifier rejected is shown
to the model as a draft, in the documented system message, without changing the request's key or its L1
entry; the pure part, then through a real daari with the real embedding model and a loopback upstream."""

from __future__ import annotations

from pathlib import Path

import httpx

from daari.config import config_from_dict
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.chat import ChatRequest, Message
from daari.trust.draft import DRAFT_INSTRUCTION, with_draft
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def test_the_draft_goes_after_the_system_messages_of_a_copy() -> None:
    request = ChatRequest([Message("system", "be brief"), Message("user", "list docker images")], "m",
                          raw={"model": "m"})
    drafted = with_draft(request, "Run `docker ps`.")
    assert [m.role for m in drafted.messages] == ["system", "system", "user"]
    assert drafted.messages[1].text() == f"{DRAFT_INSTRUCTION}\n<draft>\nRun `docker ps`.\n</draft>"
    assert drafted.raw == {} and len(request.messages) == 2  # the client's body and the request are untouched
    assert config_from_dict({}).cache.l1.draft_injection is False


async def test_a_rejected_candidate_reaches_the_model_as_a_draft(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             cache={"l1": {"draft_injection": True}}, trust={"shadow": {"rate": 0.0}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            l1 = server.parts.shortcuts["L1"]
            assert isinstance(l1, SemanticTier)
            await l1.status.started.wait()

            async def ask(content: str) -> dict[str, object]:
                response = await client.post("/v1/chat/completions", json={
                    "model": "good", "messages": [{"role": "user", "content": content}]})
                assert response.status_code == 200
                body: dict[str, object] = response.json()
                return body

            first = await ask("How do I list Docker containers?")
            second = await ask("How do I list Docker images?")  # a near-miss: the verifier rejects it
    meta = second["daari_meta"]
    assert isinstance(meta, dict) and meta["tier"] == "L3" and meta["verdict"] == "rejected"
    assert isinstance(meta["draft_from"], int)
    sent = fake.requests[-1].body["messages"]
    answer = first["choices"][0]["message"]["content"]  # type: ignore[index]
    assert sent[0]["role"] == "system" and f"<draft>\n{answer}\n</draft>" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "How do I list Docker images?"}
    assert fake.requests[0].body["messages"] == [{"role": "user", "content": "How do I list Docker containers?"}]
