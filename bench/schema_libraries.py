"""`python -m bench.schema_libraries`: checking real request bodies against declared schemas, msgspec (daari's
schemas, daari/protocol/*_schema.py) against pydantic v2 (the same shapes declared here, as models and as
TypedDicts), in one process, on the bodies of bench/wire_bodies.py (chat completions and Anthropic Messages).

Only the check is timed (a body to typed objects, every content part and block included), not the reading
into the neutral request, which is daari's code either way. Open lists are declared the way each library
allows: pydantic with a callable discriminator whose fallback takes any other type as sent, msgspec with
`schema.Open` (one call per list against a tagged union). CPU time of this thread, best of `--repeats` runs;
the ratio is pydantic's time over msgspec's. The figures chose msgspec (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter
from typing_extensions import NotRequired, TypedDict  # noqa: UP035 (pydantic wants typing_extensions')

from daari.protocol import anthropic_schema, openai_schema
from daari.protocol.schema import check

# ---------------------------------------------------------------- msgspec: daari's own schemas


def msgspec_anthropic(body: dict[str, Any]) -> object:
    read = check(body, anthropic_schema.MessagesBody, "anthropic")
    try:  # as anthropic_wire: every block of a declared type, one call for all the messages
        known = msgspec.convert({"v": read.messages}, anthropic_schema.KnownMessages).v
    except msgspec.ValidationError:
        known = None
    for message in known or ():
        for block in message.content if isinstance(message.content, list) else ():
            if type(block) is anthropic_schema.ToolResultBlock and isinstance(block.content, list):
                anthropic_schema.RESULT_BLOCKS.check(block.content, "anthropic", ())
    if known is not None:
        return known
    for index, message in enumerate(check(m, anthropic_schema.MessageParam, "anthropic") for m in read.messages):
        if isinstance(message.content, list):
            role = message.role if message.role in anthropic_schema.BLOCKS else "user"
            for block in anthropic_schema.BLOCKS[role].check(message.content, "anthropic", ("messages", index)):
                if type(block) is anthropic_schema.ToolResultBlock and isinstance(block.content, list):
                    anthropic_schema.RESULT_BLOCKS.check(block.content, "anthropic", ())
    return read


def msgspec_openai(body: dict[str, Any]) -> object:
    read = check(body, openai_schema.ChatBody, "openai")
    for index, message in enumerate(read.messages):
        if isinstance(message.content, list):
            parts = openai_schema.PARTS.get(message.role, openai_schema.OTHER_PARTS)
            for j, part in enumerate(message.content):
                if not isinstance(part, str):
                    parts.one(part, "openai", ("messages", index, "content", j))
    return read


# ---------------------------------------------------------------- pydantic: the same shapes

STRICT = ConfigDict(strict=True)
NonEmpty = Annotated[str, Field(min_length=1)]


def _open(known: tuple[str, ...]) -> Callable[[Any], str | None]:
    def tag(value: Any) -> str | None:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            return None
        return value["type"] if value["type"] in known else "other"
    return tag


class MText(BaseModel):
    model_config = STRICT
    type: Literal["text"]
    text: str


class MImage(BaseModel):
    model_config = STRICT
    type: Literal["image"]
    source: dict[str, Any]


class MToolUse(BaseModel):
    model_config = STRICT
    type: Literal["tool_use"]
    id: NonEmpty
    name: NonEmpty
    input: dict[str, Any] = {}


MInner = Annotated[Annotated[MText, Tag("text")] | Annotated[MImage, Tag("image")] | Annotated[Any, Tag("other")],
                   Discriminator(_open(("text", "image")))]


class MToolResult(BaseModel):
    model_config = STRICT
    type: Literal["tool_result"]
    tool_use_id: NonEmpty
    is_error: bool = False
    content: str | list[MInner] = ""


MBlock = Annotated[Annotated[MText, Tag("text")] | Annotated[MImage, Tag("image")]
                   | Annotated[MToolUse, Tag("tool_use")] | Annotated[MToolResult, Tag("tool_result")]
                   | Annotated[Any, Tag("other")], Discriminator(_open(("text", "image", "tool_use", "tool_result")))]


class MMessage(BaseModel):
    model_config = STRICT
    role: str
    content: str | list[MBlock]


class MTool(BaseModel):
    model_config = STRICT
    name: NonEmpty
    description: str | None = None
    type: str | None = None
    input_schema: dict[str, Any] | None = None


class MMessagesBody(BaseModel):
    model_config = STRICT
    model: str | None = None
    messages: list[MMessage]
    system: str | list[MBlock] | None = None
    max_tokens: Annotated[int, Field(ge=1)]
    stop_sequences: list[str] | None = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    tools: list[MTool] | None = None
    stream: bool | None = None


class TText(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    type: Literal["text"]
    text: str


class TImage(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    type: Literal["image"]
    source: dict[str, Any]


class TToolUse(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    type: Literal["tool_use"]
    id: NonEmpty
    name: NonEmpty
    input: NotRequired[dict[str, Any]]


TInner = Annotated[Annotated[TText, Tag("text")] | Annotated[TImage, Tag("image")] | Annotated[Any, Tag("other")],
                   Discriminator(_open(("text", "image")))]


class TToolResult(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    type: Literal["tool_result"]
    tool_use_id: NonEmpty
    is_error: NotRequired[bool]
    content: NotRequired[str | list[TInner]]


TBlock = Annotated[Annotated[TText, Tag("text")] | Annotated[TImage, Tag("image")]
                   | Annotated[TToolUse, Tag("tool_use")] | Annotated[TToolResult, Tag("tool_result")]
                   | Annotated[Any, Tag("other")], Discriminator(_open(("text", "image", "tool_use", "tool_result")))]


class TMessage(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    role: str
    content: str | list[TBlock]


class TTool(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    name: NonEmpty
    description: NotRequired[str | None]
    type: NotRequired[str | None]
    input_schema: NotRequired[dict[str, Any] | None]


class TMessagesBody(TypedDict):
    __pydantic_config__ = STRICT  # type: ignore[misc]
    model: NotRequired[str | None]
    messages: list[TMessage]
    system: NotRequired[str | list[TBlock] | None]
    max_tokens: Annotated[int, Field(ge=1)]
    stop_sequences: NotRequired[list[str] | None]
    temperature: NotRequired[Annotated[float, Field(ge=0, le=1)] | None]
    top_p: NotRequired[Annotated[float, Field(ge=0, le=1)] | None]
    top_k: NotRequired[Annotated[int, Field(ge=0)] | None]
    tool_choice: NotRequired[dict[str, Any] | None]
    thinking: NotRequired[dict[str, Any] | None]
    tools: NotRequired[list[TTool] | None]
    stream: NotRequired[bool | None]


class CText(BaseModel):
    model_config = STRICT
    type: Literal["text"]
    text: str


class CImageUrl(BaseModel):
    model_config = STRICT
    type: Literal["image_url"]
    image_url: str | dict[str, Any]


CPart = Annotated[Annotated[CText, Tag("text")] | Annotated[CImageUrl, Tag("image_url")]
                  | Annotated[Any, Tag("other")], Discriminator(_open(("text", "image_url")))]


class CFunction(BaseModel):
    model_config = STRICT
    name: NonEmpty
    arguments: str | dict[str, Any] = ""


class CCall(BaseModel):
    model_config = STRICT
    id: NonEmpty
    function: CFunction


class CMessage(BaseModel):
    model_config = STRICT
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[str | CPart] | None = None
    name: str | None = None
    tool_calls: list[CCall] | None = None
    tool_call_id: str | None = None


class CFunctionDef(BaseModel):
    model_config = STRICT
    name: NonEmpty
    description: str | None = None
    parameters: dict[str, Any] | None = None


class CTool(BaseModel):
    model_config = STRICT
    type: Literal["function"] = "function"
    function: CFunctionDef


class CChatBody(BaseModel):
    model_config = STRICT
    model: Annotated[str, Field(min_length=1)] | None = None
    messages: Annotated[list[CMessage], Field(min_length=1)]
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    tools: list[CTool] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    n: Annotated[int, Field(ge=1)] | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


CHECKERS: dict[str, dict[str, Callable[[dict[str, Any]], object]]] = {
    "anthropic": {"msgspec": msgspec_anthropic, "pydantic models": MMessagesBody.model_validate,
                  "pydantic TypedDicts": TypeAdapter(TMessagesBody).validate_python},
    "openai": {"msgspec": msgspec_openai, "pydantic models": CChatBody.model_validate},
}


def best_us(check_body: Callable[[dict[str, Any]], object], body: dict[str, Any], calls: int, repeats: int) -> float:
    check_body(body)  # a body a checker refuses fails here
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(calls):
            check_body(body)
        best = min(best, (time.thread_time() - start) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from bench.report import Table, print_tables, ratio
    from bench.wire_bodies import bodies

    table = Table("Checking a request body against declared schemas: CPU us per body (best of "
                  f"{args.repeats} runs of {args.calls})",
                  ["body", "msgspec", "pydantic models", "models / msgspec", "pydantic TypedDicts",
                   "TypedDicts / msgspec"])
    for name, protocol, body in bodies():
        checkers = CHECKERS.get(protocol)
        if checkers is None:
            continue
        times = {label: best_us(fn, body, args.calls, args.repeats) for label, fn in checkers.items()}
        typed = times.get("pydantic TypedDicts")
        table.add(name, times["msgspec"], times["pydantic models"], ratio(times["pydantic models"], times["msgspec"]),
                  typed if typed is not None else "-", ratio(typed, times["msgspec"]) if typed is not None else "-")
    table.notes.append("the same shapes in each library: every field daari reads, content parts and blocks by type "
                       "(other types taken as sent); strict types, as daari's checks")
    print_tables([table])


if __name__ == "__main__":
    main()
