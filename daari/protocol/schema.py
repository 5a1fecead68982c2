"""Declared wire schemas: a request body checked against msgspec Structs, and the first failure turned into
an `InvalidRequest` that names the field the way the client's protocol does, in that protocol's words.

The schemas (`openai_schema`, `anthropic_schema`, `responses_schema`) say what each field must be: its type,
its bounds (`Meta(ge=..., min_length=...)`) and, where the type alone says too little, a `description` in
words ("a number between 0 and 2"), which is what an error says. Lists whose elements' `type` picks their
shape (content parts, blocks, input items, tools) are open: an `Open` declares the shapes daari reads and the
types it carries whole, checks each element against its own shape and leaves other types as sent.

msgspec stops at the first bad field and says where (`$.messages[0].content`); `_Failure` reads that back
into a path, and the path's declared description, the bad value and the style make the message:
- openai: `'messages[0].role' must be one of system, ..., got 'robot'` (OpenAI's param spelling);
- anthropic: `messages.0.role: Input should be 'user' or 'assistant'` (Anthropic's, which is pydantic's:
  "Field required", "Input should be a valid list", "Input should be less than or equal to 1").
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta
from msgspec import inspect as mi

from daari.errors import InvalidRequest

Style = Literal["openai", "anthropic"]
Path = tuple[str | int, ...]

# A bad value quoted back in an error: cut short (a 1 MB string is not echoed) and only a few levels deep (a
# deeply nested value must not make the error itself fail).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxlong = 3, 60, 60, 4, 4, 40


def check(value: object, schema: Any, style: Style, at: Path = ()) -> Any:
    """`value` as `schema` (a Struct or a type built of them), or `InvalidRequest` naming the first bad field.
    `at` is where `value` sits in the body (for checks of one element of an open list)."""
    try:
        return msgspec.convert(value, schema)
    except msgspec.ValidationError as exc:
        raise _Failure.read(str(exc)).error(value, schema, style, at) from None


class Shape(msgspec.Struct, gc=False):
    """The base of every declared request shape. Shapes live for one parse and hold no cycles, so the garbage
    collector need not track them (a parse makes one per message, block and part)."""


class Open:
    """The elements of an open list (content parts, blocks, input items, tools): objects whose `type` picks a
    shape daari reads (a Struct tagged with that type), a type daari knows and carries whole (`carried`), or a
    type it does not know, carried whole too.

    `check` answers, for each element in order, the element as its shape read it, or another object for an
    element carried whole (a `Carried_<type>` Struct, or None); readers test for the shapes they read
    (`type(x) is TextBlock`) and take any other element as sent. A whole list is checked in one msgspec call
    (through a holder Struct: msgspec keeps what it learnt of a Struct's types, not of a bare union's); a list
    holding a type no shape names, or a bad element, is checked element by element.
    """

    def __init__(self, *shapes: type[Shape], carried: Sequence[str] = (), element: str,
                 type_words: str = "a non-empty string",
                 untyped: tuple[str, type[Shape]] | None = None) -> None:
        """`untyped`: (a field, a shape): an element with that field and no type is read by that shape."""
        read = {_tag(s) for s in shapes}
        carried_shapes = tuple(msgspec.defstruct(f"Carried_{kind}", [], bases=(Shape,), tag_field="type", tag=kind)
                               for kind in carried if kind not in read)
        self._tags = frozenset((*read, *carried))
        self.union: Any = Annotated[Union[(*shapes, *carried_shapes)], Meta(description=element)]  # noqa: UP007
        self._one: Any = msgspec.defstruct("OpenElement", [("v", self.union)], bases=(Shape,))
        self.many: Any = msgspec.defstruct("OpenList", [("v", list[self.union])], bases=(Shape,))  # type: ignore[name-defined]
        self.type_words = type_words
        self.untyped = untyped

    def check(self, items: Sequence[Any], style: Style, at: Path) -> list[Any]:
        """The elements of the list at `at`, each as its shape read it (see the class)."""
        try:
            checked: list[Any] = msgspec.convert({"v": items}, self.many).v
            return checked
        except msgspec.ValidationError:  # a type no shape names (or a bad element): one at a time
            return [self.one(item, style, (*at, index)) for index, item in enumerate(items)]

    def one(self, item: Any, style: Style, at: Path) -> Any:
        """One element at `at`, as its shape read it; None for a type no shape names."""
        if isinstance(item, dict):
            kind = item.get("type")
            if type(kind) is str and kind and kind not in self._tags:
                return None  # a type no shape names: carried as sent (no exception raised per element)
            if self.untyped is not None and not kind and self.untyped[0] in item:
                return check(item, self.untyped[1], style, at)
        try:
            return msgspec.convert({"v": item}, self._one).v
        except msgspec.ValidationError as exc:
            failure = _Failure.read(str(exc))
            failure = _Failure(failure.kind, failure.path[1:], failure.text, failure.types, failure.bound,
                               failure.length)  # the path inside the holder
            return self._other(item, failure, style, at)

    def _other(self, item: Any, failure: _Failure, style: Style, at: Path) -> None:
        """An element no shape took: one of a type daari does not know (carried), or the element's fault."""
        if failure.path != ("type",):
            raise failure.error(item, self.union, style, at)
        if failure.kind == "choice" and item.get("type"):
            return None
        words = self.type_words if style == "openai" else None
        raise _Failure(failure.kind if failure.kind == "missing" else "type", failure.path, failure.text,
                       ("str",)).error(item, self.union, style, at, words)


