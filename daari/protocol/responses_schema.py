"""The OpenAI Responses request (`POST /v1/responses`), declared: what each field daari reads must be (msgspec
checks it, `schema.check` words the first failure). `responses_wire` and `responses_tools` read a checked body
into the neutral request.

Input items, their content parts and tools are open: a head (`ItemHead`, `PartHead`, `ToolHead`) checks what
every element needs, and the tables declare the types daari reads; the others are carried as sent (reasoning
items, hosted tools, item types of the future), to be hashed for the key and forwarded to a Responses upstream.
An item with no type but a role is a message, as the API has it. `text`, `reasoning` and the rest of the
fields daari does not translate are only checked for being objects: they are keyed and forwarded as sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

NonEmpty = Annotated[str, Meta(min_length=1)]


class PartHead(Struct):
    """Any content part: an object (a part without a type is carried, hashed, as one daari cannot read)."""

    type: str | None = None


Content = Annotated[str | list[PartHead], Meta(description="a string or a list of content parts")]


class TextPart(Struct):  # input_text, output_text, text, summary_text
    text: str


class RefusalPart(Struct):
    refusal: str


class ImagePart(Struct):
    image_url: str | None = None  # none: a file_id image, which only the upstream holding the file can read


PARTS: dict[str | None, type[Struct]] = {
    "input_text": TextPart, "output_text": TextPart, "text": TextPart, "summary_text": TextPart,
    "refusal": RefusalPart, "input_image": ImagePart,
}


class ItemHead(Struct):
    """Any input item: an object; its type picks its shape in ITEMS (a message may leave it out)."""

    type: str | None = None


class MessageItem(Struct):
    role: Annotated[Literal["system", "developer", "user", "assistant"],
                    Meta(description="one of system, developer, user, assistant")]
    content: Content = ""


class FunctionCallItem(Struct):
    call_id: NonEmpty
    name: NonEmpty
    arguments: str = ""
    namespace: str | None = None


class CustomToolCallItem(Struct):
    call_id: NonEmpty
    name: NonEmpty
    input: str = ""
    namespace: str | None = None


class CallOutputItem(Struct):  # function_call_output, custom_tool_call_output
    call_id: NonEmpty
    output: Content | None = None


class ToolHead(Struct):
    """Any tool: an object with a type; ones not in TOOLS are hosted tools, kept as sent."""

    type: Annotated[str, Meta(min_length=1, description="a string ('function', 'custom', 'web_search'...)")]


class FunctionTool(Struct):
    name: NonEmpty
    description: str | None = None
    parameters: Annotated[dict[str, Any], Meta(description="a JSON schema object")] | None = None


class CustomTool(Struct):
    name: NonEmpty
    description: str | None = None
    format: dict[str, Any] | None = None


class NamespaceTool(Struct):
    name: NonEmpty
    tools: Annotated[list[ToolHead], Meta(description="a list of tools")]


class AdditionalToolsItem(Struct):
    tools: list[ToolHead] | None = None


# The item types daari reads into neutral messages; the others are hashed for the key (responses_wire).
ITEMS: dict[str | None, type[Struct]] = {
    "message": MessageItem, "function_call": FunctionCallItem, "custom_tool_call": CustomToolCallItem,
    "function_call_output": CallOutputItem, "custom_tool_call_output": CallOutputItem,
    "additional_tools": AdditionalToolsItem,
}
TOOLS: dict[str, type[Struct]] = {"function": FunctionTool, "custom": CustomTool, "namespace": NamespaceTool}
NAMESPACE_TOOLS: dict[str, type[Struct]] = {"function": FunctionTool, "custom": CustomTool}


class NamedToolChoice(Struct):
    """A forced tool ({"type": "function", "name": ...}), or a hosted tool or allowed_tools (only a Responses
    upstream can honour those)."""

    type: str
    name: str | None = None


TOOL_CHOICE = "'none', 'auto', 'required' or an object with a 'type'"


class ResponsesBody(Struct, kw_only=True):
    """A Responses body: the fields daari reads."""

    model: Annotated[str, Meta(description="a non-empty string")] | None = None
    input: Annotated[str | list[ItemHead], Meta(description="a string or a list of input items")] | None = None
    instructions: Annotated[str | list[PartHead], Meta(description="a string")] | None = None
    conversation: Any = None  # the Conversations API: refused by responses_wire
    tools: list[ToolHead] | None = None
    tool_choice: Annotated[Literal["none", "auto", "required"] | NamedToolChoice,
                           Meta(description=TOOL_CHOICE)] | None = None
    parallel_tool_calls: bool | None = None
    temperature: Annotated[float, Meta(ge=0, le=2, description="a number between 0 and 2")] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1, description="a number between 0 and 1")] | None = None
    max_output_tokens: Annotated[int, Meta(ge=1, description="an integer >= 1")] | None = None
    stream: bool | None = None
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
