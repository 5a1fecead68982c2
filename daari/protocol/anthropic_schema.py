"""The Anthropic Messages request (and count_tokens'), declared: what each field daari reads must be (msgspec
checks it, `schema.check` words the first failure as Anthropic does). `anthropic_wire` reads a checked body
into the neutral request.

Declared with daari's choices: a JSON null is an absent field; `model` may be left out; any role string is
accepted (`anthropic_wire` reads one it does not know as the user's); emptiness of `messages` and which
blocks a role may hold are `anthropic_wire`'s rules, in Anthropic's words. Content blocks are open: `BlockHead`
checks that a block is an object with a type, the tables below declare the types daari reads where they
appear; every other block (document, search_result, server tool blocks, future ones) is carried whole.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

NonEmpty = Annotated[str, Meta(min_length=1)]


class BlockHead(Struct):
    """Any content block: an object with a string type."""

    type: str


Content = str | list[BlockHead]


class TextBlock(Struct):
    text: str


class ImageBlock(Struct):
    source: dict[str, Any]  # its type picks the shape in SOURCES; other kinds (file...) are carried whole


class Base64Source(Struct):
    media_type: str
    data: str


class UrlSource(Struct):
    url: str


SOURCES: dict[str, type[Struct]] = {"base64": Base64Source, "url": UrlSource}


class ToolUseBlock(Struct):
    id: NonEmpty
    name: NonEmpty
    input: dict[str, Any] = {}


class ToolResultBlock(Struct):
    tool_use_id: NonEmpty
    is_error: bool = False
    content: Content = ""


# The block types daari reads, by where they appear; the others are carried whole (or refused by role).
TOP_SYSTEM_BLOCKS: dict[str, type[Struct]] = {"text": TextBlock}  # the top-level `system` list: text is read
RESULT_BLOCKS: dict[str, type[Struct]] = {"text": TextBlock, "image": ImageBlock}  # inside a tool_result
BLOCKS: dict[str, dict[str, type[Struct]]] = {  # a message's blocks, by its role (any unknown role: user's)
    "user": {**RESULT_BLOCKS, "tool_result": ToolResultBlock},
    "assistant": {**RESULT_BLOCKS, "tool_use": ToolUseBlock},
    "system": RESULT_BLOCKS,  # Claude Code's system messages inside `messages`
}


class MessageParam(Struct):
    # Anthropic's own words for a bad role (Claude Code recognises role errors by them).
    role: Annotated[str, Meta(description="'user' or 'assistant'")]
    content: Content


class ToolParam(Struct, kw_only=True):
    name: NonEmpty
    description: str | None = None
    type: str | None = None  # absent or "custom": a client tool; anything else: a server tool
    input_schema: dict[str, Any] | None = None  # required for a client tool (anthropic_wire)


class ToolChoiceAuto(Struct, tag_field="type", tag="auto", kw_only=True):
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(ToolChoiceAuto, tag="any", kw_only=True):
    pass


class ToolChoiceNone(ToolChoiceAuto, tag="none", kw_only=True):
    pass


class ToolChoiceTool(ToolChoiceAuto, tag="tool", kw_only=True):
    name: NonEmpty


ToolChoice = ToolChoiceAuto | ToolChoiceAny | ToolChoiceNone | ToolChoiceTool


class CountTokensBody(Struct, kw_only=True):
    """`POST /v1/messages/count_tokens`: a Messages body without max_tokens."""

    model: str | None = None
    messages: list[MessageParam]
    system: str | list[BlockHead] | None = None
    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    stop_sequences: list[str] | None = None
    temperature: Annotated[float, Meta(ge=0, le=1)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    top_k: Annotated[int, Meta(ge=0)] | None = None
    tool_choice: ToolChoice | None = None
    thinking: dict[str, Any] | None = None
    tools: list[ToolParam] | None = None
    stream: bool | None = None


class MessagesBody(CountTokensBody, kw_only=True):
    """`POST /v1/messages`: max_tokens is required, as upstream."""

    max_tokens: Annotated[int, Meta(ge=1)]

