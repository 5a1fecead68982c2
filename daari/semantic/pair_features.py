"""What the pair model reads of two prompts: word order, roles, overlap and the lexical verdict, as numbers.

Pure functions over the two embedded texts and their cosine; tens of microseconds per pair. The features
are the inputs of daari/semantic/pair_model.py (docs/caching.md, "pair_model"); their order is FEATURE_NAMES,
and the committed weights are tied to it (a change here means retraining: evals/cache/train_verifier.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from daari.semantic.lexical import ANTONYM_STEMS as LEXICAL_OPPOSITES
from daari.semantic.lexical import Features, Verdict, canonical_word, features, lexical_verdict
from daari.semantic.vocabulary import STOPWORDS

# The lexical rules kept as hard vetoes: where they reject, the pair model is not asked. Each is right
# wherever it fires on daari's corpus (a different number, flag, path, negation... changes the answer).
# `content_word` is the one rule the model may overrule: rewordings differ in content words.
VETO_RULES = frozenset({"media", "code", "quoted", "number", "unit", "negation", "flag", "path", "identifier",
                        "operator", "swap", "antonym"})

# Opposites the lexical rules cannot see because one side is a function word ("turn on" / "turn off",
# "zoom in" / "zoom out"): a pair that differs by exactly such words asks the opposite thing.
PARTICLE_OPPOSITES = (("on", "off"), ("in", "out"), ("up", "down"), ("enable", "disable"), ("enabled", "disabled"),
                      ("show", "hide"), ("with", "without"), ("before", "after"), ("above", "below"),
                      ("over", "under"), ("max", "min"), ("more", "less"), ("true", "false"), ("yes", "no"))
_OPPOSITES = {frozenset(p) for p in PARTICLE_OPPOSITES}

# Words that join two items whose order does not matter ("SQLite or Postgres" is "Postgres or SQLite").
_COORDINATORS = frozenset({"or", "and", "vs", "versus", "between"})
# Question words that change what is asked ("why does X fail" is not "how do I fix X"); how/what frame.
_ASKING = frozenset({"why", "who", "where", "when", "whether"})

_WORD = re.compile(r"[A-Za-z0-9_]+(?:['.\-][A-Za-z0-9_]+)*")
_ROLE = re.compile(r"^(?:system|user|assistant|tool): ", re.MULTILINE)

FEATURE_NAMES = (
    "cosine", "length_ratio", "log_length", "word_jaccard", "word_lcs_of_longer", "word_lcs_of_shorter",
    "bigram_dice", "trigram_dice", "word_discordant_share", "word_discordant_pairs", "word_context_changed_share",
    "word_context_changed", "word_position_shift", "content_jaccard", "content_lcs_of_longer",
    "content_lcs_of_shorter", "content_discordant_share", "content_context_changed_share", "content_only_one_side",
    "content_only_one_side_share", "lexical_same", "asking_word_differs", "content_count_difference",
    "number_context_changed",
)

Vector = npt.NDArray[np.float64]


def words(text: str) -> list[str]:
    """Lower-case words in order, the role marker dropped ("user: How do I..." -> how, do, i, ...)."""
    return [w.lower() for w in _WORD.findall(_ROLE.sub("", text))]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence: how much of the order the two texts share."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _ngrams(items: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(items[i:i + n]) for i in range(len(items) - n + 1)}


def _dice(x: set[tuple[str, ...]], y: set[tuple[str, ...]]) -> float:
    return 2 * len(x & y) / (len(x) + len(y)) if x or y else 1.0


def coordinated(raw: Sequence[str]) -> set[frozenset[str]]:
    """Pairs joined by or/and/vs ("tabs or spaces", "a list or a dict"): trading their places keeps the
    meaning. Each side is the nearest word that is not a function word, in raw and in canonical form."""
    pairs: set[frozenset[str]] = set()
    for i, item in enumerate(raw):
        if item not in _COORDINATORS:
            continue
        before = next((w for w in reversed(raw[:i]) if w not in STOPWORDS), None)
        after = next((w for w in raw[i + 1:] if w not in STOPWORDS), None)
        if before and after:
            pairs.add(frozenset((before, after)))
            pairs.add(frozenset((canonical_word(before), canonical_word(after))))
    return pairs


def order_features(a: Sequence[str], b: Sequence[str],
                   symmetric: set[frozenset[str]] | None = None) -> tuple[float, int, float, int, float]:
    """How the items found once in each text moved: (share of pairs in opposite order, that count, share
    whose both neighbours changed, that count, mean shift of relative position). A swap ("A to B" / "B to
    A") reverses a pair and changes both neighbours of each; a clause moved whole keeps most neighbours.
    Pairs in `symmetric` (coordinated in both texts) may trade places."""
    count_a, count_b = Counter(a), Counter(b)
    shared = [x for x in count_a if count_a[x] == 1 and count_b.get(x) == 1 and x not in _COORDINATORS]
    place_a = {x: a.index(x) for x in shared}
    place_b = {x: b.index(x) for x in shared}
    symmetric = (coordinated(a) & coordinated(b)) if symmetric is None else symmetric
    coordinated_items = {x for pair in symmetric for x in pair}
    discordant = 0
    for i, x in enumerate(shared):
        for y in shared[i + 1:]:
            if (place_a[x] - place_a[y]) * (place_b[x] - place_b[y]) < 0 and frozenset((x, y)) not in symmetric:
                discordant += 1
    pairs = len(shared) * (len(shared) - 1) // 2
    changed = 0
    for x in shared:
        i, j = place_a[x], place_b[x]
        left_a, left_b = (a[i - 1] if i else "<s>"), (b[j - 1] if j else "<s>")
        right_a = a[i + 1] if i + 1 < len(a) else "</s>"
        right_b = b[j + 1] if j + 1 < len(b) else "</s>"
        if left_a != left_b and right_a != right_b and x not in coordinated_items:
            changed += 1
    shift = (sum(abs(place_a[x] / max(1, len(a) - 1) - place_b[x] / max(1, len(b) - 1)) for x in shared)
             / len(shared)) if shared else 0.0
    return (discordant / pairs if pairs else 0.0, discordant, changed / len(shared) if shared else 0.0, changed,
            shift)


def _content(f: Features) -> list[str]:
    """The lexical items in order (stemmed, synonyms folded, framing and filler dropped), markers kept out."""
    return [x for x in f.sequence if not x.startswith("<")]


def particle_opposite(a: str, b: str) -> str:
    """An opposite pair the two texts differ by ("on" / "off", "left" / "right"), else "". Counted with
    repeats: "keep the rows of the left table" / "... of the right table" when both say "left" elsewhere."""
    wa, wb = Counter(words(a)), Counter(words(b))
    ca, cb = Counter(_content(features(a))), Counter(_content(features(b)))
    for more_a, more_b, opposites in ((wa - wb, wb - wa, _OPPOSITES), (ca - cb, cb - ca, LEXICAL_OPPOSITES)):
        for x in sorted(more_a):
            for y in sorted(more_b):
                if frozenset((x, y)) in opposites:
                    return f"{x} / {y}"
    return ""


def veto(a: str, b: str) -> Verdict | None:
    """A rejection that needs no model: a lexical rule in VETO_RULES, or opposite words."""
    lexical = lexical_verdict(a, b)
    if not lexical.same and lexical.rule in VETO_RULES:
        return lexical
    opposite = particle_opposite(a, b)
    if opposite:
        return Verdict(False, "antonym", opposite)
    return None


def _number_context_changed(a: Sequence[str], b: Sequence[str]) -> int:
    """Numbers found once in each text whose neighbours both changed: the number now counts something
    else ("chunks of 3" / "3 chunks")."""
    count_a, count_b = Counter(a), Counter(b)
    changed = 0
    for x in count_a:
        if any(c.isdigit() for c in x) and count_a[x] == 1 and count_b.get(x) == 1:
            i, j = a.index(x), b.index(x)
            left = (a[i - 1] if i else "<s>") != (b[j - 1] if j else "<s>")
            right = (a[i + 1] if i + 1 < len(a) else "</s>") != (b[j + 1] if j + 1 < len(b) else "</s>")
            changed += left and right
    return changed


def pair_features(a: str, b: str, cosine: float) -> Vector:
    """The feature vector (FEATURE_NAMES order) of two embed texts and the cosine of their embeddings."""
    wa, wb = words(a), words(b)
    la, lb = max(1, len(wa)), max(1, len(wb))
    set_a, set_b = set(wa), set(wb)
    common = lcs_length(wa, wb)
    symmetric = coordinated(wa) & coordinated(wb)
    w_disc_share, w_disc, w_ctx_share, w_ctx, w_shift = order_features(wa, wb, symmetric)
    fa, fb = features(a), features(b)
    ca, cb = _content(fa), _content(fb)
    lca, lcb = max(1, len(ca)), max(1, len(cb))
    c_common = lcs_length(ca, cb)
    c_disc_share, _, c_ctx_share, _, _ = order_features(ca, cb, symmetric)
    count_a, count_b = Counter(ca), Counter(cb)
    only = fa.words ^ fb.words
    asking_a, asking_b = set_a & _ASKING, set_b & _ASKING
    lexical = lexical_verdict(a, b)
    return np.array([
        cosine, min(la, lb) / max(la, lb), math.log(la + lb), len(set_a & set_b) / max(1, len(set_a | set_b)),
        common / max(la, lb), common / min(la, lb), _dice(_ngrams(wa, 2), _ngrams(wb, 2)),
        _dice(_ngrams(wa, 3), _ngrams(wb, 3)), w_disc_share, float(w_disc), w_ctx_share, float(w_ctx), w_shift,
        len(set(ca) & set(cb)) / max(1, len(set(ca) | set(cb))), c_common / max(lca, lcb), c_common / min(lca, lcb),
        c_disc_share, c_ctx_share, float(len(only)), len(only) / max(1, len(fa.words | fb.words)),
        float(lexical.same), float(len(asking_a ^ asking_b)),
        float(sum(((count_a - count_b) + (count_b - count_a)).values())), float(_number_context_changed(ca, cb)),
    ], dtype=np.float64)
