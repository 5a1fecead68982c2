"""`python -m bench.privacy`: what redaction adds to a request to a remote tier, as ratios from one run.

An agent history like Claude Code's (a system prompt, 12 tool definitions with long descriptions, then tool calls
whose results are this repository's own source files, ~200 KB, one of them holding a secret of every kind) is
redacted the way the execute step does it:
cold (a new Redactor: the first turn after a start), then warm (the next turn: the same history plus one tool
result, the memo holding the rest). The baseline is decoding the same body with orjson, which every request pays
already. Restoring is measured on a 400-event answer stream with and without placeholders in it, against
rendering nothing at all (iterating the events). CPU time of this process, best of five.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from daari.privacy.redact import Redactor
from daari.privacy.restore import Restorer
from daari.protocol.events import Finish, TextDelta
from daari.protocol.openai_wire import parse_chat_request
from tests.privacy_fixtures import tool_output

ROOT = Path(__file__).resolve().parents[1]
KEY = b"b" * 32


def tools(count: int) -> list[dict[str, object]]:
    """Tool definitions the size of Claude Code's: a description of a few KB (module docs here) and a schema."""
    docs = [path.read_text()[:4000] for path in sorted((ROOT / "docs").glob("*.md"))[:count]]
    return [{"type": "function", "function": {
        "name": f"tool_{index}", "description": doc,
        "parameters": {"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string", "description": "The absolute path of the file to work on."},
            "mode": {"type": "string", "enum": ["read", "write", "append"], "description": "What to do with it."},
            "limit": {"type": "integer", "description": "How many lines at most; omit for the whole file."}}}}}
        for index, doc in enumerate(docs)]


def history(files: int) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a coding agent. " * 200},
                                         {"role": "user", "content": "Find why the tests fail and fix it."}]
    sources = sorted((ROOT / "daari").rglob("*.py"))[:files]
    for index, path in enumerate(sources):
        call = f"call_{index}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": call, "type": "function",
                         "function": {"name": "read", "arguments": json.dumps({"path": str(path)})}}]})
        content = tool_output() if index == len(sources) // 2 else path.read_text()
        messages.append({"role": "tool", "tool_call_id": call, "content": content})
    return {"model": "claude", "messages": messages, "tools": tools(12)}


def best(run: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    body = history(60)
    raw = orjson.dumps(body)
    request = parse_chat_request(orjson.loads(raw), {})
    body2 = {**body, "messages": [*body["messages"], {"role": "user", "content": "and now the docs"}]}  # type: ignore[list-item]
    request2 = parse_chat_request(body2, {})
    decode = best(lambda: orjson.loads(raw))
    cold = best(lambda: Redactor(KEY).request(request))
    warm_redactor = Redactor(KEY)
    warm_redactor.request(request)
    warm = best(lambda: warm_redactor.request(request2))
    _, found = Redactor(KEY).request(request)
    mark = next(iter(found.secrets))
    plain = [TextDelta(f"word{i} ") for i in range(400)] + [Finish("stop")]
    marked = [TextDelta(f"{mark[:9]}" if i % 2 else f"{mark[9:]} ") for i in range(400)] + [Finish("stop")]

    def restore(events: list[object]) -> None:
        restorer = Restorer(found.secrets)
        for event in events:
            restorer.feed(event)  # type: ignore[arg-type]

    iterate = best(lambda: [e for e in plain])
    restore_plain, restore_marked = best(lambda: restore(plain)), best(lambda: restore(marked))
    print(f"request: {len(raw) / 1000:.0f} KB, {len(request.messages)} messages, {len(request.tools)} tools, "
          f"{found.count} secrets")
    print(f"redact, cold (first turn): {cold * 1000:.1f} ms = {cold / decode:.1f}x decoding the body")
    print(f"redact, warm (next turn):  {warm * 1000:.2f} ms = {warm / decode:.2f}x decoding the body")
    print(f"restore 400 events, no placeholder:     {restore_plain * 1e6 / 400:.1f} us/event "
          f"({restore_plain / iterate:.0f}x iterating them)")
    print(f"restore 400 events, each half of one:   {restore_marked * 1e6 / 400:.1f} us/event")


if __name__ == "__main__":
    main()
