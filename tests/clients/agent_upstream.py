"""A fake model provider for real agent CLIs: Anthropic Messages, OpenAI Responses and chat completions on
127.0.0.1. Every agent turn with a shell tool and no tool result yet gets a shell tool call (or, offered only
Codex's freeform `exec`, JavaScript that runs the command); a turn whose last input is a tool result gets text
quoting it; anything else gets plain text. Answers depend only on
the request, so a repeated identical run asks identical questions. GET /stats counts requests per path.

    python -m tests.clients.agent_upstream --port 9100
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import Counter
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

MARKER = "daari-tool-ok"
COMMAND = f"echo {MARKER}"
Send = Any


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text_of(p.get("text") or p.get("content") or p.get("output") or "")
                        for p in content if isinstance(p, dict))
    return ""


# ---------------------------------------------------------------- Anthropic Messages


def anthropic_answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the answer."""
    last = (body.get("messages") or [{}])[-1]
    blocks = last.get("content") if isinstance(last.get("content"), list) else []
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        return [{"type": "text", "text": f"The command printed: {_text_of(results[-1].get('content')).strip()}"}]
    tools = body.get("tools") or []
    if any(t.get("name") == "Bash" for t in tools):
        return [{"type": "tool_use", "id": "toolu_fake_1", "name": "Bash",
                 "input": {"command": COMMAND, "description": "Print the marker"}}]
    if (call := _shell_call(tools)) is not None:  # another client's shell tool, translated by daari
        return [{"type": "tool_use", "id": "toolu_fake_1", "name": call[0], "input": json.loads(call[1])}]
    if _exec_tool(tools):
        return [{"type": "tool_use", "id": "toolu_fake_1", "name": "exec", "input": {"input": EXEC_SCRIPT}}]
    system = body.get("system")
    text = text_answer([{"role": "system", "content": system}, *(body.get("messages") or [])] if system
                       else body.get("messages") or [])
    return [{"type": "text", "text": text}]


async def anthropic_messages(body: dict[str, Any], send: Send) -> None:
    blocks = anthropic_answer(body)
    stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
    usage: dict[str, int] = {"input_tokens": 120, "cache_creation_input_tokens": 0,
                             "cache_read_input_tokens": 80, "output_tokens": 9}
    message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
               "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        await _json(send, 200, message)
        return
    await _start_sse(send)
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    chunks = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    for index, block in enumerate(blocks):
        opened: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        chunks += [_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": opened}),
                   _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                   _sse("content_block_stop", {"type": "content_block_stop", "index": index})]
    chunks += [_sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 9}}),
               _sse("message_stop", {"type": "message_stop"})]
    await _finish_sse(send, chunks)


# ---------------------------------------------------------------- OpenAI Responses


