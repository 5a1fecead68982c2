"""The answer as the client must see it: placeholders the remote model wrote (text, tool call arguments, Anthropic
native events, streamed or whole) turned back into the secrets they stand for. A stream holds back the end of a
piece that could be the start of a placeholder, so one split across chunks is restored whole."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from daari.privacy.redact import MARK_START
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart


class Restorer:
    """Restores one generation's events. `feed` each event in order, and the events to pass on come back (a piece
    may be held until the next one shows whether it ends a placeholder); `restored` counts the secrets put back."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.secrets = dict(secrets)
        self.restored = 0
        self._pattern = re.compile("|".join(re.escape(p) for p in sorted(self.secrets, key=len, reverse=True)))
        self._escaped = {p: json.dumps(s, ensure_ascii=False)[1:-1] for p, s in self.secrets.items()}
        self._held: dict[tuple[str, int], str] = {}  # channel -> text held back
        self._longest = max((len(p) for p in self.secrets), default=1)
        self._held_events: dict[tuple[str, int], NativeEvent] = {}  # Responses deltas held whole

    # -- text --

    def text(self, text: str, *, json_text: bool = False) -> str:
        """Every known placeholder in `text` replaced (escaped for a JSON string when `json_text`)."""
        if MARK_START not in text:
            return text
        table = self._escaped if json_text else self.secrets

        def put_back(match: re.Match[str]) -> str:
            self.restored += 1
            return table[match.group(0)]

        return self._pattern.sub(put_back, text)

    def _held_back(self, text: str) -> int:
        """How many characters at the end of `text` could begin a placeholder: every placeholder starts with
        MARK_START, so only a tail starting with its first letter is looked at (usually none: one `find`)."""
        at = text.find(MARK_START[0], max(0, len(text) - self._longest + 1))
        while at >= 0:
            tail = text[at:]
            if any(mark.startswith(tail) for mark in self.secrets):
                return len(text) - at
            at = text.find(MARK_START[0], at + 1)
        return 0

    def _piece(self, channel: tuple[str, int], piece: str, json_text: bool) -> str:
        text = self._held.pop(channel, "") + piece
        keep = self._held_back(text)
        if keep:
            self._held[channel] = text[-keep:]
            text = text[:-keep]
        return self.text(text, json_text=json_text)

    def _release(self, channel: tuple[str, int]) -> str:
        return self.text(self._held.pop(channel, ""), json_text=channel[0] in ("tool", "json"))

    def value(self, value: Any) -> Any:
        """A decoded JSON value with its strings restored (a whole Anthropic message, tool input objects, a
        Responses item); `arguments` strings are JSON text, restored with escaping."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            if value.get("type") in ("thinking", "redacted_thinking"):
                return value  # signed by the provider over the placeholders it saw
            return {k: v if k in ("signature", "id", "type", "encrypted_content")
                    else self.text(v, json_text=True) if k == "arguments" and isinstance(v, str)
                    else self.value(v) for k, v in value.items()}
        return value

    # -- events --

    def feed(self, event: Event) -> list[Event]:
        if isinstance(event, TextDelta):
            text = self._piece(("text", 0), event.text, False)
            return [replace(event, text=text)] if text else []
        if isinstance(event, ToolCallStart):
            return [*self._flush_neutral(), event]
        if isinstance(event, ToolCallDelta):
            pieces = self._piece(("tool", event.index), event.arguments, True)
            return [ToolCallDelta(event.index, pieces)] if pieces else []
        if isinstance(event, Finish):
            return [*self._flush_neutral(), event]
        if isinstance(event, NativeEvent):
            return self._native(event)
        return [event]

    def _flush_neutral(self) -> list[Event]:
        out: list[Event] = []
        for channel in [c for c in self._held if c[0] in ("text", "tool")]:
            text = self._release(channel)
            if text:
                out.append(TextDelta(text) if channel[0] == "text" else ToolCallDelta(channel[1], text))
        return out

    def _native(self, event: NativeEvent) -> list[Event]:
        if event.protocol == "responses":
            return self._responses(event)
        if event.protocol != "anthropic":
            data = self.value(event.data)
            return [event if data == event.data else NativeEvent(event.protocol, event.name, data)]
        data = event.data
        if event.name == "content_block_delta":
            delta = data.get("delta") or {}
            index = int(data.get("index", 0))
            kind = delta.get("type")
            if kind == "text_delta":
                text = self._piece(("atext", index), str(delta.get("text", "")), False)
                return [_block_delta(index, "text_delta", "text", text)] if text else []
            if kind == "input_json_delta":
                text = self._piece(("json", index), str(delta.get("partial_json", "")), True)
                return [_block_delta(index, "input_json_delta", "partial_json", text)] if text else []
            return [event]  # thinking and signature deltas: the provider signed what it saw
        if event.name == "content_block_stop":
            index = int(data.get("index", 0))
            out: list[Event] = []
            for kind, field_name, channel in (("text_delta", "text", "atext"),
                                              ("input_json_delta", "partial_json", "json")):
                text = self._release((channel, index))
                if text:
                    out.append(_block_delta(index, kind, field_name, text))
            return [*out, event]
        if event.name in ("message", "content_block_start", "message_start"):
            restored = self.value(data)
            return [event if restored == data else NativeEvent(event.protocol, event.name, restored)]
        return [event]


    def _responses(self, event: NativeEvent) -> list[Event]:
        """A Responses event. A delta whose text could end in the start of a placeholder is held whole and merged
        into the next delta of its part (keeping the held one's sequence_number: the numbers stay increasing, with
        a gap), or let out before the part's `.done` event; every other event has its strings restored."""
        family, _, suffix = event.name.rpartition(".")
        if family not in RESPONSES_DELTAS:
            data = self.value(event.data)
            return [event if data == event.data else NativeEvent(event.protocol, event.name, data, None)]
        data = event.data
        channel = (family, int(data.get("output_index", 0)) * 1000 + int(data.get("content_index",
                                                                             data.get("summary_index", 0))))
        json_text = family == "response.function_call_arguments"
        held = self._held_events.pop(channel, None)
        if suffix == "delta":
            text = (held.data["delta"] if held is not None else "") + str(data.get("delta", ""))
            base = held if held is not None else event
            if self._held_back(text):
                self._held_events[channel] = NativeEvent(base.protocol, base.name, {**base.data, "delta": text})
                return []
            restored = self.text(text, json_text=json_text)
            same = held is None and restored == text
            return [event if same else NativeEvent(base.protocol, base.name, {**base.data, "delta": restored})]
        out: list[Event] = []
        if held is not None:
            restored = self.text(held.data["delta"], json_text=json_text)
            out.append(NativeEvent(held.protocol, held.name, {**held.data, "delta": restored}))
        done = self.value(data)
        return [*out, event if done == data else NativeEvent(event.protocol, event.name, done)]


# Responses event families whose deltas are text (or, for arguments, JSON text) to restore across events.
RESPONSES_DELTAS = frozenset({"response.output_text", "response.function_call_arguments",
                              "response.custom_tool_call_input", "response.reasoning_summary_text"})


def _block_delta(index: int, kind: str, field_name: str, text: str) -> NativeEvent:
    return NativeEvent("anthropic", "content_block_delta",
                       {"type": "content_block_delta", "index": index, "delta": {"type": kind, field_name: text}})
