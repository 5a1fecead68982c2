"""What L1 embeds and what it matches exactly: the fold and the lookup context (ADR-0004 G1b)."""

import json
from typing import Any

from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request
from daari.semantic.context import lookup_context
from daari.semantic.fold import fold

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def req(messages: list[dict[str, Any]], **extra: Any) -> ChatRequest:
    return parse_chat_request({"model": "m", "messages": messages, **extra}, {})


def context(request: ChatRequest, partition: str = "", unseen: str = "") -> str:
    return lookup_context(request, fold(request), partition, unseen)


def agent(user: str, result: str) -> ChatRequest:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": "a"})}}
    return req([{"role": "system", "content": "You are an agent."}, {"role": "user", "content": user},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": result}], tools=TOOLS)


def test_plain_chat_embeds_the_final_user_turn_role_marked() -> None:
    request = req([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "hello"}, {"role": "user", "content": "  list   files  "}])
    assert fold(request).embed_text == "user: list files"


def test_system_prompt_and_earlier_turns_are_matched_exactly() -> None:
    base = [{"role": "user", "content": "How do I read a file?"}]
    python = req([{"role": "system", "content": "Answer in Python."}, *base])
    go = req([{"role": "system", "content": "Answer in Go."}, *base])
    assert fold(python).embed_text == fold(go).embed_text
    assert context(python) != context(go)
    earlier = req([{"role": "user", "content": "I use Rust."}, {"role": "assistant", "content": "ok"}, *base])
    assert context(earlier) != context(req(base))


def test_lookup_context_covers_model_temperature_tools_sampling_partition_and_unseen_tail() -> None:
    msgs = [{"role": "user", "content": "explain closures"}]
    base = context(req(msgs))
    assert context(req(msgs), partition="key-a") != base
    assert context(req(msgs), unseen="...the rest of a long prompt") != base
    assert context(req(msgs, temperature=0)) != base  # absent is not 0
    assert context(req(msgs, max_tokens=10)) != base
    assert context(req(msgs, tools=TOOLS)) != base
    assert context(parse_chat_request({"model": "other", "messages": msgs}, {})) != base
    assert context(req(msgs, stream=True)) == base  # a stored answer serves stream and non-stream
    assert context(req(msgs, user="u-1", metadata={"run": "r1"})) == base  # fields that cannot change the answer


def test_fields_the_parser_does_not_read_but_that_change_the_answer_are_matched_exactly() -> None:
    """L0's key holds them (reasoning effort, audio output, a field of a later API); L1 must not serve across them."""
    msgs = [{"role": "user", "content": "explain closures"}]
    base = context(req(msgs))
    high = context(req(msgs, reasoning_effort="high"))
    assert high != base and high != context(req(msgs, reasoning_effort="low"))
    assert high == context(req(msgs, reasoning_effort="high"))
    assert context(req(msgs, modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"})) != base
    assert context(req(msgs, a_field_from_2031={"nested": [1, "two"]})) != base


def test_images_fold_in_as_cache_tokens() -> None:
    def with_image(url: str) -> ChatRequest:
        return req([{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                                 {"type": "image_url", "image_url": {"url": url}}]}])

    cat, dog = fold(with_image("https://x/cat.png")), fold(with_image("https://x/dog.png"))
    assert cat.embed_text.startswith("user: what is this? [image:")
    assert cat.embed_text != dog.embed_text
    assert fold(with_image("https://x/cat.png")).embed_text == cat.embed_text


def test_agent_prefix_embeds_the_task_and_hashes_the_trailing_tool_results() -> None:
    first = agent("Why does the test fail?", "assert x == 1")
    paraphrase = agent("Why is the test failing?", "assert x == 1")
    changed = agent("Why does the test fail?", "assert x == 2")
    assert fold(first).agent_turn
    assert fold(first).embed_text == "user: Why does the test fail?"
    assert context(first) == context(paraphrase)
    assert context(first) != context(changed)  # a changed last tool result never matches the old answer


def test_agent_tool_calls_in_history_are_matched_exactly() -> None:
    a = agent("Summarize the module", "print(1)")
    b = agent("Summarize the module", "print(1)")
    b.messages[2].tool_calls[0] = type(b.messages[2].tool_calls[0])("c1", "read_file", '{"path": "b"}')
    assert context(a) != context(b)


def test_tool_call_ids_do_not_split_the_context() -> None:
    a = agent("Summarize the module", "print(1)")
    b = agent("Summarize the module", "print(1)")
    b.messages[2].tool_calls[0] = type(b.messages[2].tool_calls[0])("other-id", "read_file", '{"path": "a"}')
    b.messages[3].tool_call_id = "other-id"
    assert context(a) == context(b)


def test_any_media_part_folds_as_a_token_the_verifier_compares() -> None:
    from daari.protocol.chat import Message
    from daari.semantic.lexical import lexical_verdict

    def audio(data: str) -> str:
        return fold(ChatRequest([Message("user", [{"type": "text", "text": "transcribe this"},
                                                  {"type": "input_audio", "data": data, "format": "wav"}])],
                                "m")).embed_text

    a, b = audio("UklGRiQAAABXQVZF"), audio("UklGRiQAAABXQVZG")
    assert a.startswith("user: transcribe this [input_audio:") and a != b
    assert lexical_verdict(a, b).rule == "media"
    assert lexical_verdict(a, audio("UklGRiQAAABXQVZF")).same
