"""The lexical verifier: each rule rejects its documented near-miss; paraphrases pass (docs/caching.md)."""

import pytest

from daari.semantic.lexical import features, lexical_verdict, stem
from daari.semantic.model_check import parse_model_verdict, verifier_messages

# (rule, a, b): the example pair of each rule in docs/caching.md, "Lexical rules".
NEAR_MISSES = [
    ("media", "user: What is wrong here? [image:0123456789abcdef]",
     "user: What is wrong here? [image:fedcba9876543210]"),
    ("code", "Explain this code: `x = [i * 2 for i in range(10)]`",
     "Explain this code: `x = [i ** 2 for i in range(10)]`"),
    ("quoted", 'Why do I get "permission denied"?', 'Why do I get "file not found"?'),
    ("number", "How do I squash the last 3 commits in git?", "How do I squash the last 5 commits in git?"),
    ("number", "Run the Flask app on port 5000", "Run the Flask app on port 8000"),
    ("number", "How do I install Python 3.12 on Ubuntu?", "How do I install Python 3.11 on Ubuntu?"),
    ("unit", "Limit the container memory to 512MB", "Limit the container memory to 512GB"),
    ("unit", "Sleep for 5 seconds in Bash", "Sleep for 5 minutes in Bash"),
    ("negation", "List files that are tracked by git", "List files that are not tracked by git"),
    ("negation", "Why does my React component re-render?", "Why doesn't my React component re-render?"),
    ("flag", "What does rm -r do?", "What does rm -rf do?"),
    ("path", "Delete the build/ directory", "Delete the dist/ directory"),
    ("identifier", "What does useEffect do in React?", "What does useMemo do in React?"),
    ("identifier", "Why does get_user_by_id raise KeyError?", "Why does get_user_by_email raise KeyError?"),
    ("operator", "Why is a == b false here?", "Why is a != b false here?"),
    ("swap", "Convert this JSON to YAML", "Convert this YAML to JSON"),
    ("swap", "Copy the file from the server to my laptop", "Copy the file from my laptop to the server"),
    ("swap", "Is Go faster than Python?", "Is Python faster than Go?"),
    ("swap", "Redirect HTTP to HTTPS in nginx", "Redirect HTTPS to HTTP in nginx"),
    ("swap", "It was the 7th best film at the 19th festival", "It was the 19th best film at the 7th festival"),
    ("swap", "He was born in Paris and died in London", "He was born in London and died in Paris"),
    ("antonym", "How do I enable CORS in Flask?", "How do I disable CORS in Flask?"),
    ("antonym", "How do I start a Docker container?", "How do I stop a Docker container?"),
    ("antonym", "Do a soft reset to the previous commit", "Do a hard reset to the previous commit"),
    ("antonym", "How do I connect to a local Postgres database?", "How do I connect to a remote Postgres database?"),
    ("content_word", "How do I list Docker containers?", "How do I list Docker images?"),
]

PARAPHRASES = [
    ("How do I list Docker containers?", "Show me the command to list docker containers"),
    ("How do I delete a file in Python?", "How can I remove a file with Python?"),
    ("What is memoization?", "Explain memoization"),
    ("How do I get the size of a directory in Linux?", "How can I find the size of a folder on Linux?"),
    ("How do I read environment variables in Node.js?", "How to access environment variables in Node.js?"),
    ("Convert a Unix timestamp to a datetime in Python", "Turn a Unix timestamp into a datetime in Python"),
    ("How do I squash the last two commits?", "How can I squash my last 2 commits?"),
    ("What is the GIL in Python?", "Explain the Python GIL"),  # neighbouring names may trade places
]


@pytest.mark.parametrize(("rule", "a", "b"), NEAR_MISSES)
def test_near_miss_is_rejected_by_its_rule(rule: str, a: str, b: str) -> None:
    verdict = lexical_verdict(a, b)
    assert not verdict.same
    assert verdict.rule == rule, verdict
    assert not lexical_verdict(b, a).same  # symmetric


@pytest.mark.parametrize(("a", "b"), PARAPHRASES)
def test_paraphrase_passes(a: str, b: str) -> None:
    assert lexical_verdict(a, b).same, lexical_verdict(a, b)


def test_identical_prompts_pass() -> None:
    assert lexical_verdict("user: Fix the bug in `main.py`", "user: Fix the bug in `main.py`").same


def test_stemming_folds_plurals_and_endings_but_not_acronyms() -> None:
    assert stem("containers") == stem("container")
    assert stem("running") == stem("run")
    assert features("HTTPS").words != features("HTTP").words


def test_number_words_count_as_numbers() -> None:
    assert features("the last two commits").numbers == features("the last 2 commits").numbers


@pytest.mark.parametrize("reply", ["YES", "yes", " Yes. ", "yes\n"])
def test_model_yes_serves(reply: str) -> None:
    assert parse_model_verdict(reply).same


@pytest.mark.parametrize(("reply", "rule"), [
    ("NO", "model"), ("no.", "model"), ("Yes, they are the same", "model_malformed"), ("", "model_malformed"),
    ("maybe", "model_malformed"), ("YES YES", "model_malformed"), (None, "model_unavailable"),
])
def test_model_anything_but_yes_rejects(reply: str | None, rule: str) -> None:
    verdict = parse_model_verdict(reply)
    assert not verdict.same
    assert verdict.rule == rule


def test_verifier_prompt_carries_both_requests_after_the_instruction() -> None:
    system, user = verifier_messages("list images", "list containers")
    assert system.role == "system" and "YES or NO" in system.text()
    assert "list images" in user.text() and "list containers" in user.text()
