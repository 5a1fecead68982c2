"""The OpenAI chat-completions request, declared: what each field daari reads must be (msgspec checks it,
`schema.check` words the first failure). `openai_wire` turns a checked body into the neutral request.

Declared as the reference API has them, with daari's choices: a JSON null is an absent field; `model` may be
left out; `n` is checked here as an integer, and `openai_wire` refuses more than one choice; the legacy
`function` role is a known role so that `openai_wire` can say what replaced it. Fields not declared here are
not read (they travel in `raw` and the cache key's `extra`). Content parts are open: `PartHead` checks that a
part is an object with a type, `PARTS` declares the types daari reads in each role's messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

NonEmpty = Annotated[str, Meta(min_length=1)]
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class PartHead(Struct):
    """Any content part: an object with a type (the rest is read by the part's own shape, or kept whole)."""

    type: NonEmpty


class TextPart(Struct):
    text: str


class RefusalPart(Struct):
    refusal: str


class ImageUrl(Struct):
    url: Annotated[str, Meta(min_length=1, description="an http(s) or data: URL")]


class ImageUrlPart(Struct):
    image_url: Annotated[str, Meta(min_length=1, description="an http(s) or data: URL")] | ImageUrl


# The part types daari reads, by the role of the message that holds them (system, developer and tool
# messages: text only); any other type is carried whole.
PARTS: dict[str, dict[str, type[Struct]]] = {
    "user": {"text": TextPart, "image_url": ImageUrlPart},
    "assistant": {"text": TextPart, "refusal": RefusalPart},
}
OTHER_PARTS: dict[str, type[Struct]] = {"text": TextPart}
# Types daari reads that only some roles may hold: elsewhere they are refused, not carried.
ROLE_BOUND_PARTS = ("image_url", "refusal")

ContentItem = Annotated[str | PartHead, Meta(description="a content part object (or a string)")]


class CallFunction(Struct):
    name: NonEmpty
    arguments: Annotated[str | dict[str, Any], Meta(description="a JSON string")] = ""


class ToolCallParam(Struct):
    id: NonEmpty
    function: CallFunction


class MessageParam(Struct, kw_only=True):
    role: Annotated[Role, Meta(description="one of system, developer, user, assistant, tool")]
    content: Annotated[str | list[ContentItem] | None,
                       Meta(description="a string, null, or a list of content parts")] = None
    name: str | None = None
    tool_calls: list[ToolCallParam] | None = None
    tool_call_id: str | None = None
    function_call: Any = None  # legacy: refused by openai_wire


class FunctionDef(Struct):
    name: NonEmpty
    description: str | None = None
    parameters: Annotated[dict[str, Any], Meta(description="a JSON schema object")] | None = None


class ToolParam(Struct):
    function: Annotated[FunctionDef, Meta(description="an object with a name")]
    type: Annotated[Literal["function"], Meta(description="'function'")] = "function"


class NamedFunction(Struct):
    name: NonEmpty


class NamedToolChoice(Struct):
    function: NamedFunction
    type: str | None = None


TOOL_CHOICE = "'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}"


class ChatBody(Struct, kw_only=True):
    """A chat-completions body: the fields daari reads. Numbers keep their range here, in words for errors."""

    model: Annotated[str, Meta(min_length=1, description="a non-empty string")] | None = None
    messages: Annotated[list[MessageParam], Meta(min_length=1, description="a non-empty list of messages")]
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    temperature: Annotated[float, Meta(ge=0, le=2, description="a number between 0 and 2")] | None = None
    tools: list[ToolParam] | None = None
    max_tokens: Annotated[int, Meta(ge=1, description="an integer >= 1")] | None = None
    max_completion_tokens: Annotated[int, Meta(ge=1, description="an integer >= 1")] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1, description="a number between 0 and 1")] | None = None
    presence_penalty: Annotated[float, Meta(ge=-2, le=2, description="a number between -2 and 2")] | None = None
    frequency_penalty: Annotated[float, Meta(ge=-2, le=2, description="a number between -2 and 2")] | None = None
    n: Annotated[int, Meta(ge=1, description="an integer >= 1")] | None = None
    seed: Annotated[int, Meta(ge=-(2**63), description="an integer (64-bit)")] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20, description="an integer between 0 and 20")] | None = None
    parallel_tool_calls: bool | None = None
    stop: Annotated[str | list[str], Meta(description="a string or a list of strings")] | None = None
    logit_bias: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    tool_choice: Annotated[Literal["none", "auto", "required"] | NamedToolChoice,
                           Meta(description=TOOL_CHOICE)] | None = None
