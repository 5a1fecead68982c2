"""The lexical verifier: rules that reject an L1 candidate whose prompt differs in what decides the answer.

Pure functions over the two embedded texts; microseconds per pair. Each rule, with an example pair it
rejects, is documented in docs/caching.md ("Lexical rules"). The rules run in a fixed order and the
first that finds a difference names the verdict: media, code, quoted, number, unit, negation, flag, path,
identifier, operator, swap, content word. Paraphrase tolerance comes from folding: request framing
("how do I", "explain", "what is") and filler words are ignored, light stemming and a synonym table map
"delete"/"remove", "folder"/"directory", "k8s"/"kubernetes" onto one form.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from daari.semantic.vocabulary import (
    ANTONYMS,
    DIRECTIONAL,
    FRAMING,
    NEGATIONS,
    NUMBER_WORDS,
    PHRASES,
    SOFT,
    STOPWORDS,
    SYNONYMS,
    UNITS,
)


@dataclass(frozen=True)
class Verdict:
    """A verifier's answer: `same` True serves the candidate; otherwise `rule` names the difference found."""

    same: bool
    rule: str | None = None  # "number", "negation", "swap", "content_word", ... or the model verdict
    detail: str = ""  # what differed, for the decision event (prompt words only, never answers)


SAME = Verdict(True)

_FENCED = re.compile(r"```.*?(?:```|$)|~~~.*?(?:~~~|$)", re.DOTALL)
_INLINE = re.compile(r"`[^`\n]+`")
_QUOTED = re.compile(r"\"[^\"\n]+\"|“[^”\n]+”")
_MEDIA = re.compile(r"\[[a-z_]+:[0-9a-f]{16}\]")  # fold.media_token: images, audio, files
_ROLE = re.compile(r"^(?:system|user|assistant|tool): ", re.MULTILINE)
_TOKEN = re.compile(r"[A-Za-z0-9_~@$/\\.+#%:'-]+|==+|!=+|<=|>=|=>|->|\*\*|//|[<>*/%^&|=!]")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_NUMBER_UNIT = re.compile(r"^(\d+(?:\.\d+)*)([a-z%]+)$", re.IGNORECASE)
_CAMEL = re.compile(r"[a-z][A-Z]")
_OPERATOR = re.compile(r"^[<>*/%^&|=!-]+$")
_EDGE_PUNCT = ".,;:?!'()[]{}"


