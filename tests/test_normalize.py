"""Normalization folds only what cannot change meaning."""

from daari.protocol.chat import Message, ToolCall
from daari.routing.normalize import canonical_arguments, normalize_message, normalize_text


def test_folds_line_ends_trailing_space_and_blank_runs() -> None:
    assert normalize_text("  hello \r\nworld\t\r\n\n\n\nbye  ") == "hello\nworld\n\nbye"


def test_folds_inner_space_runs_in_prose_but_keeps_indentation() -> None:
    assert normalize_text("list   docker\t\tcontainers") == "list docker containers"
    assert normalize_text("def f():\n    return  1") == "def f():\n    return 1"


def test_keeps_interior_spacing_inside_code_fences() -> None:
    text = "fix this:\n```python\nx = 'a  b'\n```\nplease  now"
    assert normalize_text(text) == "fix this:\n```python\nx = 'a  b'\n```\nplease now"


def test_keeps_case_and_punctuation() -> None:
    assert normalize_text("Hello, World!") != normalize_text("hello world")


def test_tool_results_are_not_folded() -> None:
    msg = Message(role="tool", content="a  b \n", tool_call_id="c1")
    assert normalize_message(msg).content == "a  b \n"


def test_tool_call_arguments_become_canonical_json() -> None:
    msg = Message(role="assistant", tool_calls=[ToolCall("c1", "f", '{"b": 1, "a": [1, 2]}')])
    assert normalize_message(msg).tool_calls[0].arguments == '{"a":[1,2],"b":1}'
    assert canonical_arguments("not json") == "not json"


def test_text_parts_are_normalized_and_images_kept() -> None:
    image = {"type": "image", "media_type": "image/png", "data": "AAA "}
    msg = Message(role="user", content=[{"type": "text", "text": " hi  there "}, image])
    assert normalize_message(msg).content == [{"type": "text", "text": "hi there"}, image]
