"""Confidence scoring: the heuristic gate, the logprob mapping, self-evaluation parsing, the pass rule."""

from __future__ import annotations

import pytest

from daari.config import ConfidenceConfig
from daari.routing.confidence import (
    SELF_EVAL_INSTRUCTION,
    answer_confidence,
    heuristic_confidence,
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


def test_passing_score_puts_every_method_on_one_scale() -> None:
    config = ConfidenceConfig(l3_min=0.5, l4_min=4.0, l5_min=3.0)
    assert passing_score("L3", "logprob", config) == 0.5
    assert passing_score("L4", "heuristic", config) == 0.5
    assert passing_score("L4", "self_eval", config) == 0.8
    assert passing_score("L5", "self_eval", config) == 0.6


def test_passing_score_rejects_self_evaluation_outside_l4_l5() -> None:
    with pytest.raises(ValueError):
        passing_score("L3", "self_eval", ConfidenceConfig())
