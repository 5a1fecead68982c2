"""The privacy package's pure parts: what the detector finds and leaves, placeholders, request redaction (both the
neutral messages and the body as sent), never_send, which tiers are remote, and stream restoration at every split."""

from __future__ import annotations

import json

import pytest

from daari.config import TierConfig
from daari.privacy.detect import find_secrets
from daari.privacy.never_send import matching_path, withhold
from daari.privacy.redact import Redaction, Redactor, placeholder, scrub
from daari.privacy.remote import is_remote
from daari.privacy.restore import Restorer
from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.chat import ChatRequest, Completion, Message, ToolCall
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart, assemble
from daari.protocol.openai_wire import parse_chat_request
from tests.privacy_fixtures import SECRETS, tool_output

KEY = b"k" * 32


def parse_openai(body: dict[str, object]) -> ChatRequest:
    return parse_chat_request(body, {})


def parse_anthropic(body: dict[str, object]) -> ChatRequest:
    return parse_messages_request(body, {})


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_found_whole(kind: str) -> None:
    text = tool_output()
    found = {(f.kind, text[f.start:f.end]) for f in find_secrets(text)}
    assert (kind, SECRETS[kind]) in found


@pytest.mark.parametrize("line", [
    "api_key = os.environ['OPENAI_API_KEY']",
    "token = request.headers.get('authorization')",
    "password: str | None = None",
    'self.secret = load_secret(data_dir)',
    'SECRET_KEY = "changeme-in-production"',
    "OPENAI_API_KEY=your-api-key-here",
    "export GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "commit 3f9a1c2b7d01e4f5a6b7c8d9e0f1a2b3c4d5e6f7 token refresh",
    "max_tokens: Annotated[int, Ge(1)] = 512",
    "the key is in the README.md of the project",
    "pip install sk-learn-tools==1.2.3",
])
def test_ordinary_code_is_left_alone(line: str) -> None:
    assert [line[f.start:f.end] for f in find_secrets(line)] == []


def test_placeholders_are_keyed_stable_and_not_found_again() -> None:
    secret = SECRETS["GITHUB_TOKEN"]
    mark = placeholder("GITHUB_TOKEN", secret, KEY)
    assert mark == placeholder("GITHUB_TOKEN", secret, KEY) != placeholder("GITHUB_TOKEN", secret, b"other")
    assert secret not in mark and find_secrets(f"GITHUB_TOKEN={mark}") == []
    redactor = Redactor(KEY)
    once = redactor.text(tool_output(), Redaction())
    assert redactor.text(once, Redaction()) == once  # idempotent: a redacted history redacts to itself
    assert Redactor(KEY).text(tool_output(), Redaction()) == once  # the same in a new process (same data dir)


def test_a_known_secret_is_redacted_out_of_context() -> None:
    redactor = Redactor(KEY)
    redactor.text(tool_output(), Redaction())
    out = Redaction()
    bare = redactor.text(f"run psql with {SECRETS['SECRET']}", out)
    assert SECRETS["SECRET"] not in bare and out.secrets and out.kinds["SECRET"] == 1


def test_openai_request_is_redacted_in_messages_and_body() -> None:
    arguments = json.dumps({"env": SECRETS["PRIVATE_KEY"]})
    request = parse_openai({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": tool_output()}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "write", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]})
    redacted, found = Redactor(KEY).request(request)
    for text in (repr(redacted.messages), json.dumps(redacted.raw)):
        assert not any(s in text or json.dumps(s)[1:-1] in text for s in SECRETS.values())
    # Arguments stay JSON: the key was found in the decoded string, not in its escaped form.
    assert json.loads(redacted.messages[1].tool_calls[0].arguments)["env"].startswith("REDACTED_PRIVATE_KEY_")
    assert found.count == len(SECRETS) + 1  # the private key twice: in the user text and in the arguments
    assert request.messages[0].content != redacted.messages[0].content  # the client's request is left as it was
    assert SECRETS["JWT"] in json.dumps(request.raw)


def test_anthropic_thinking_and_signatures_are_left_alone() -> None:
    thinking = {"type": "thinking", "thinking": f"the key {SECRETS['GITHUB_TOKEN']}", "signature": "sig"}
    request = parse_anthropic({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": tool_output()},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": "go on"}]})
    redacted, _ = Redactor(KEY).request(request)
    assert redacted.raw["messages"][1]["content"][0] == thinking
    assert SECRETS["GITHUB_TOKEN"] not in json.dumps(redacted.raw["messages"][0])


