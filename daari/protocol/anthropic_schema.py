"""The Anthropic Messages request (and count_tokens'), declared: what each field daari reads must be (msgspec
checks it, `schema.check` words the first failure as Anthropic does). `anthropic_wire` reads a checked body
into the neutral request.

Declared with daari's choices: a JSON null is an absent field; `model` may be left out; any role string is
accepted (`anthropic_wire` reads one it does not know as the user's); emptiness of `messages` and which
blocks a role may hold are `anthropic_wire`'s rules, in Anthropic's words. Content blocks are open
(`schema.Open`): the tables below declare the types daari reads where they appear; every other block
(thinking, document, search_result, server tool blocks, future ones) is carried whole.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from daari.protocol.schema import Open, Shape

NonEmpty = Annotated[str, Meta(min_length=1)]


class TextBlock(Shape, tag_field="type", tag="text"):
    text: str


class ImageBlock(Shape, tag_field="type", tag="image"):
    source: dict[str, Any]  # its type picks the shape in SOURCES; other kinds (file...) are carried whole


class Base64Source(Shape):
    media_type: str
    data: str


class UrlSource(Shape):
    url: str


SOURCES: dict[object, type[Shape]] = {"base64": Base64Source, "url": UrlSource}


class ToolUseBlock(Shape, tag_field="type", tag="tool_use"):
    id: NonEmpty
    name: NonEmpty
    input: dict[str, Any] = {}


class ToolResultBlock(Shape, tag_field="type", tag="tool_result"):
    tool_use_id: NonEmpty
    is_error: bool = False
    content: str | list[Any] = ""  # its blocks: RESULT_BLOCKS


# Block types daari knows and does not read: carried whole wherever they appear (`thinking` blocks and their
# signatures, documents, server and MCP tool blocks...). A type in no list is carried whole too (and counted
# as a new shape), but a message holding one is checked block by block instead of with all the others at once.
HISTORY_ONLY_BLOCKS = ("thinking", "redacted_thinking")
SERVER_TOOL_BLOCKS = ("server_tool_use", "mcp_tool_use", "mcp_tool_result")
KNOWN_BLOCKS = ("text", "image", "document", "tool_use", "tool_result", *HISTORY_ONLY_BLOCKS, "search_result",
                "container_upload")
CARRIED = (*KNOWN_BLOCKS, *SERVER_TOOL_BLOCKS, "web_search_tool_result", "web_fetch_tool_result",
           "code_execution_tool_result")

_BLOCK = "a valid dictionary"  # Anthropic's words for a block that is not an object
# The blocks daari reads, by where they appear (every other type is carried whole, or refused by role).
TOP_SYSTEM_BLOCKS = Open(TextBlock, element=_BLOCK)  # the top-level `system` list: only text is read
RESULT_BLOCKS = Open(TextBlock, ImageBlock, carried=CARRIED, element=_BLOCK)  # inside a tool_result
BLOCKS: dict[str, Open] = {  # a message's blocks, by its role (any unknown role: the user's)
    "user": Open(TextBlock, ImageBlock, ToolResultBlock, carried=CARRIED, element=_BLOCK),
    "assistant": Open(TextBlock, ImageBlock, ToolUseBlock, carried=CARRIED, element=_BLOCK),
    "system": RESULT_BLOCKS,  # Claude Code's system messages inside `messages`
}


class MessageParam(Shape):
    # Anthropic's own words for a bad role (Claude Code recognises role errors by them).
    role: Annotated[str, Meta(description="'user' or 'assistant'")]
    content: str | list[Any]  # its blocks: BLOCKS[role]


# Every block type declared above, whatever the role: what a message holds when none is new to daari.
ALL_BLOCKS = Open(TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, carried=CARRIED, element=_BLOCK)


class KnownMessage(Shape):
    """A message whose blocks are all of types declared here (the role's rules are anthropic_wire's)."""

    role: str
    content: str | list[ALL_BLOCKS.union]  # type: ignore[name-defined]


class KnownMessages(Shape):
    """A body's messages when every block is of a declared type: checked in one msgspec call. A list holding
    any other type (or a bad message) is checked message by message instead (MessageParam, BLOCKS)."""

    v: list[KnownMessage]


class ToolParam(Shape, kw_only=True):
    name: NonEmpty
    description: str | None = None
    type: str | None = None  # absent or "custom": a client tool; anything else: a server tool
    input_schema: dict[str, Any] | None = None  # required for a client tool (anthropic_wire)


class ToolChoiceAuto(Shape, tag_field="type", tag="auto", kw_only=True):
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(ToolChoiceAuto, tag="any", kw_only=True):
    pass


class ToolChoiceNone(ToolChoiceAuto, tag="none", kw_only=True):
    pass


class ToolChoiceTool(ToolChoiceAuto, tag="tool", kw_only=True):
    name: NonEmpty


ToolChoice = ToolChoiceAuto | ToolChoiceAny | ToolChoiceNone | ToolChoiceTool


class CountTokensBody(Shape, kw_only=True):
    """`POST /v1/messages/count_tokens`: a Messages body without max_tokens."""

    model: str | None = None
    messages: list[Any]  # KnownMessages, else each a MessageParam
    system: str | list[Any] | None = None  # its blocks: TOP_SYSTEM_BLOCKS
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

