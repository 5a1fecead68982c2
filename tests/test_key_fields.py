"""Which request fields are in the cache key: the non-answer list, uninterpreted fields, cache markers."""

from __future__ import annotations

from daari.cache.l0_key import l0_key
from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.key_fields import is_billing_block, is_non_answer_field, uninterpreted, without_cache_markers
from daari.protocol.openai_wire import parse_chat_request


def openai_key(**fields: object) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return l0_key(parse_chat_request(body, {})).digest


def anthropic_key(**fields: object) -> str:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **fields}
    return l0_key(parse_messages_request(body, {})).digest


def test_uninterpreted_keeps_answer_fields_and_drops_the_listed_ones() -> None:
    body = {"model": "m", "reasoning_effort": "high", "user": "u", "metadata": {"a": 1}, "seed": None}
    assert uninterpreted("openai", body, {"model"}) == {"reasoning_effort": "high"}
    assert is_non_answer_field("anthropic", "metadata") and not is_non_answer_field("anthropic", "output_config")
    assert without_cache_markers({"type": "document", "cache_control": {"type": "ephemeral"}}) == {
        "type": "document"}


def test_fields_that_can_change_the_answer_change_the_key() -> None:
    base = openai_key()
    for field, value in [("reasoning_effort", "high"), ("verbosity", "low"), ("modalities", ["text", "audio"]),
                         ("prediction", {"type": "content", "content": "x"}), ("future_field", 1),
                         ("web_search_options", {}), ("audio", {"voice": "alloy", "format": "wav"})]:
        assert openai_key(**{field: value}) != base, field
    strict = [{"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}}]
    loose = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert openai_key(tools=strict) != openai_key(tools=loose)
    assert anthropic_key(context_management={"edits": []}) != anthropic_key()


def test_fields_that_cannot_change_the_answer_do_not() -> None:
    base = openai_key()
    for field, value in [("user", "u1"), ("metadata", {"run": "7"}), ("store", True), ("service_tier", "flex"),
                         ("prompt_cache_key", "k"), ("safety_identifier", "s"), ("stream", True)]:
        assert openai_key(**{field: value}) == base, field
    assert anthropic_key(metadata={"user_id": "session_1"}) == anthropic_key(metadata={"user_id": "session_2"})


def test_claude_code_billing_block_is_kept_out_of_the_key() -> None:
    def system(cch: str) -> list[dict[str, object]]:
        return [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=sdk-cli; "
                                         f"cch={cch};"},
                {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]

    assert is_billing_block(system("a")[0]["text"])  # type: ignore[arg-type]
    assert anthropic_key(system=system("a")) == anthropic_key(system=system("b"))
    assert anthropic_key(system=system("a")) != anthropic_key()
    request = parse_messages_request({"max_tokens": 5, "system": system("a"),
                                      "messages": [{"role": "user", "content": "hi"}]}, {})
    assert request.messages[0].content == "You are Claude Code."
    assert request.raw["system"] == system("a")  # forwarded unchanged to an Anthropic upstream


def test_unknown_content_parts_are_keyed_by_content() -> None:
    def audio(data: str) -> str:
        part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
        return openai_key(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}])

    assert audio("AAAA") == audio("AAAA")
    assert audio("AAAA") != audio("BBBB")