def test_scrub_for_the_log() -> None:
    assert scrub(f"token {SECRETS['OPENAI_KEY']} fails", KEY).startswith("token REDACTED_OPENAI_KEY_")


@pytest.mark.parametrize(("arguments", "path"), [
    ('{"file_path": "/home/me/app/.env.local"}', "/home/me/app/.env.local"),
    ('{"command": "cat ./.env | grep DB"}', "./.env"),
    ('{"command": "openssl x509 -in certs/server.pem -text"}', "certs/server.pem"),
    ('{"path": "src/secrets/prod.json"}', "src/secrets/prod.json"),
    ('{"command": "ls -la"}', None),
    ('{"file_path": "docs/environment.md"}', None),
    ("not json: cat .env", ".env"),
])
def test_never_send_matches_paths_in_arguments(arguments: str, path: str | None) -> None:
    assert matching_path(arguments, [".env*", "*.pem", "*/secrets/*"]) == path


def test_never_send_replaces_only_the_matching_result() -> None:
    request = parse_openai({"model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"path": ".env"}'}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"path": "README.md"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "DB_PASSWORD=hunter2"},
        {"role": "tool", "tool_call_id": "b", "content": "# readme"}]})
    withheld, count = withhold(request, [".env"])
    assert count == 1
    assert "privacy.never_send" in withheld.messages[1].text() and withheld.messages[2].text() == "# readme"
    assert "hunter2" not in json.dumps(withheld.raw) and "# readme" in json.dumps(withheld.raw)


@pytest.mark.parametrize(("tier", "config", "remote"), [
    ("L6", TierConfig(executor="anthropic", base_url="https://api.anthropic.com"), True),
    ("L6", TierConfig(executor="openai", base_url="http://127.0.0.1:4000/v1"), True),  # a gateway to a provider
    ("L3", TierConfig(executor="embedded"), False),
    ("L4", TierConfig(executor="ollama", base_url="http://localhost:11434"), False),
    ("L4", TierConfig(executor="openai", base_url="http://[::1]:8080/v1"), False),
    ("L4", TierConfig(executor="ollama", base_url="http://192.168.1.20:11434"), True),  # another machine
    ("L5", TierConfig(executor="openai", base_url="https://api.openai.com/v1"), True),
    ("L5", TierConfig(executor="openai", base_url="http://localhost:4000/v1", remote=True), True),
    ("L6", TierConfig(executor="openai", base_url="https://api.openai.com/v1", remote=False), False),
])
def test_which_tiers_are_remote(tier: str, config: TierConfig, remote: bool) -> None:
    assert is_remote(tier, config) is remote


def _secrets() -> tuple[dict[str, str], str, str]:
    marks = {placeholder("PRIVATE_KEY", SECRETS["PRIVATE_KEY"], KEY): SECRETS["PRIVATE_KEY"],
             placeholder("GITHUB_TOKEN", SECRETS["GITHUB_TOKEN"], KEY): SECRETS["GITHUB_TOKEN"]}
    key_mark, token_mark = marks
    return marks, key_mark, token_mark


def test_every_split_of_a_placeholder_is_restored() -> None:
    marks, key_mark, token_mark = _secrets()
    text = f"use {token_mark} then {key_mark}."
    arguments = json.dumps({"command": f"deploy {key_mark} {token_mark}"})
    for cut in range(1, len(text)):
        restorer = Restorer(marks)
        events: list[Event] = []
        for event in (TextDelta(text[:cut]), TextDelta(text[cut:]), ToolCallStart(0, "c", "bash"),
                      ToolCallDelta(0, arguments[:cut]), ToolCallDelta(0, arguments[cut:]), Finish("tool_calls")):
            events += restorer.feed(event)
        completion = assemble(events)
        assert completion.text == f"use {SECRETS['GITHUB_TOKEN']} then {SECRETS['PRIVATE_KEY']}."
        assert json.loads(completion.tool_calls[0].arguments)["command"] == (
            f"deploy {SECRETS['PRIVATE_KEY']} {SECRETS['GITHUB_TOKEN']}")
        assert restorer.restored == 4