def _shell_call(tools: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(tool name, arguments JSON) for the client's shell tool, shaped after its own parameter schema."""
    for tool in tools:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name not in ("shell", "exec_command", "shell_command", "container.exec", "bash", "Bash"):
            continue
        props = (tool.get("parameters") or (tool.get("function") or {}).get("parameters")
                 or tool.get("input_schema") or {}).get("properties", {})
        if "cmd" in props:
            return name, json.dumps({"cmd": COMMAND})
        if (props.get("command") or {}).get("type") == "array":
            return name, json.dumps({"command": ["bash", "-lc", COMMAND]})
        return name, json.dumps({"command": COMMAND})
    return None


# Codex's default model has one freeform tool, `exec`: JavaScript that calls the other tools. Only the
# command's output is returned (not its random chunk id), so a repeated run sends the same tool result.
EXEC_SCRIPT = f'const r = await tools.exec_command({{cmd: "{COMMAND}"}});\ntext(r.output);\n'


def responses_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool offered: top-level `tools` and `additional_tools` input items (Codex's default model sends
    its tools only there), namespaces flattened."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += item.get("tools") or []
    flat: list[dict[str, Any]] = []
    for tool in tools:
        flat += tool.get("tools") or [] if tool.get("type") == "namespace" else [tool]
    return flat


def _exec_tool(tools: list[dict[str, Any]]) -> bool:
    return any((t.get("name") or (t.get("function") or {}).get("name")) == "exec" for t in tools)


def responses_output(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    items = items if isinstance(items, list) else [{"type": "message", "role": "user", "content": items or ""}]
    last = items[-1] if items else {}
    tools = responses_tools(body)
    if last.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        text = f"The command printed: {_text_of(last.get('output')).strip()}"
    elif "goal" in json.dumps(items[-1:]) and any(t.get("name") == "get_goal" for t in tools):
        # Codex's get_goal answers the same every run (its shell output carries a random chunk id).
        return [{"type": "function_call", "id": "fc_fake_1", "call_id": "call_fake_1", "name": "get_goal",
                 "arguments": "{}", "status": "completed"}]
    elif (call := _shell_call(tools)) is not None:
        return [{"type": "function_call", "id": "fc_fake_1", "call_id": "call_fake_1", "name": call[0],
                 "arguments": call[1], "status": "completed"}]
    elif _exec_tool(tools):
        return [{"type": "custom_tool_call", "id": "ctc_fake_1", "call_id": "call_fake_1", "name": "exec",
                 "input": EXEC_SCRIPT, "status": "completed"}]
    else:
        messages = [{"role": "system", "content": body.get("instructions") or ""},
                    *(i for i in items if isinstance(i, dict) and "role" in i)]
        text = text_answer(messages)
    return [{"type": "message", "id": "msg_fake_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}]


async def responses(body: dict[str, Any], send: Send) -> None:
    output = responses_output(body)
    usage: dict[str, Any] = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 80}, "output_tokens": 9,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 129}
    done = {"id": "resp_fake", "object": "response", "created_at": 1700000000, "status": "completed",
            "model": body.get("model", "fake"), "output": output, "usage": usage, "error": None,
            "incomplete_details": None}
    if not body.get("stream"):
        await _json(send, 200, done)
        return
    await _start_sse(send)
    seq = iter(range(1000))
    pending = {**done, "status": "in_progress", "output": [], "usage": None}

    def ev(name: str, **data: Any) -> bytes:
        return _sse(name, {"type": name, "sequence_number": next(seq), **data})

    chunks = [ev("response.created", response=pending), ev("response.in_progress", response=pending)]
    for index, item in enumerate(output):
        if item["type"] == "function_call":
            chunks += [ev("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                                   "status": "in_progress"}),
                       ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                          delta=item["arguments"]),
                       ev("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                          arguments=item["arguments"])]
        elif item["type"] == "custom_tool_call":
            chunks += [ev("response.output_item.added", output_index=index, item={**item, "input": "",
                                                                                   "status": "in_progress"}),
                       ev("response.custom_tool_call_input.delta", item_id=item["id"], output_index=index,
                          delta=item["input"]),
                       ev("response.custom_tool_call_input.done", item_id=item["id"], output_index=index,
                          input=item["input"])]
        else:
            part = item["content"][0]
            chunks += [ev("response.output_item.added", output_index=index,
                          item={**item, "content": [], "status": "in_progress"}),
                       ev("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                          part={**part, "text": ""}),
                       ev("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                          delta=part["text"]),
                       ev("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                          text=part["text"]),
                       ev("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                          part=part)]
        chunks.append(ev("response.output_item.done", output_index=index, item=item))
    chunks.append(ev("response.completed", response=done))
    await _finish_sse(send, chunks)


# ---------------------------------------------------------------- chat completions (for translated tiers)


EDIT_ASK = re.compile(r"Change (\S+) to say (\S+)")


def aider_edit(messages: list[dict[str, Any]]) -> str | None:
    """aider's edit protocol (no tools): asked "Change FILE to say TEXT" with FILE's content in the chat, answer
    the SEARCH/REPLACE block aider applies."""
    if not any("*SEARCH/REPLACE block*" in _text_of(m.get("content")) for m in messages if m.get("role") == "system"):
        return None
    asks = [EDIT_ASK.search(_text_of(m.get("content"))) for m in messages if m.get("role") == "user"]
    ask = asks[-1] if asks else None
    if ask is None:
        return None
    name, new = ask.groups()
    shown = [re.search(rf"^{re.escape(name)}\n```\n(.*?)\n```", _text_of(m.get("content")), re.M | re.S)
             for m in messages if m.get("role") == "user"]
    found = [m for m in shown if m]
    if not found:
        return None
    return f"{name}\n```\n<<<<<<< SEARCH\n{found[-1].group(1)}\n=======\n{new}\n>>>>>>> REPLACE\n```\n"


COMMIT_ASK = "one-line commit message"


def aider_commit(messages: list[dict[str, Any]]) -> str | None:
    """aider's commit-message side call: a message in the format its prompt states (`<type>: <description>`,
    one line), as a model would write it; daari's judge holds back one that breaks it, and never caches it."""
    if any(COMMIT_ASK in _text_of(m.get("content")) for m in messages if m.get("role") == "system"):
        return "fix: change the greeting text"
    return None


def text_answer(messages: list[dict[str, Any]]) -> str:
    return aider_edit(messages) or aider_commit(messages) or "Hello from the fake upstream."


async def chat_completions(body: dict[str, Any], send: Send, strict_system: bool = False) -> None:
    if strict_system and "system" in [m.get("role") for m in body.get("messages") or []][1:]:
        # As llama.cpp and Qwen chat templates answer a system message that is not first.
        await _json(send, 400, {"error": {"message": "System message must be at the beginning.",
                                          "type": "invalid_request_error"}})
        return
    last = (body.get("messages") or [{}])[-1]
    tools = body.get("tools") or []
    call = _shell_call(tools) or (
        ("Bash", json.dumps({"command": COMMAND, "description": "Print the marker"}))
        if any((t.get("function") or {}).get("name") == "Bash" for t in tools) else None) or (
        # Codex's freeform exec as daari translates it: a function with one string argument, `input`.
        ("exec", json.dumps({"input": EXEC_SCRIPT})) if _exec_tool(tools) else None)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if last.get("role") == "tool":
        message["content"], finish = f"The command printed: {_text_of(last.get('content')).strip()}", "stop"
    elif (edit := aider_edit(body.get("messages") or []) or aider_commit(body.get("messages") or [])) is not None:
        message["content"], finish = edit, "stop"
    elif call is not None:
        message["tool_calls"] = [{"id": "call_fake_1", "type": "function",
                                  "function": {"name": call[0], "arguments": call[1]}}]
        finish = "tool_calls"
    else:
        message["content"], finish = "Hello from the fake upstream.", "stop"
    usage = {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129,
             "prompt_tokens_details": {"cached_tokens": 80}}
    base = {"id": "chatcmpl-fake", "created": 1700000000, "model": body.get("model", "fake")}
    if not body.get("stream"):
        await _json(send, 200, {**base, "object": "chat.completion", "usage": usage,
                                "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        return
    await _start_sse(send)
    delta = {k: v for k, v in message.items() if v is not None}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": 0, **delta["tool_calls"][0]}]
    chunk = {**base, "object": "chat.completion.chunk"}
    chunks = [f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': delta}]})}\n\n".encode(),
              f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]})}\n\n"
              .encode(),
              f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n".encode(), b"data: [DONE]\n\n"]
    await _finish_sse(send, chunks)


# ---------------------------------------------------------------- the app


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": payload})


async def _start_sse(send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})


async def _finish_sse(send: Send, chunks: list[bytes]) -> None:
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def _seen(path: str, body: Any) -> dict[str, Any]:
    """A request as GET /seen lists it: its path, a digest of its body (keys sorted) and its last message's start."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    turns = (body.get("messages") or body.get("input") or []) if isinstance(body, dict) else []
    last = turns[-1] if isinstance(turns, list) and turns else turns
    return {"path": path, "body": digest, "last": json.dumps(last)[:160]}


class AgentUpstream:
    def __init__(self, record: str | None = None, strict_system: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        # Every request's path, body digest and a short view of its last message (GET /seen): when a repeated run
        # is not all L0 hits, this tells a body that differs (the client's doing) from one daari did not keep.
        self.seen: list[dict[str, Any]] = []
        self.strict_system = strict_system  # chat completions refuse a system message that is not first
        self.record = record  # a JSON-lines file of every request (path, query, headers, body)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"].removesuffix("/")
        if scope["method"] == "GET" and path == "/stats":
            await _json(send, 200, dict(self.counts))
            return
        if scope["method"] == "GET" and path == "/seen":
            await _json(send, 200, {"requests": self.seen})
            return
        self.counts[path] += 1
        body = json.loads(raw or b"{}")
        self.seen.append(_seen(path, body))
        if self.record:
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            line = {"path": path, "query": scope["query_string"].decode(), "headers": headers, "body": body}
            async with await trio.open_file(self.record, "a") as out:
                await out.write(json.dumps(line) + "\n")
        if path == "/v1/messages":
            await anthropic_messages(body, send)
        elif path == "/v1/messages/count_tokens":
            await _json(send, 200, {"input_tokens": 100})
        elif path == "/v1/responses":
            await responses(body, send)
        elif path == "/v1/chat/completions":
            await chat_completions(body, send, self.strict_system)
        else:
            await _json(send, 404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", help="append every request to this JSON-lines file")
    parser.add_argument("--strict-system", action="store_true",
                        help="chat completions: a system message that is not first is a 400")
    args = parser.parse_args()
    config = HypercornConfig()
    config.bind = [f"127.0.0.1:{args.port}"]
    config.accesslog = None
    app: Any = AgentUpstream(args.record, args.strict_system)
    trio.run(serve, app, config)


if __name__ == "__main__":
    main()
