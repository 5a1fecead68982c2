"""L2 generic rules: conversions answered without a model; anything they cannot parse falls through."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml

from daari.rules.lenient import NotALiteral, parse_lenient
from daari.rules.safe_yaml import UnsafeYaml, load_yaml
from daari.rules.transforms import apply_rules
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CAP = 256 * 1024


def test_lenient_literals_become_json() -> None:
    assert parse_lenient("{foo: 1, 'bar': [1, 2,], baz: None, t: True, // note\n}") == \
        {"foo": 1, "bar": [1, 2], "baz": None, "t": True}
    assert parse_lenient("{'a': (1, 2.5e3), \"b\": 'it\\'s', c: -0x10}") == {"a": [1, 2500.0], "b": "it's", "c": -16}
    assert parse_lenient('{"plain": "json \\u00e9"}') == {"plain": "json \u00e9"}


@pytest.mark.parametrize("text", ["", "{a: 1", "{a 1}", "[1 2]", "{a: foo}", "{a: 1} extra", "1e999", "{a: `x`}",
                                  "[" * 100 + "]" * 100])
def test_lenient_refuses_what_is_not_a_literal(text: str) -> None:
    with pytest.raises(NotALiteral):
        parse_lenient(text)


def test_yaml_aliases_and_deep_nesting_are_refused() -> None:
    laughs = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n"
    with pytest.raises(UnsafeYaml, match="aliases"):
        load_yaml(laughs)
    with pytest.raises(UnsafeYaml, match="deeply"):
        load_yaml("[" * 200 + "]" * 200)
    with pytest.raises(UnsafeYaml):
        load_yaml("!!python/object/apply:os.system ['true']")
    assert load_yaml("a: [1, {b: 2}]") == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize(("message", "rule_id", "expected"), [
    ("Format as JSON: {foo: 1}", "L2-JSON-LENIENT", {"foo": 1}),
    ("please format this as json:\n{'a': [1, 2,], b: None}", "L2-JSON-LENIENT", {"a": [1, 2], "b": None}),
    ("Convert this YAML to JSON:\n\n```yaml\nserver:\n  host: 127.0.0.1\n  port: 8787\n```", "L2-YAML-JSON",
     {"server": {"host": "127.0.0.1", "port": 8787}}),
    ("convert yaml to json: a: 1", "L2-YAML-JSON", {"a": 1}),
    ("Pretty-print this JSON {\"a\":[1,2]}", "L2-JSON-PRETTY", {"a": [1, 2]}),
    ("minify this json:\n{ \"a\" : 1 ,\n \"b\": [ 1 ] }", "L2-JSON-MINIFY", {"a": 1, "b": [1]}),
])
def test_conversions_to_json(message: str, rule_id: str, expected: object) -> None:
    found = apply_rules(message, CAP)
    assert found is not None and found.rule_id == rule_id
    assert json.loads(found.text) == expected


def test_minify_and_pretty_shapes() -> None:
    minified = apply_rules('minify this JSON: {"a": 1, "b": [1, 2]}', CAP)
    assert minified is not None and minified.text == '{"a":1,"b":[1,2]}'
    pretty = apply_rules('pretty print this json: {"a":{"b":1}}', CAP)
    assert pretty is not None and pretty.text == '{\n  "a": {\n    "b": 1\n  }\n}'


def test_json_to_yaml() -> None:
    found = apply_rules('Convert this JSON to YAML:\n```json\n{"name": "daari", "tiers": ["L3", "L6"]}\n```', CAP)
    assert found is not None and found.rule_id == "L2-JSON-YAML"
    assert yaml.safe_load(found.text) == {"name": "daari", "tiers": ["L3", "L6"]}


@pytest.mark.parametrize("message", [
    "Convert this CSV to JSON:\n\nname,language\nAda,Python",  # not a conversion the rules know
    "Convert this list to JSON: apples, pears and plums",  # prose, not a literal
    "Convert this YAML to JSON: a: &x 1\nb: *x",  # alias refused
    "Convert this YAML to JSON and explain each field: a: 1",  # more than the instruction
    "Format as JSON and add a field c: {a: 1}",
    "Convert this YAML to JSON:\n```yaml\na: 1\n```\nthen explain it",  # text outside the fence
    "format json",  # no data
    "Convert this YAML to JSON: just a sentence",  # a scalar, not a document
    "Why does my JSON {a: 1} not parse?",
    "pretty print this json: {a: 1}",  # not JSON (pretty-print is strict)
    "convert this json to yaml: {\"a\": NaN}",
])
def test_what_rules_cannot_do_falls_through(message: str) -> None:
    assert apply_rules(message, CAP) is None


def test_size_cap_falls_through() -> None:
    big = "Format as JSON: [" + ",".join(["1"] * 20000) + "]"
    assert apply_rules(big, CAP) is not None
    assert apply_rules(big, 1024) is None


async def test_rules_answer_through_the_server_in_both_protocols_and_streams(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            message = [{"role": "user", "content": "Format as JSON: {foo: 1}"}]
            plain = await client.post("/v1/chat/completions", json={"model": "m", "messages": message})
            streamed = await client.post("/v1/chat/completions",
                                         json={"model": "m", "messages": message, "stream": True})
            anthropic = await client.post("/v1/messages", json={"model": "m", "max_tokens": 100,
                                                                "messages": message})
            fallthrough = await client.post("/v1/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "Convert this CSV to JSON:\na,b\n1,2"}]})
    meta = plain.json()["daari_meta"]
    assert meta["tier"] == "L2" and meta["rule_id"] == "L2-JSON-LENIENT" and meta["task_type"] == "rule"
    assert json.loads(plain.json()["choices"][0]["message"]["content"]) == {"foo": 1}
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert json.loads(text) == {"foo": 1} and streamed.headers["x-daari-tier"] == "L2"
    assert anthropic.json()["daari_meta"]["tier"] == "L2"
    assert json.loads(anthropic.json()["content"][0]["text"]) == {"foo": 1}
    assert fallthrough.json()["daari_meta"]["tier"] == "L3"
    assert len(fake.requests) == 1  # only the CSV request reached a model


async def test_rules_can_be_turned_off(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             rules={"enabled": False})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            reply = await client.post("/v1/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "Format as JSON: {foo: 1}"}]})
    assert reply.json()["daari_meta"]["tier"] == "L3"