def test_a_held_piece_that_is_no_placeholder_comes_out_unchanged() -> None:
    marks, _, token_mark = _secrets()
    restorer = Restorer(marks)
    assert restorer.feed(TextDelta("see REDACT")) == [TextDelta("see ")]
    assert restorer.feed(TextDelta("ION notes")) == [TextDelta("REDACTION notes")]
    assert restorer.feed(TextDelta("tail " + token_mark[:9])) == [TextDelta("tail ")]
    assert assemble(restorer.feed(Finish("stop"))).text == token_mark[:9]  # flushed as written
    assert restorer.restored == 0


def test_anthropic_native_events_are_restored_per_block() -> None:
    marks, key_mark, token_mark = _secrets()
    restorer = Restorer(marks)
    partial = json.dumps({"command": f"echo {key_mark}"})
    out: list[Event] = []
    deltas = [("text_delta", "text", f"token {token_mark[:10]}"), ("text_delta", "text", token_mark[10:])]
    for kind, field_name, piece in deltas:
        out += restorer.feed(NativeEvent("anthropic", "content_block_delta", {
            "type": "content_block_delta", "index": 0, "delta": {"type": kind, field_name: piece}}))
    out += restorer.feed(NativeEvent("anthropic", "content_block_stop", {"type": "content_block_stop", "index": 0}))
    for piece in (partial[:15], partial[15:]):
        out += restorer.feed(NativeEvent("anthropic", "content_block_delta", {
            "type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}}))
    out += restorer.feed(NativeEvent("anthropic", "content_block_stop", {"type": "content_block_stop", "index": 1}))
    thinking = NativeEvent("anthropic", "content_block_delta", {
        "type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": token_mark}})
    assert restorer.feed(thinking) == [thinking]  # signed by the provider: left as it saw it
    texts = [e.data["delta"].get("text", "") for e in out if e.name == "content_block_delta"]
    jsons = [e.data["delta"].get("partial_json", "") for e in out if e.name == "content_block_delta"]
    assert "".join(texts) == f"token {SECRETS['GITHUB_TOKEN']}"
    assert json.loads("".join(jsons)) == {"command": f"echo {SECRETS['PRIVATE_KEY']}"}
    whole = {"type": "message", "content": [{"type": "text", "text": token_mark},
                                            {"type": "tool_use", "id": "t", "name": "bash",
                                             "input": {"command": key_mark}}]}
    restored = restorer.feed(NativeEvent("anthropic", "message", whole))[0]
    assert isinstance(restored, NativeEvent)
    assert restored.data["content"][1]["input"]["command"] == SECRETS["PRIVATE_KEY"]


def test_completion_helpers_unchanged() -> None:
    assert Completion(tool_calls=[ToolCall("a", "b", "{}")]).to_json()["tool_calls"][0]["id"] == "a"
    assert Message("user", "x").text() == "x"


def test_a_long_token_beside_a_word_is_found_whole() -> None:
    token = "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kM9nP2rS5uV8xY1Ab3dE6gH9jK2"  # runs past the 40-character window
    text = f"curl -H 'Authorization: Bearer {token}' https://api.example.com"
    assert [text[f.start:f.end] for f in find_secrets(text)] == [token]


def test_a_cut_off_private_key_stops_at_its_base64() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAq7Lm2Zx9Vb4\nTn1Yw8Pc3Sd6J==\n$ echo done - ok"
    found = find_secrets(text)
    assert len(found) == 1 and text[found[0].end:].startswith("$ echo done")
    many = "-----BEGIN PRIVATE KEY-----\n" * 50
    assert len(find_secrets(many)) == 50  # each BEGIN its own (cut-off) block, none swallowing the next


def test_words_inside_long_names_find_nothing_and_overlaps_resolve() -> None:
    assert find_secrets("token" * 2000) == []
    text = f"AWS_ACCESS_KEY_ID={SECRETS['AWS_ACCESS_KEY']} " * 300
    found = find_secrets(text)
    assert [f.kind for f in found] == ["AWS_ACCESS_KEY"] * 300  # the format wins over the assignment each time