def _tag(shape: type[msgspec.Struct]) -> object:
    return shape.__struct_config__.tag


def param(path: Path, style: Style) -> str:
    """A field path as the protocol spells it: `messages[0].content` (OpenAI) or `messages.0.content`."""
    out = ""
    for part in path:
        if style == "anthropic":
            out += f".{part}" if out else str(part)
        else:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def fail(message: str, path: Path, style: Style) -> InvalidRequest:
    return InvalidRequest(message, param=param(path, style))


# ---------------------------------------------------------------- reading msgspec's message back

_AT = re.compile(r"^(?P<text>.*?)(?: - at `(?:`?(?P<key>[^`]*)`? in `)?\$(?P<path>[^`]*)`)?$", re.S)
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\"((?:[^\"\\]|\\.)*)\"\]|\[(.*?)\]")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]*)`$")
_EXPECTED = re.compile(r"^Expected `(?P<types>[^`]*)`(?P<rest>.*?)(?:, got `(?P<got>[^`]*)`)?$", re.S)
_BOUND = re.compile(r"^\s*(?:of length )?(?P<op>[<>]=?)\s*(?P<value>\S+)$")
_CHOICE = re.compile(r"^Invalid (?:enum )?value (?P<value>.*)$")

_OPENAI_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
                 "array": "a list", "object": "an object", "null": "null"}
_ANTHROPIC_WORDS = {"str": "a valid string", "int": "a valid integer", "float": "a valid number",
                    "bool": "a valid boolean", "array": "a valid list", "object": "a valid dictionary",
                    "null": "null"}
_ANTHROPIC_BOUNDS = {">=": "greater than or equal to", ">": "greater than", "<=": "less than or equal to",
                     "<": "less than"}
_MISSING_VALUE = object()


@dataclass(frozen=True)
class _Failure:
    """msgspec's message, read: what kind of failure, where, and what it expected."""

    kind: Literal["missing", "type", "bound", "choice", "other"]
    path: Path
    text: str  # msgspec's text without the location
    types: tuple[str, ...] = ()  # expected JSON types, for "type" and "bound"
    bound: tuple[str, str] | None = None  # (operator, value); "length" bounds count items or characters
    length: bool = False

    @classmethod
    def read(cls, message: str) -> _Failure:
        match = _AT.match(message)
        text, raw_path = (match["text"], match["path"] or "") if match else (message, "")
        path: list[str | int] = []
        for name, index, quoted, other in _SEGMENT.findall(raw_path):
            path.append(name or (int(index) if index else quoted or other))
        if missing := _MISSING.match(text):
            return cls("missing", (*path, missing["field"]), text)
        if expected := _EXPECTED.match(text):
            types = tuple(t.strip() for t in expected["types"].split("|"))
            rest = expected["rest"]
            if bound := _BOUND.match(rest):
                return cls("bound", tuple(path), text, types, (bound["op"], bound["value"]), "length" in rest)
            return cls("type", tuple(path), text, types)
        if _CHOICE.match(text):
            return cls("choice", tuple(path), text)
        return cls("other", tuple(path), text)

    def error(self, value: object, schema: Any, style: Style, at: Path,
              description: str | None = None) -> InvalidRequest:
        path = (*at, *self.path)
        node = _node(_info(schema), self.path)
        if description is None and node is not None:
            description = _description(node)
        name = param(path, style)
        if style == "anthropic":
            text = _anthropic_text(self, description, node)
            return fail(f"{name}: {text}" if name else text, path, style)
        return fail(_openai_text(self, name, description, node, _value_at(value, self.path)), path, style)


def _info(schema: Any) -> mi.Type:
    """The schema's declared types (only read when a request failed; kept once read)."""
    try:
        return _cached_info(schema)
    except TypeError:  # an unhashable type
        return mi.type_info(schema)


@cache
def _cached_info(schema: Any) -> mi.Type:
    return mi.type_info(schema)


def _node(root: mi.Type, path: Path) -> mi.Type | None:
    """The declared type at `path` (Metadata kept on the last step, for its description)."""
    node: mi.Type | None = root
    for part in path:
        node = _step(node, part)
        if node is None:
            return None
    return node


def _unwrap(node: mi.Type) -> list[mi.Type]:
    """The alternatives a value at `node` may take (unions opened, metadata taken off)."""
    if isinstance(node, mi.Metadata):
        return _unwrap(node.type)
    if isinstance(node, mi.UnionType):
        return [alt for member in node.types for alt in _unwrap(member)]
    return [node]


def _step(node: mi.Type | None, part: str | int) -> mi.Type | None:
    alts = _unwrap(node) if node is not None else []
    tags = tuple(alt.tag for alt in alts if isinstance(alt, mi.StructType) and alt.tag_field == part)
    if tags:  # the tag of a tagged union: one of its members' tags
        return mi.LiteralType(values=tags)
    for alt in alts:
        if isinstance(part, int) and isinstance(alt, mi.ListType):
            return alt.item_type
        if isinstance(part, str) and isinstance(alt, mi.StructType):
            for field in alt.fields:
                if field.encode_name == part:
                    return field.type
        if isinstance(part, str) and isinstance(alt, mi.DictType):
            return alt.value_type
    return None


def _description(node: mi.Type) -> str | None:
    """The declared words for a field: on its type, or on the non-null member of an optional one."""
    if isinstance(node, mi.Metadata):
        described = (node.extra_json_schema or {}).get("description")
        return described if isinstance(described, str) else _description(node.type)
    if isinstance(node, mi.UnionType):
        for member in node.types:
            if (described := _description(member)) is not None:
                return described
    return None


def _choices(node: mi.Type | None) -> list[str]:
    return [repr(v) for alt in (_unwrap(node) if node is not None else []) if isinstance(alt, mi.LiteralType)
            for v in alt.values]


def _value_at(value: object, path: Path) -> object:
    for part in path:
        if isinstance(part, int) and isinstance(value, list) and part < len(value):
            value = value[part]
        elif isinstance(part, str) and isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING_VALUE
    return value


def _show(value: object) -> str:
    return _SHOWN.repr(value)


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _type_words(failure: _Failure, words: Mapping[str, str]) -> str:
    named = [words.get(t, t) for t in failure.types if t != "null"] or [words["null"]]
    return _join(named)


def _node_words(node: mi.Type | None) -> str | None:
    """A declared type in OpenAI-style words ("a non-empty string", "a list", "one of 'a', 'b'")."""
    words: list[str] = []
    for alt in _unwrap(node) if node is not None else []:
        if isinstance(alt, mi.NoneType):
            continue
        if isinstance(alt, mi.LiteralType):
            words.append("one of " + ", ".join(repr(v) for v in alt.values))
        elif isinstance(alt, mi.StrType) and alt.min_length:
            words.append("a non-empty string")
        else:
            kind = {mi.StrType: "str", mi.IntType: "int", mi.FloatType: "float", mi.BoolType: "bool",
                    mi.ListType: "array", mi.DictType: "object", mi.StructType: "object"}.get(type(alt))
            if kind is None:
                return None
            words.append(_OPENAI_WORDS[kind])
    return _join(list(dict.fromkeys(words))) if words else None


def _openai_text(failure: _Failure, name: str, description: str | None, node: mi.Type | None,
                 shown: object) -> str:
    if failure.kind == "missing":
        expected = description or _node_words(node)
        return f"'{name}' is required" + (f" and must be {expected}" if expected else "")
    if description is None:
        if failure.kind == "choice":
            description = "one of " + ", ".join(_choices(node)) if _choices(node) else None
        elif failure.kind == "bound" and failure.bound is not None:
            op, bound = failure.bound
            if failure.length and op == ">=" and bound == "1":
                description = "a non-empty " + _type_words(failure, _OPENAI_WORDS).removeprefix("a ")
            else:
                counted = " in length" if failure.length else ""
                description = f"{_type_words(failure, _OPENAI_WORDS)}{counted} {op} {bound}"
        elif failure.kind == "type":
            description = _type_words(failure, _OPENAI_WORDS)
    if description is None:
        return f"'{name}': {failure.text}"
    got = f", got {_show(shown)}" if shown is not _MISSING_VALUE else ""
    return f"'{name}' must be {description}{got}"


def _anthropic_text(failure: _Failure, description: str | None, node: mi.Type | None) -> str:
    if description is not None:
        text = f"Input should be {description}"
    elif failure.kind == "missing":
        text = "Field required"
    elif failure.kind == "choice" and _choices(node):
        text = f"Input should be {_join(_choices(node))}"
    elif failure.kind == "bound" and failure.bound is not None:
        op, bound = failure.bound
        if failure.length:
            unit = "item" if "array" in failure.types else "character"
            text = f"{'List' if unit == 'item' else 'String'} should have at least {bound} {unit}" + (
                "s" if bound != "1" else "") if op == ">=" else failure.text
        else:
            text = f"Input should be {_ANTHROPIC_BOUNDS.get(op, op)} {bound.removesuffix('.0')}"
    elif failure.kind == "type":
        text = f"Input should be {_type_words(failure, _ANTHROPIC_WORDS)}"
    else:
        text = failure.text
    return text
