"""The per-request rules' cheap forms (routing/folded.py: lower-cased twins of case-insensitive regexes, word
gates, loops for generators) against the forms they replaced, on generated text: they must agree on every text,
the folding characters ("ſ", "ı", "İ", the Kelvin sign) and upper case included."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daari import task_types as tt
from daari.routing import classifier, client_shapes, confidence
from daari.routing.folded import Folded, lower_pattern, lower_text

FOLDING = ["ſ", "ı", "İ", "K", "é", "—", "–"]
SEPARATORS = [" ", " ", " ", "\n", "-", ", ", ". ", "? ", "`", "\"", ":", "  "]


def _vocabulary(*patterns: re.Pattern[str]) -> list[str]:
    """The words the patterns are made of, in three cases, with digits and the folding characters."""
    words = {w for p in patterns for w in re.findall(r"[A-Za-z]{2,}", p.pattern)}
    words -= {"s", "w", "b", "d"}
    cased = [v for w in sorted(words) for v in (w, w.upper(), w.capitalize())]
    return [*cased, "a", "I", "the", "this", "is", "it", "of", "to", "3", "42", "500", "1-3", "2 to 5", *FOLDING]


def _texts(vocabulary: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 14))]
        if rng.random() < 0.2:  # a folding character inside a word
            at = rng.randint(0, len(words))
            words[at:at] = [rng.choice(vocabulary) + rng.choice(FOLDING) + rng.choice(vocabulary)]
        texts.append("".join(w + rng.choice(SEPARATORS) for w in words))
    return texts


CLASSIFIER_RULES = [classifier.CLASSIFY, classifier.EXTRACT, classifier.TRANSFORM, classifier.HEAVY,
                    classifier.CODE_WORK, client_shapes.SIDE_CALL, confidence.REFUSAL]


@pytest.mark.parametrize("pattern", CLASSIFIER_RULES, ids=lambda p: p.pattern[:30])
def test_a_lowered_twin_finds_what_the_case_insensitive_regex_finds(pattern: re.Pattern[str]) -> None:
    folded = Folded(pattern)
    outcomes = set()
    for text in _texts(_vocabulary(pattern), 3000, seed=len(pattern.pattern)):
        expected = pattern.search(text)
        lower = lower_text(text)
        assert folded.found(text, lower) == (expected is not None), text
        got = folded.search(text, lower)
        assert (got and got.span()) == (expected and expected.span()), text
        assert bool(folded.match(text, lower)) == bool(pattern.match(text)), text
        outcomes.add(expected is not None)
    assert outcomes == {True, False}


@pytest.mark.parametrize(("pattern", "hints"), [
    (classifier.HEAVY, classifier.HEAVY_HINTS), (classifier.CLASSIFY, classifier.CLASSIFY_HINTS),
    (classifier.EXTRACT, classifier.EXTRACT_HINTS), (classifier.TRANSFORM, classifier.TRANSFORM_HINTS),
    (classifier.CODE_WORK, classifier.CODE_WORK_HINTS), (client_shapes.SIDE_CALL, client_shapes.SIDE_CALL_HINTS)],
    ids=["heavy", "classify", "extract", "transform", "code", "side call"])
def test_hints_gate_only_texts_the_regex_cannot_match(pattern: re.Pattern[str], hints: tuple[str, ...]) -> None:
    gated = Folded(pattern, hints)
    outcomes, gated_out = set(), 0
    rng = random.Random(11)  # short texts too: a match then holds fewer words of the list than one in a long text
    vocabulary = [*_vocabulary(pattern), "categorize", "categorise", "camelCase", "debugging", "refactoring"]
    short = ["".join(w + rng.choice(SEPARATORS) for w in rng.choices(vocabulary, k=rng.randint(1, 5)))
             for _ in range(20000)]
    for text in [*_texts(_vocabulary(pattern), 6000, seed=7), *short]:
        expected = pattern.search(text) is not None
        lower = lower_text(text)
        assert gated.found(text, lower) == expected, text
        outcomes.add(expected)
        gated_out += lower is not None and not any(hint in lower for hint in hints)
    assert outcomes == {True, False}
    assert gated_out, "no text was left out by the gate: the test does not test it"


def _keyword_outcome_by_regex(text: str, tokens: int) -> tuple[str, str] | None:
    """The keyword rules as written before: each case-insensitive regex on the text."""
    C = classifier  # noqa: N806
    rule_id = None
    if tokens < C.CLASSIFY_MAX_TOKENS and C.CLASSIFY.search(text):
        rule_id = "R-A1"
    elif tokens < C.TRANSFORM_MAX_TOKENS and (C.TRANSFORM.search(text) or C.EXTRACT.search(text)):
        rule_id = "R-A2"
    elif C.HEAVY.search(text):
        rule_id = "R-P1"
    elif C.CODE_WORK.search(text):
        rule_id = "R-P2"
    if rule_id is None:
        return None
    task_type = C.RULE_OUTCOME[rule_id][0]
    if rule_id == "R-A2" and C.EXTRACT.search(text) and not C.TRANSFORM.search(text):
        task_type = tt.EXTRACT
    return rule_id, task_type


def test_the_keyword_rules_match_their_regexes() -> None:
    vocabulary = _vocabulary(classifier.CLASSIFY, classifier.EXTRACT, classifier.TRANSFORM, classifier.HEAVY,
                             classifier.CODE_WORK)
    seen = set()
    for i, text in enumerate(_texts(vocabulary, 4000, seed=23)):
        tokens = (10, 100, 300)[i % 3]
        expected = _keyword_outcome_by_regex(text, tokens)
        assert classifier.keyword_outcome(text, tokens) == expected, (text, tokens)
        seen.add(expected[0] if expected else None)
    assert seen == {None, "R-A1", "R-A2", "R-P1", "R-P2"}


@given(st.lists(st.sampled_from(_vocabulary(client_shapes.SIDE_CALL)), max_size=20),
       st.lists(st.sampled_from(SEPARATORS), min_size=1, max_size=3))
def test_the_side_call_wording_matches_its_regex(words: list[str], separators: list[str]) -> None:
    text = "".join(w + separators[i % len(separators)] for i, w in enumerate(words))
    expected = bool(text) and len(text) <= client_shapes.SIDE_CALL_SCAN_CHARS and \
        client_shapes.SIDE_CALL.search(text) is not None
    assert client_shapes.is_side_call_prompt(text) == expected


def test_lowering_a_pattern_keeps_its_escapes() -> None:
    assert lower_pattern(r"\bFOO\S+\W\Z[A-Z]") == r"\bfoo\S+\W\Z[a-z]"
    with pytest.raises(ValueError):
        lower_pattern(r"(?P<Name>x)")
    with pytest.raises(ValueError):
        Folded(re.compile("x"))
    assert lower_text("İstanbul") is None and lower_text("Straße ſ") is None
    assert lower_text("KELVIN \u212a") == "kelvin k"


def test_the_refusal_gate_finds_every_refusal_the_regex_finds() -> None:
    outcomes = set()
    vocabulary = _vocabulary(confidence.REFUSAL)
    for text in _texts(vocabulary, 6000, seed=11):
        head = text.strip()[:confidence.REFUSAL_WINDOW_CHARS]
        expected = confidence.REFUSAL.search(head) is not None
        assert confidence.is_refusal(text) == expected, text
        outcomes.add(expected)
    assert outcomes == {True, False}


def _is_echo_by_every_message(text: str, last_user: str, history: list[str]) -> bool:
    """is_echo as written before: every message of the history normalized."""
    norm = confidence._norm
    reply, prompt = norm(text), norm(last_user)
    if not reply:
        return False
    if any(reply == norm(h) for h in history if h.strip()):
        return True
    if not prompt:
        return False
    if reply in prompt and len(reply) >= confidence.ECHO_MIN_SHARE * len(prompt):
        return True
    return prompt in reply and len(reply) - len(prompt) <= confidence.ECHO_MAX_EXTRA_CHARS


def test_the_echo_check_skips_only_messages_that_cannot_be_the_reply() -> None:
    rng = random.Random(5)
    words = ["fix", "the", "Bug", "İ", "i", "  ", "\n", ".", "ok", "ſ", "done"]
    outcomes = set()
    for _ in range(4000):
        history = ["".join(rng.choice(words) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 4))]
        text = rng.choice([*history, ""]) if history and rng.random() < 0.5 else \
            "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        text = rng.choice([text, text.upper(), " " + text + " ", text.replace(" ", "  ")])
        expected = _is_echo_by_every_message(text, "", history)
        assert confidence.is_echo(text, "", history) == expected, (text, history)
        outcomes.add(expected)
    assert outcomes == {True, False}


def test_no_l2_rule_matches_a_message_without_json() -> None:
    """apply_rules skips its triggers for a message without "json": no trigger matches one, and its answers are
    the triggers' own on instructions built from their words (the target spelled many ways)."""
    from daari.rules.transforms import RULES, apply_rules, payload_of

    def by_every_trigger(message: str) -> tuple[str, str] | None:
        for rule in RULES:
            if match := rule.trigger.match(message):
                payload = payload_of(message[match.end():])
                try:
                    return (rule.rule_id, rule.convert(payload)) if payload is not None else None
                except (ValueError, TypeError, RecursionError):
                    return None
        return None

    rng = random.Random(3)
    leads = ["", "please ", "Could you, ", "hey pls "]
    verbs = ["convert", "Turn", "minify", "pretty-print", "format", "FORMAT", "give me", "rewrite", "translate"]
    things = ["", "this ", "the following ", "it ", "my "]
    targets = ["json", "JSON", "jſon", "JSOn", "yaml", "YML", "j son", "jsön", "JSON to yaml", "yaml to json"]
    data = [":\n{\"a\": 1}", ": a: 1\nb: [1, 2]", "\n```\n[1,2]\n```", " {'a': True}", "", ": not data {"]
    answered = 0
    for _ in range(3000):
        message = (rng.choice(leads) + rng.choice(verbs) + " " + rng.choice(things) + rng.choice(["", "as ", "to "])
                   + rng.choice(targets) + rng.choice(["", " to " + rng.choice(targets)]) + rng.choice(data))
        expected = by_every_trigger(message)
        got = apply_rules(message, 65536)
        assert (got and (got.rule_id, got.text)) == expected, message
        if lower_text(message) is not None and "json" not in message.lower():
            assert expected is None, message
        answered += expected is not None
    assert answered > 100


def test_the_session_prefix_reads_each_message_once_and_says_the_same() -> None:
    from daari.protocol.chat import ChatRequest, Message, Tool
    from daari.protocol.key_fields import BILLING_HEADER_PREFIX, is_billing_block
    from daari.sessions.identity import prefix_text

    rng = random.Random(9)
    texts = ["You are Claude Code.", BILLING_HEADER_PREFIX + " cch=1;", "  " + BILLING_HEADER_PREFIX, "", "hi",
             "fix it"]
    for _ in range(2000):
        messages = [Message(rng.choice(["system", "user", "assistant", "tool"]), rng.choice(texts))  # type: ignore[arg-type]
                    for _ in range(rng.randint(0, 6))]
        tools = [Tool(name, None, {}) for name in rng.sample(["bash", "read", "edit"], rng.randint(0, 3))]
        request = ChatRequest(messages=messages, model="m", tools=tools)
        system = [m.text() for m in messages if m.role == "system" and not is_billing_block(m.text())]
        first_user = next((m.text() for m in messages if m.role == "user"), "")
        assert prefix_text(request) == "\x1e".join([*system, ",".join(t.name for t in tools), first_user])
