"""An answer that asks the user's question back in other words: "How can I reverse a list in Python?" for "How
do I reverse a list in Python?". A small local model does this often; the echo gate misses it (the words differ),
and served as an answer it would be cached. A clarifying question of a few words is not caught: it holds too few
of the question's words (docs/routing.md, "The answer checks").
"""

from __future__ import annotations

import re

from daari.trust.closing_question import sentences

ASKED_BACK_MIN_SHARE = 0.8  # the share of the question's words a one-sentence question must hold to ask it back
ASKED_BACK_MAX_CHARS = 300  # longer than a restated question: something else
ASKED_BACK_MIN_WORDS = 2  # a question of fewer words ("Why?") cannot be told apart from a reply to it

_WORD = re.compile(r"[^\W_]+(?:[+#]+|(?:['’.][^\W_]+)*)")
# The words a question is asked with rather than about: dropped on both sides before comparing.
_ASKING = frozenset("""
a an the is are was were be been being am do does did done i you we me my your our us it its this that these those
there here to of in on at for with from by into about as and or but not no so if then than what whats how why when
where which who whom whose can could would should will shall may might must please tell explain describe show give
help know want like need let lets get make use using some any just also there's it's i'm you're
""".split())


def words(text: str) -> set[str]:
    """The words a text is about, lowercased, a plural's trailing s dropped (decorators: decorator)."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if word in _ASKING:
            continue
        found.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return found


def asks_back(answer: str, question: str) -> bool:
    """The answer is one sentence, a question, holding most of the words of the user's `question`."""
    text = answer.strip()
    if not text.endswith("?") or len(text) > ASKED_BACK_MAX_CHARS or len(sentences(text)) != 1:
        return False
    asked = words(question)
    if len(asked) < ASKED_BACK_MIN_WORDS:
        return False
    return len(asked & words(text)) >= ASKED_BACK_MIN_SHARE * len(asked)
