"""The OpenAI chat-completions request, declared: what each field daari reads must be (msgspec checks it,
`schema.check` words the first failure). `openai_wire` turns a checked body into the neutral request.

Declared as the reference API has them, with daari's choices: a JSON null is an absent field; `model` may be
left out; `n` is checked here as an integer, and `openai_wire` refuses more than one choice; the legacy
`function` role is a known role so that `openai_wire` can say what replaced it. Fields not declared here are
not read (they travel in `raw` and the cache key's `extra`). Content parts are open (`schema.Open`): `PARTS`
declares the types daari reads in each role's messages, the others are carried whole.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from daari.protocol.schema import Open, Shape

NonEmpty = Annotated[str, Meta(min_length=1)]
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class TextPart(Shape, tag_field="type", tag="text"):
    text: str


class RefusalPart(Shape, tag_field="type", tag="refusal"):
    refusal: str


class ImageUrl(Shape):
    url: Annotated[str, Meta(min_length=1, description="an http(s) or data: URL")]


class ImageUrlPart(Shape, tag_field="type", tag="image_url"):
    image_url: Annotated[str, Meta(min_length=1, description="an http(s) or data: URL")] | ImageUrl


# Part types daari knows and does not read (carried whole: an OpenAI-compatible upstream reads them, the cache
# key hashes them whole); any other type is carried whole too, and counted as a new shape.
CARRIED_PARTS = ("input_audio", "file")
_PART = "a content part object"
# The part types daari reads, by the role of the message that holds them (system, developer and tool
# messages: text only). `image_url` and `refusal` are refused where they are not read (openai_wire).
PARTS: dict[str, Open] = {
    "user": Open(TextPart, ImageUrlPart, carried=CARRIED_PARTS, element=_PART),
    "assistant": Open(TextPart, RefusalPart, carried=CARRIED_PARTS, element=_PART),
}
OTHER_PARTS = Open(TextPart, carried=CARRIED_PARTS, element=_PART)
ROLE_BOUND_PARTS = ("image_url", "refusal")


class CallFunction(Shape):
    name: NonEmpty
    arguments: Annotated[str | dict[str, Any], Meta(description="a JSON string")] = ""


class ToolCallParam(Shape):
    id: NonEmpty
    function: CallFunction


class MessageParam(Shape, kw_only=True):
    role: Annotated[Role, Meta(description="one of system, developer, user, assistant, tool")]
    content: Annotated[str | list[Any] | None,  # its parts: PARTS (a bare string part is text)
                       Meta(description="a string, null, or a list of content parts")] = None
    name: str | None = None
    tool_calls: list[ToolCallParam] | None = None
    tool_call_id: str | None = None
    function_call: Any = None  # legacy: refused by openai_wire


class FunctionDef(Shape):
    name: NonEmpty
    description: str | None = None
    parameters: Annotated[dict[str, Any], Meta(description="a JSON schema object")] | None = None


class ToolParam(Shape):
    function: Annotated[FunctionDef, Meta(description="an object with a name")]
    type: Annotated[Literal["function"], Meta(description="'function'")] = "function"


class NamedFunction(Shape):
    name: NonEmpty


class NamedToolChoice(Shape):
    function: NamedFunction
    type: str | None = None


TOOL_CHOICE = "'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}"


class ChatBody(Shape, kw_only=True):
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
