"""Confidence scoring: the heuristic gate, the logprob mapping, self-evaluation parsing, the pass rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daari.config import ConfidenceConfig, config_from_dict
from daari.errors import ConfigError
from daari.routing.confidence import (
    SELF_EVAL_INSTRUCTION,
    answer_confidence,
    answer_gate,
    heuristic_confidence,
    is_acknowledgement,
    is_echo,
    is_refusal,
    logprob_confidence,
    parse_self_eval,
    passing_score,
    self_eval_messages,
)


@pytest.mark.parametrize("text", [
    "I cannot help with that request.",
    "I can't do that.",
    "I can’t answer questions about this topic.",
    "i cannot browse the internet, but here is what I know",
    "I'm sorry, but I am not able to assist with that.",
    "Sorry, but I won't write that.",
    "As an AI language model, I do not have opinions.",
    "I am unable to access external websites.",
    "I'm not able to run code.",
    "I must decline this request politely.",
    "I don't know the answer to that question.",
    "Sure! Well... actually, I cannot provide that information.",
])
def test_refusals_score_zero(text: str) -> None:
    assert is_refusal(text)
    assert heuristic_confidence(text) == 0.0


@pytest.mark.parametrize("text", [
    "The capital of Australia is Canberra.",
    "Use `reversed(xs)` or `xs[::-1]`.",
    "Cannot is one word in English; can not is used for emphasis.",  # no "I" before it
    "Sure. " + "x = 1\n" * 40 + "print('I cannot open the file')",  # a refusal phrase deep inside code
])
def test_real_answers_score_one(text: str) -> None:
    assert heuristic_confidence(text) == 1.0


@pytest.mark.parametrize("text", ["", "   ", "Canberra.", "0123456789", "  Yes, sure.  "[:13]])
def test_answers_of_ten_characters_or_less_score_zero(text: str) -> None:
    assert heuristic_confidence(text) == 0.0


def test_eleven_characters_pass() -> None:
    assert heuristic_confidence("Canberra!!!") == 1.0


def test_logprob_mapping_is_linear_and_clamped() -> None:
    assert logprob_confidence(0.0, -2.5) == 1.0
    assert logprob_confidence(-1.25, -2.5) == pytest.approx(0.5)
    assert logprob_confidence(-0.5, -2.0) == pytest.approx(0.75)
    assert logprob_confidence(-2.5, -2.5) == 0.0
    assert logprob_confidence(-7.0, -2.5) == 0.0
    assert logprob_confidence(0.3, -2.5) == 1.0  # rounding noise above zero


def test_logprob_floor_must_be_negative() -> None:
    with pytest.raises(ValueError):
        logprob_confidence(-1.0, 0.0)


def test_answer_confidence_gates_logprobs() -> None:
    assert answer_confidence("I cannot help with that.", -0.01, -2.5) == 0.0
    assert answer_confidence("ok", -0.01, -2.5) == 0.0
    assert answer_confidence("The answer is Canberra.", -0.5, -2.5) == pytest.approx(0.8)
    assert answer_confidence("The answer is Canberra.", None, -2.5) == 1.0


def test_self_eval_messages_hold_question_answer_and_instruction() -> None:
    messages = self_eval_messages("What is 2+2?", "4, because 2+2 is 4.")
    assert [m.role for m in messages] == ["system", "user"]
    text = messages[-1].text()
    assert "What is 2+2?" in text and "4, because 2+2 is 4." in text
    assert text.rstrip().endswith(SELF_EVAL_INSTRUCTION)


def test_self_eval_clips_huge_inputs_but_keeps_both_ends() -> None:
    question = "START " + "q" * 50_000 + " END"
    text = self_eval_messages(question, "short answer")[-1].text()
    assert len(text) < 20_000
    assert "START" in text and "END" in text and "characters left out" in text


@pytest.mark.parametrize(("reply", "rating"), [
    ("4", 4), ("5.", 5), ("**3**", 3), ("Rating: 2", 2), ("I would rate it 4/5.", 4),
    ("Rating (1-5): 4", 4), ("On a scale of 1 to 5, 3", 3), ("5 out of 5", 5), ("1", 1),
])
def test_parse_self_eval_finds_the_rating(reply: str, rating: int) -> None:
    assert parse_self_eval(reply) == rating


@pytest.mark.parametrize("reply", ["", "good", "0", "6", "10", "9/10", "4.5", "-", "five"])
def test_parse_self_eval_rejects_anything_else(reply: str) -> None:
    assert parse_self_eval(reply) is None


def test_passing_score_is_each_tiers_own_mark_on_one_scale() -> None:
    config = ConfidenceConfig(l3_min=0.5, l4_min=0.8, l5_min=0.6)
    assert passing_score("L3", "logprob", config) == 0.5
    assert passing_score("L4", "heuristic", config) == 0.8
    assert passing_score("L4", "self_eval", config) == 0.8
    assert passing_score("L5", "self_eval", config) == 0.6


def test_spec_defaults_and_the_self_eval_mapping() -> None:
    config = ConfidenceConfig()
    assert (config.l3_min, config.l4_min, config.l5_min) == (0.7, 0.8, 0.8)
    # The spec's ">= 4/5": a rating of 4 passes at L4, a 3 does not.
    assert 4 / 5 >= passing_score("L4", "self_eval", config) > 3 / 5


@pytest.mark.parametrize("value", [4, 1.5, -0.1])
def test_pass_marks_outside_the_unit_scale_are_config_errors(value: float) -> None:
    with pytest.raises(ConfigError, match=r"confidence\.l4_min: input should be"):
        config_from_dict({"confidence": {"l4_min": value}})


@pytest.mark.parametrize("text", [
    "Ok, any changes I propose will be to those files.",  # what SmolLM2 answered aider's edit request
    "Ok.", "Sure!", "Understood. I will follow these rules.", "Got it, thanks!",
    "Ok, I won't try and edit those files without asking first.", "I'll wait for your approval.",
])
def test_acknowledgements(text: str) -> None:
    assert is_acknowledgement(text)
    assert answer_gate(text, "Change get_factorial() to use math.factorial", []) in ("acknowledgement", "too_short")


@pytest.mark.parametrize("text", [
    "Sure! Canberra is the capital of Australia.",
    "I'll explain: a list is mutable, a tuple is not.",
    "Ok, here is the change:\n```python\nimport math\n```",
    "Hello! How can I help you today?",
])
def test_answers_that_open_politely_are_not_acknowledgements(text: str) -> None:
    assert not is_acknowledgement(text)


def test_echoes_of_the_prompt_or_of_an_earlier_message() -> None:
    prompt = "Write a commit message for this diff: rename foo to bar in utils.py"
    assert is_echo(prompt, prompt, [])
    assert is_echo("  " + prompt.upper() + " ", prompt, [])
    assert is_echo(prompt + " Thank you.", prompt, [])
    assert is_echo(prompt[:-5], prompt, [])  # most of the prompt, copied
    history = ["Ok, based on your requests I will suggest which files need to be edited and then stop."]
    assert is_echo(history[0], "Add a --verbose flag", history)
    assert answer_gate(history[0], "Add a --verbose flag", history) == "echo"


def test_extracting_part_of_the_prompt_is_not_an_echo() -> None:
    prompt = "Extract the email addresses from: ann@example.org and bob@example.org"
    assert not is_echo("ann@example.org and bob@example.org", prompt, [])
    assert answer_gate("ann@example.org and bob@example.org", prompt, []) is None


def test_gate_reasons_and_the_length_floor() -> None:
    assert answer_gate("   ", "q", []) == "empty"
    assert answer_gate("Yes.", "Is this a test file?", []) == "too_short"
    assert answer_gate("Yes.", "Is this a test file?", [], min_chars=0) is None
    assert answer_gate("I cannot do that, sorry.", "q", []) == "refusal"


def test_passing_score_rejects_self_evaluation_outside_l4_l5() -> None:
    with pytest.raises(ValueError):
        passing_score("L3", "self_eval", ConfidenceConfig())


@given(st.text(alphabet=st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028",
                                         "\u3000", "\u200b", "a", "B", ".", "!", "?", ",", ";", ":", "é", "İ"]),
               max_size=30))
def test_the_echo_check_normalises_whitespace_as_the_regex_did(text: str) -> None:
    import re

    from daari.routing.confidence import _norm

    assert _norm(text) == re.sub(r"\s+", " ", text).strip().strip(".!?,;:").strip().lower()
