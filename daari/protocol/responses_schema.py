"""The OpenAI Responses request (`POST /v1/responses`), declared: what each field daari reads must be (msgspec
checks it, `schema.check` words the first failure). `responses_wire` and `responses_tools` read a checked body
into the neutral request.

Input items, their content parts and tools are open (`schema.Open`): the tables declare the types daari reads;
the others are carried as sent (reasoning items, hosted tools, item types of the future), to be hashed for the
key and forwarded to a Responses upstream.
An item with no type but a role is a message, as the API has it. `text`, `reasoning` and the rest of the
fields daari does not translate are only checked for being objects: they are keyed and forwarded as sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from daari.protocol.schema import Open, Shape

NonEmpty = Annotated[str, Meta(min_length=1)]


Content = Annotated[str | list[Any], Meta(description="a string or a list of content parts")]  # parts: PARTS


class InputTextPart(Shape, tag_field="type", tag="input_text"):
    text: str


class OutputTextPart(InputTextPart, tag="output_text"):
    pass


class TextPart(InputTextPart, tag="text"):
    pass


class SummaryTextPart(InputTextPart, tag="summary_text"):
    pass


class RefusalPart(Shape, tag_field="type", tag="refusal"):
    refusal: str


class ImagePart(Shape, tag_field="type", tag="input_image"):
    image_url: str | None = None  # none: a file_id image, which only the upstream holding the file can read


# Parts daari knows and cannot translate (carried, hashed: only a Responses upstream reads them); any other type
# is carried the same way, and counted as a new shape.
CARRIED_PARTS = ("reasoning_text", "input_file", "input_audio", "input_video")
TEXT_PARTS = frozenset({InputTextPart, OutputTextPart, TextPart, SummaryTextPart})
PARTS = Open(InputTextPart, OutputTextPart, TextPart, SummaryTextPart, RefusalPart, ImagePart,
             carried=CARRIED_PARTS, element="a content part object")


class MessageItem(Shape, tag_field="type", tag="message"):
    role: Annotated[Literal["system", "developer", "user", "assistant"],
                    Meta(description="one of system, developer, user, assistant")]
    content: Content = ""


class FunctionCallItem(Shape, tag_field="type", tag="function_call"):
    call_id: NonEmpty
    name: NonEmpty
    arguments: str = ""
    namespace: str | None = None


class CustomToolCallItem(Shape, tag_field="type", tag="custom_tool_call"):
    call_id: NonEmpty
    name: NonEmpty
    input: str = ""
    namespace: str | None = None


class FunctionCallOutputItem(Shape, tag_field="type", tag="function_call_output"):
    call_id: NonEmpty
    output: Content | None = None


class CustomToolCallOutputItem(FunctionCallOutputItem, tag="custom_tool_call_output"):
    pass


class FunctionTool(Shape, tag_field="type", tag="function"):
    name: NonEmpty
    description: str | None = None
    parameters: Annotated[dict[str, Any], Meta(description="a JSON schema object")] | None = None


class CustomTool(Shape, tag_field="type", tag="custom"):
    name: NonEmpty
    description: str | None = None
    format: dict[str, Any] | None = None


class NamespaceTool(Shape, tag_field="type", tag="namespace"):
    name: NonEmpty
    tools: Annotated[list[Any], Meta(description="a list of tools")]  # its tools: NAMESPACE_TOOLS


class AdditionalToolsItem(Shape, tag_field="type", tag="additional_tools"):
    tools: list[Any] | None = None  # TOOLS


# Items with no neutral form that a translated request may leave out (the model's own scratch work).
DROPPABLE_ITEMS = ("reasoning",)
# Calls of hosted tools, their results inside: another tier reads them as a short note.
HOSTED_ITEMS = ("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
                "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")
# Items daari knows and cannot translate: only a Responses upstream reads them.
NATIVE_ITEMS = ("item_reference", "compaction", "compaction_summary", "compaction_trigger", "context_compaction",
                "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
                "apply_patch_call_output", "computer_call", "computer_call_output", "tool_search_call",
                "tool_search_output")


class UntypedMessageItem(Shape):
    """An item with a role and no type: a message, as the API has it."""

    role: Annotated[Literal["system", "developer", "user", "assistant"],
                    Meta(description="one of system, developer, user, assistant")]
    content: Content = ""


# The item types daari reads into neutral messages; the others are carried, hashed for the key (responses_wire).
ITEMS = Open(MessageItem, FunctionCallItem, CustomToolCallItem, FunctionCallOutputItem, CustomToolCallOutputItem,
             AdditionalToolsItem, carried=(*DROPPABLE_ITEMS, *HOSTED_ITEMS, *NATIVE_ITEMS),
             element="an object", untyped=("role", UntypedMessageItem))




# The same items when every part in them is of a type PARTS declares: a whole `input` is then checked in one
# msgspec call (KNOWN_ITEMS); an input holding any other type is checked item by item instead (ITEMS, PARTS).
class KnownMessageItem(MessageItem, tag="message"):
    content: str | list[PARTS.union] = ""  # type: ignore[name-defined]


class KnownFunctionCallOutputItem(FunctionCallOutputItem, tag="function_call_output"):
    output: str | list[PARTS.union] | None = None  # type: ignore[name-defined]


class KnownCustomToolCallOutputItem(FunctionCallOutputItem, tag="custom_tool_call_output"):
    output: str | list[PARTS.union] | None = None  # type: ignore[name-defined]


KNOWN_ITEMS = Open(KnownMessageItem, FunctionCallItem, CustomToolCallItem, KnownFunctionCallOutputItem,
                   KnownCustomToolCallOutputItem, AdditionalToolsItem,
                   carried=(*DROPPABLE_ITEMS, *HOSTED_ITEMS, *NATIVE_ITEMS), element="an object")
KNOWN_PARTS_ITEMS = frozenset({KnownMessageItem, KnownFunctionCallOutputItem, KnownCustomToolCallOutputItem})
MESSAGE_ITEMS = frozenset({MessageItem, UntypedMessageItem, KnownMessageItem})
CALL_OUTPUT_ITEMS = frozenset({FunctionCallOutputItem, CustomToolCallOutputItem, KnownFunctionCallOutputItem,
                               KnownCustomToolCallOutputItem})


_TOOL_TYPE = "a string ('function', 'custom', 'web_search'...)"
# Hosted tools daari knows (only a Responses upstream runs them: kept as sent); any other type is one too.
HOSTED_TOOLS = ("web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation", "mcp",
                "local_shell", "shell", "computer_use_preview", "apply_patch")
TOOLS = Open(FunctionTool, CustomTool, NamespaceTool, carried=HOSTED_TOOLS, element="an object",
             type_words=_TOOL_TYPE)
NAMESPACE_TOOLS = Open(FunctionTool, CustomTool, element="an object", type_words="'function' or 'custom'")


class NamedToolChoice(Shape):
    """A forced tool ({"type": "function", "name": ...}), or a hosted tool or allowed_tools (only a Responses
    upstream can honour those)."""

    type: str
    name: str | None = None


TOOL_CHOICE = "'none', 'auto', 'required' or an object with a 'type'"


class ResponsesBody(Shape, kw_only=True):
    """A Responses body: the fields daari reads."""

    model: Annotated[str, Meta(description="a non-empty string")] | None = None
    input: Annotated[str | list[Any], Meta(description="a string or a list of input items")] | None = None  # ITEMS
    instructions: Annotated[str | list[Any], Meta(description="a string")] | None = None
    conversation: Any = None  # the Conversations API: refused by responses_wire
    tools: list[Any] | None = None  # TOOLS
    tool_choice: Annotated[Literal["none", "auto", "required"] | NamedToolChoice,
                           Meta(description=TOOL_CHOICE)] | None = None
    parallel_tool_calls: bool | None = None
    temperature: Annotated[float, Meta(ge=0, le=2, description="a number between 0 and 2")] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1, description="a number between 0 and 1")] | None = None
    max_output_tokens: Annotated[int, Meta(ge=1, description="an integer >= 1")] | None = None
    stream: bool | None = None
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
