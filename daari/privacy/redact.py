"""A request as a remote tier may see it: every secret swapped for a placeholder that is a keyed hash of the secret
(the same secret gets the same placeholder on every turn, in every session, across restarts, so the prompt prefix
and the provider's cache hold), and the placeholders it used, to restore the answer with (restore.py)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from daari.cache.lru import LRU
from daari.jsonio import dumps, loads
from daari.privacy.detect import find_secrets
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall

# Parts that are not the user's text, or that a provider signed: changing them breaks the request.
SKIP_TYPES = frozenset({"thinking", "redacted_thinking", "reasoning", "compaction"})
# Parts whose `data` is base64 (a neutral image part, an Anthropic image or document source): binary, left whole.
# Their other fields (an image's URL) are read like any text. A data: URL (OpenAI, Responses) is left whole too.
BINARY_TYPES = frozenset({"image", "base64"})
SKIP_KEYS = frozenset({"signature", "encrypted_content", "model", "type", "id", "tool_use_id", "tool_call_id",
                       "call_id", "role", "cache_control"})
JSON_TEXT_KEYS = frozenset({"arguments"})  # OpenAI's tool call arguments are JSON text inside the JSON body
KNOWN_SECRETS = 4096  # secrets found so far, redacted wherever they show up again (in daari's memory only)
MARK_START = "REDACTED_"  # every placeholder's start (restore.py looks for it before anything else)
MEMO_BYTES = 32 * 1024 * 1024  # texts remembered with their redaction: an agent's history repeats every turn


Redacted = tuple[str, tuple[tuple[str, str, str], ...]]  # a text as redacted, and (kind, placeholder, secret) each


def placeholder(kind: str, secret: str, key: bytes) -> str:
    """`REDACTED_<KIND>_<12 hex>`: the kind tells the model what stood there; the keyed hash cannot be reversed
    or checked against a guess without the data dir's secret. Only [A-Z0-9_a-f]: JSON and shells leave it alone."""
    digest = hmac.new(key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:12]
    return f"{MARK_START}{kind}_{digest}"


@dataclass
class Redaction:
    """What redacting one request found: placeholder -> secret (for the answer), and counts by kind."""

    secrets: dict[str, str] = field(default_factory=dict)
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.kinds.values())