def _space(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Features:
    """What the rules compare, extracted once per text."""

    media: list[str]
    code: list[str]
    quoted: Counter[str]
    numbers: Counter[str]
    units: Counter[str]
    negations: int
    flags: Counter[str]
    paths: Counter[str]
    identifiers: Counter[str]
    operators: Counter[str]
    words: set[str]
    sequence: list[str]  # items (words, identifiers, paths, numbers) and "<prep>" markers, in order
    # Names (capitalized inside a sentence) and numbers, in order, with their place in `sequence`.
    entities: list[tuple[str, int]] = field(default_factory=list)


def stem(word: str) -> str:
    """A light stemmer: plural, -ing, -ed, -ly and a final e fold ("images"/"image", "running"/"run")."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed", "ly"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_SYNONYM_STEMS = {stem(variant): stem(canonical) for canonical, variants in SYNONYMS.items() for variant in
                  (canonical, *variants)}
ANTONYM_STEMS = {frozenset((stem(a), stem(b))) for a, b in ANTONYMS}
_PHRASES = [(re.compile(rf"(?<![\w-]){re.escape(p)}(?![\w-])", re.IGNORECASE), r) for p, r in PHRASES]
_IGNORED = {stem(w) for w in STOPWORDS | FRAMING | SOFT}


def canonical_word(word: str) -> str:
    stemmed = stem(word)
    return _SYNONYM_STEMS.get(stemmed, stemmed)


def _classify(token: str, f: Features) -> str | None:
    """Sort one token into its feature; returns the item it adds to the order sequence, if any."""
    lower = token.lower()
    if token.startswith("-") and len(token) > 1 and token[1:2].isalpha() or token.startswith("--"):
        f.flags[token] += 1
        return token
    if _OPERATOR.match(token):
        f.operators[token] += 1
        return None
    if "/" in token or "\\" in token or token.startswith("~") or (token.startswith(".") and len(token) > 1):
        f.paths[token] += 1
        _numbers(token, f)
        return token
    match = _NUMBER_UNIT.match(token)
    if match and match.group(2).lower() in UNITS:
        f.numbers[match.group(1)] += 1
        f.units[UNITS[match.group(2).lower()]] += 1
        return match.group(1)
    if lower in NUMBER_WORDS:
        f.numbers[NUMBER_WORDS[lower]] += 1
        return NUMBER_WORDS[lower]
    if any(c.isdigit() for c in token):
        _numbers(token, f)
        if not _NUMBER.fullmatch(token):  # "python3", "v2", "ES2020": the name around the number counts too
            f.identifiers[lower] += 1
        return lower
    if "_" in token or "." in token.strip(".") or _CAMEL.search(token) or token.startswith(("@", "$")) \
            or (token.isupper() and len(token) > 1 and not token.isalpha()):
        f.identifiers[token] += 1
        return token
    if lower in UNITS and not lower.isalpha() or lower in UNITS and len(lower) > 2:
        f.units[UNITS[lower]] += 1
        return None
    if lower in NEGATIONS or lower.endswith("n't"):
        f.negations += 1
        return None
    if lower in DIRECTIONAL:
        return f"<{lower}>"
    # An acronym is not a plural: HTTPS is not HTTP.
    word = lower if token.isupper() and len(token) > 1 else canonical_word(lower.replace("'", ""))
    if not word or word in _IGNORED or lower in STOPWORDS:
        return None
    f.words.add(word)
    return word


def _numbers(token: str, f: Features) -> None:
    for number in _NUMBER.findall(token):
        f.numbers[number] += 1


def features(text: str) -> Features:
    f = Features([], [], Counter(), Counter(), Counter(), 0, Counter(), Counter(), Counter(), Counter(), set(), [])
    text = _ROLE.sub("", text)
    f.media = _MEDIA.findall(text)
    text = _MEDIA.sub(" ", text)
    f.code = [_space(m.strip("`~")) for m in _FENCED.findall(text)]
    text = _FENCED.sub(" ", text)
    f.code += [_space(m.strip("`")) for m in _INLINE.findall(text)]
    text = _INLINE.sub(" ", text)
    f.quoted = Counter(_space(m[1:-1]).lower() for m in _QUOTED.findall(text))
    text = _QUOTED.sub(" ", text)
    # Phrases fold case-insensitively; other tokens keep their case for identifiers (camelCase, CONSTANTS).
    for pattern, replacement in _PHRASES:
        text = pattern.sub(replacement, text)
    sentence_start = True
    for raw in _TOKEN.findall(text):
        token = raw.strip(_EDGE_PUNCT) if not _OPERATOR.match(raw) else raw
        if token.endswith("'s"):
            token = token[:-2]
        if not token:
            continue
        item = _classify(token, f)
        if item is not None:
            f.sequence.append(item)
            if any(c.isdigit() for c in item) or (token[:1].isupper() and not sentence_start):
                f.entities.append((item, len(f.sequence) - 1))
        sentence_start = raw.endswith((".", "?", "!", ":"))
    return f


def _differs(a: Counter[str], b: Counter[str]) -> str:
    return ", ".join(sorted(((a - b) + (b - a)).keys()))


def _role_pairs(seq: list[str], shared: set[str]) -> set[tuple[str, str]]:
    """(x, y) for x among the two shared items just before a directional word and y the first shared item
    after it: the roles it relates ("JSON" and "YAML" in "convert JSON to YAML")."""
    pairs: set[tuple[str, str]] = set()
    for i, item in enumerate(seq):
        if not item.startswith("<"):
            continue
        before = [x for x in seq[:i] if x in shared][-2:]
        after = next((y for y in seq[i + 1:] if y in shared), None)
        if after is not None:
            pairs.update((x, after) for x in before if x != after)
    return pairs


def _swapped(a: list[str], b: list[str]) -> str:
    """Two items related by a directional word ("to", "from", "than", "into") in both texts, in opposite
    orders: "JSON to YAML" vs "YAML to JSON", "Go faster than Python" vs "Python faster than Go"."""
    once_a = {x for x, n in Counter(a).items() if n == 1 and not x.startswith("<")}
    once_b = {x for x, n in Counter(b).items() if n == 1 and not x.startswith("<")}
    shared = once_a & once_b
    pairs_b = _role_pairs(b, shared)
    for x, y in sorted(_role_pairs(a, shared)):
        if (y, x) in pairs_b:
            return f"{x} / {y}"
    return ""


def _reordered(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> str:
    """Two names or numbers that appear once in each text, in opposite orders and apart in both: "the 7th
    film at the 19th festival" vs "the 19th film at the 7th festival". Neighbours are left alone: "the
    Python GIL" is "the GIL in Python"."""
    count_a, count_b = Counter(x for x, _ in a), Counter(x for x, _ in b)
    shared = {x for x, n in count_a.items() if n == 1} & {x for x, n in count_b.items() if n == 1}
    place_a = {x: i for x, i in a if x in shared}
    place_b = {x: i for x, i in b if x in shared}
    for x in shared:
        for y in shared:
            apart = abs(place_a[x] - place_a[y]) > 1 and abs(place_b[x] - place_b[y]) > 1
            if place_a[x] < place_a[y] and place_b[y] < place_b[x] and apart:
                return f"{min(x, y)} / {max(x, y)}"
    return ""


def lexical_verdict(a: str, b: str) -> Verdict:
    """Whether prompts `a` and `b` (embed texts) may share an answer, by the lexical rules in order."""
    fa, fb = features(a), features(b)
    if fa.media != fb.media:
        return Verdict(False, "media", "different images or audio")
    if fa.code != fb.code:
        return Verdict(False, "code", "different code or file contents")
    if fa.quoted != fb.quoted:
        return Verdict(False, "quoted", _differs(fa.quoted, fb.quoted))
    if fa.numbers != fb.numbers:
        return Verdict(False, "number", _differs(fa.numbers, fb.numbers))
    if fa.units != fb.units:
        return Verdict(False, "unit", _differs(fa.units, fb.units))
    if fa.negations != fb.negations:
        return Verdict(False, "negation", f"{fa.negations} vs {fb.negations} negations")
    for rule, x, y in (("flag", fa.flags, fb.flags), ("path", fa.paths, fb.paths),
                       ("identifier", fa.identifiers, fb.identifiers), ("operator", fa.operators, fb.operators)):
        if x != y:
            return Verdict(False, rule, _differs(x, y))
    swapped = _swapped(fa.sequence, fb.sequence) or _reordered(fa.entities, fb.entities)
    if swapped:
        return Verdict(False, "swap", swapped)
    if fa.words != fb.words:
        only_a, only_b = fa.words - fb.words, fb.words - fa.words
        for word_a in sorted(only_a):
            for word_b in sorted(only_b):
                if frozenset((word_a, word_b)) in ANTONYM_STEMS:
                    return Verdict(False, "antonym", f"{word_a} / {word_b}")
        return Verdict(False, "content_word", ", ".join(sorted(only_a | only_b)))
    return SAME