class Redactor:
    """Redacts texts with a keyed placeholder, remembering each text's result and every secret found.

    A secret found once is redacted wherever it shows up again, even out of the context that gave it away: an
    answer daari restored (`DB_PASSWORD=...` read by a tool, then the bare value in the model's command) comes
    back in the next turn's history without the name beside it. Both memories hold secrets and live in daari's
    memory only, like the request itself."""

    def __init__(self, key: bytes, memo_bytes: int = MEMO_BYTES, known_secrets: int = KNOWN_SECRETS) -> None:
        self.key = key
        # text -> (detected: text and finds, the known secrets' version, final: text and finds after them)
        self._memo: LRU[str, tuple[Redacted, int, Redacted]] = LRU(memo_bytes)
        self._known: dict[str, tuple[str, str]] = {}  # secret -> (kind, placeholder), oldest first
        self._known_limit = known_secrets
        self._known_pattern: re.Pattern[str] | None = None
        self.learned = 0  # secrets learned so far: a request redacted while it grew is redacted again

    def text(self, text: str, out: Redaction) -> str:
        hit = self._memo.get(text)
        if hit is not None and hit[1] == self.learned:
            final = hit[2]  # the usual case on a later turn: nothing learned since, nothing to do
        else:
            detected = hit[0] if hit is not None else self._redact(text)
            for kind, mark, secret in detected[1]:
                self._learn(secret, kind, mark)
            final = self._known_pass(detected)
            self._memo.put(text, (detected, self.learned, final), 2 * len(text) + 100)
        redacted, found = final
        for kind, mark, secret in found:
            out.secrets[mark] = secret
            out.kinds[kind] += 1
        return redacted

    def _known_pass(self, detected: Redacted) -> Redacted:
        """The detected text with every secret learned so far replaced too (found out of its context)."""
        redacted, found = detected
        pattern = self._known_pattern
        if pattern is None or pattern.search(redacted) is None:
            return detected
        more: list[tuple[str, str, str]] = []

        def mark_of(match: re.Match[str]) -> str:
            secret = match.group(0)
            kind, mark = self._known[secret]
            more.append((kind, mark, secret))
            return mark

        return pattern.sub(mark_of, redacted), (*found, *more)

    def _learn(self, secret: str, kind: str, mark: str) -> None:
        if secret in self._known:
            return
        self._known[secret] = (kind, mark)
        if len(self._known) > self._known_limit:
            del self._known[next(iter(self._known))]
        self._known_pattern = re.compile("|".join(re.escape(k) for k in sorted(self._known, key=len, reverse=True)))
        self.learned += 1

    def _redact(self, text: str) -> Redacted:
        spans = find_secrets(text)
        if not spans:
            return text, ()
        pieces: list[str] = []
        found: list[tuple[str, str, str]] = []
        last = 0
        for span in spans:
            secret = text[span.start:span.end]
            mark = placeholder(span.kind, secret, self.key)
            pieces += [text[last:span.start], mark]
            found.append((span.kind, mark, secret))
            last = span.end
        pieces.append(text[last:])
        return "".join(pieces), tuple(found)

    def json_text(self, text: str, out: Redaction) -> str:
        """JSON text (tool call arguments): the decoded strings are redacted, so a secret is kept as it is, not as
        JSON escaped it; the text is re-encoded only when something changed."""
        try:
            value = loads(text)
        except ValueError:
            return self.text(text, out)
        redacted = self.value(value, out)
        return text if redacted is value else dumps(redacted).decode()

    def value(self, value: Any, out: Redaction) -> Any:
        """A JSON value with its strings redacted: the same object when nothing changed, new containers where
        something did (the client's parsed body is never modified)."""
        if isinstance(value, str):
            return value if _is_data_url(value) else self.text(value, out)
        if isinstance(value, list):
            items = [self.value(v, out) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, dict):
            kind = value.get("type")
            if kind in SKIP_TYPES:
                return value
            binary = kind in BINARY_TYPES
            changed: dict[str, Any] = {}
            for k, v in value.items():
                if k in SKIP_KEYS or (binary and k == "data"):
                    continue
                new = self.json_text(v, out) if k in JSON_TEXT_KEYS and isinstance(v, str) else self.value(v, out)
                if new is not v:
                    changed[k] = new
            return {**value, **changed} if changed else value
        return value

    def message(self, message: Message, out: Redaction) -> Message:
        content = message.content
        new_content = self.text(content, out) if isinstance(content, str) else (
            self.value(content, out) if content is not None else None)
        calls = [ToolCall(c.id, c.name, self.json_text(c.arguments, out)) for c in message.tool_calls]
        if new_content is content and all(a.arguments == b.arguments for a, b in zip(calls, message.tool_calls,
                                                                                      strict=True)):
            return message
        return Message(message.role, new_content, calls, message.tool_call_id, message.name, message.is_error)

    def tool(self, tool: Tool, out: Redaction) -> Tool:
        """A tool definition with its description and its parameter schema's strings (descriptions, enums,
        defaults, examples) redacted; its name and settings (`extra`) as they are: a call names the tool."""
        description = self.text(tool.description, out) if tool.description else tool.description
        parameters = self.value(tool.parameters, out)
        if description is tool.description and parameters is tool.parameters:
            return tool
        return replace(tool, description=description, parameters=parameters)

    def request(self, request: ChatRequest) -> tuple[ChatRequest, Redaction]:
        """The request with every secret in its messages, its tool definitions and its body as sent (`raw`, what
        a same-protocol upstream gets) replaced."""
        learned = self.learned
        redacted, out = self._request(request)
        # A secret first found late in the request (a tool result after the text that repeats it): once more.
        return self._request(request) if self.learned != learned else (redacted, out)

    def _request(self, request: ChatRequest) -> tuple[ChatRequest, Redaction]:
        out, body = Redaction(), Redaction()
        messages = [self.message(m, out) for m in request.messages]
        tools = [self.tool(t, out) for t in request.tools]
        raw = self.value(request.raw, body) if request.raw else request.raw
        if not out.secrets and not body.secrets:
            return request, out
        # Counted once per place in the messages; `raw` holds the same texts again (and, for parts the neutral
        # messages leave out, the only copy: then its counts are the ones).
        out.secrets.update(body.secrets)
        if not out.kinds:
            out.kinds = body.kinds
        return replace(request, messages=messages, tools=tools, raw=raw), out


def _is_data_url(text: str) -> bool:
    """`data:<media type>;base64,...`: an image or file as text; its bytes are no text to look for secrets in."""
    return text.startswith("data:") and ";base64," in text[:128]


def scrub(text: str, key: bytes) -> str:
    """`text` with its secrets as placeholders, for what daari keeps of a prompt (the decision log's
    `log.prompts: full`): no memo and nothing to restore."""
    spans = find_secrets(text)
    for span in reversed(spans):
        secret = text[span.start:span.end]
        text = text[:span.start] + placeholder(span.kind, secret, key) + text[span.end:]
    return text
