"""Where the secrets are in a text: known key formats, private key blocks, JWTs, `.env`-style assignments with
secret-looking names and high-entropy tokens beside secret words. Pure functions; docs/privacy.md lists the rules
and the false-positive rate measured on ordinary code (evals/privacy/false_positives.py)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

PLACEHOLDER_RE = re.compile(r"REDACTED_[A-Z_]+_[0-9a-f]{12}")


@dataclass(frozen=True, slots=True)
class Found:
    """One secret: its kind (a placeholder's middle part) and where it is in the text, end exclusive."""

    kind: str
    start: int
    end: int


# Known formats: the whole match is the secret. Each is tried only on a text holding one of its anchors (a plain
# substring search, hundreds of MB/s), so ordinary text costs a few `in` tests instead of a regex scan.
_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("AWS_ACCESS_KEY", ("AKIA", "ASIA", "ABIA", "ACCA"), re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("GITHUB_TOKEN", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), re.compile(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    ("ANTHROPIC_KEY", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OPENAI_KEY", ("sk-",), re.compile(
        r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{20,}T3BlbkFJ[A-Za-z0-9]{20,}"
        r"|\bsk-[A-Za-z0-9]{48}\b")),
    ("GOOGLE_API_KEY", ("AIza", "GOCSPX-"), re.compile(
        r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])|\bGOCSPX-[A-Za-z0-9_-]{28}")),
    ("SLACK_TOKEN", ("xox", "hooks.slack.com"), re.compile(
        r"\bxox[abposre]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+")),
    ("STRIPE_KEY", ("_live_", "_test_", "whsec_"), re.compile(
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b|\bwhsec_[A-Za-z0-9]{24,}\b")),
    ("JWT", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)

# A private key block: its BEGIN line, then its END line within KEY_BLOCK_MAX characters (found by a substring
# search, so a text of many BEGIN lines costs linear time), else the base64 run after BEGIN (a block cut off).
KEY_BLOCK_MAX = 16384
_KEY_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = re.compile(r"-----END (?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?PRIVATE KEY(?: BLOCK)?-----")
_KEY_BODY = re.compile(rf"[A-Za-z0-9+/=\r\n\\]{{0,{KEY_BLOCK_MAX}}}")  # base64 lines (`\\n` when JSON-escaped)

# Words that name a secret, searched in the lowered text. An assignment's name holding one (`DB_PASSWORD=...`,
# `"apiKey": "..."`, `export GITHUB_TOKEN="..."`) gives its value away; a token shortly after one (`Bearer ...`,
# `x-api-key: ...`) is a secret if it looks random.
_SECRET_WORDS = ("secret", "passw", "pwd", "token", "apikey", "api_key", "api-key", "accesskey", "access_key",
                 "access-key", "privatekey", "private_key", "private-key", "credential", "auth_key", "authkey",
                 "signing_key", "encryption_key", "bearer", "authorization")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# After a name: an optional closing quote (JSON keys), `=` or `:`, and a value, quoted or bare.
_ASSIGNED = re.compile(r"['\"]?[ \t]*(?:=|:)[ \t]*(?P<q>['\"]?)(?P<value>[^\s'\"`]{8,512})(?P=q)")
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_=.-])[A-Za-z0-9+/_.-]{20,512}={0,2}")
_NOT_TOKEN = re.compile(r"[^A-Za-z0-9+/_=.-]")
_HEX = re.compile(r"[0-9a-fA-F]+")
_WORD_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# Values that are names, not secrets: code reads a secret from somewhere (a call, an attribute, a variable) far more
# often than it holds one, and examples hold placeholders.
_CODE_CHARS = frozenset("()[]{}<>$%*,;\\|")
_PLACEHOLDER_WORDS = ("example", "your", "xxxx", "changeme", "placeholder", "dummy", "redacted", "****", "sample",
                      "fake", "test", "secret", "password", "token", "none", "null", "true", "false", "todo")
WORD_WINDOW = 40  # characters between a secret word and the token it names


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _looks_random(value: str, min_bits: float) -> bool:
    """Mixed letters and digits with enough entropy: not a word, a path, a version or a name."""
    if len(value) < 8 or PLACEHOLDER_RE.fullmatch(value):
        return False
    lower = value.lower()
    if any(word in lower for word in _PLACEHOLDER_WORDS):
        return False
    if any(c in _CODE_CHARS for c in value) or value.count("/") > 1 or value.count(".") > 1:
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    parts = _WORD_PARTS.findall(value)
    if parts and sum(map(len, parts)) / len(parts) >= 3:  # Qwen3NextRMSNorm, model_v2_checkpoint: words
        return False
    bits = entropy(value)
    if _HEX.fullmatch(value):  # hex has at most 4 bits a character
        return len(value) >= 32 and bits >= min(min_bits, 3.0) and len(value) not in (40, 64)  # not git/sha ids
    return bits >= min_bits


def _private_keys(text: str) -> list[Found]:
    found: list[Found] = []
    at = text.find("-----BEGIN ")
    while at >= 0:
        begin = _KEY_BEGIN.match(text, at)
        if begin is None:
            at = text.find("-----BEGIN ", at + 1)
            continue
        end_at = text.find("-----END ", begin.end(), begin.end() + KEY_BLOCK_MAX)
        end = _KEY_END.match(text, end_at) if end_at >= 0 else None
        if end is None:
            body = _KEY_BODY.match(text, begin.end())
            stop = body.end() if body is not None else begin.end()
        else:
            stop = end.end()
        found.append(Found("PRIVATE_KEY", begin.start(), stop))
        at = text.find("-----BEGIN ", stop)
    return found


def _word_places(text: str) -> list[tuple[int, int]]:
    """(start, end) of every secret word in `text`, in order."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few non-ASCII letters lower to two characters: keep the offsets
        lowered = text.translate(_ASCII_LOWER)
    places: set[tuple[int, int]] = set()
    for word in _SECRET_WORDS:
        at = lowered.find(word)
        while at >= 0:
            places.add((at, at + len(word)))
            at = lowered.find(word, at + 1)
    return sorted(places)


def _assignments(text: str, places: list[tuple[int, int]]) -> list[Found]:
    found: list[Found] = []
    name_end = -1  # the end of the last name looked at: a word inside it is that name again
    for start, end in places:
        if start < name_end:
            continue
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        while end < len(text) and text[end] in _NAME_CHARS:
            end += 1
        name_end = end
        match = _ASSIGNED.match(text, end)
        if match is None:
            continue
        value = match.group("value")
        if value.startswith(("REDACTED_", "os.", "env")):
            continue
        # A quoted value or an env-style line holds a literal; a bare word after `=` in code is usually a name.
        quoted = bool(match.group("q"))
        bare_env = start == 0 or text[start - 1] in "\n \t\"'"
        if not (quoted or bare_env) or not _looks_random(value, 3.0):
            continue
        found.append(Found("SECRET", match.start("value"), match.end("value")))
    return found


def _tokens_beside_words(text: str, places: list[tuple[int, int]]) -> list[Found]:
    """The first random-looking token starting within WORD_WINDOW characters after each secret word, on its line.
    Windows that overlap are scanned once (`scanned`), so a text dense with secret words costs linear time."""
    found: list[Found] = []
    scanned = 0
    boundary = -1  # the first character at or after the last word's end that no token holds
    for _, end in places:
        window_end = min(len(text), end + WORD_WINDOW)
        line_end = text.find("\n", end, window_end)
        window_end = window_end if line_end < 0 else line_end
        if boundary < end:  # a word inside a long name: the name's end is found once for all its words
            after = _NOT_TOKEN.search(text, end)
            boundary = after.start() if after is not None else len(text)
        start = max(boundary + 1, scanned)  # a token starts after a character that is not a token's
        if start >= window_end:
            continue
        scanned = window_end
        for candidate in _TOKEN.finditer(text, start, window_end):
            token = _TOKEN.match(text, candidate.start())  # whole, even past the window's end
            assert token is not None
            value = token.group(0).rstrip(".=")
            if _looks_random(value, 4.0):
                found.append(Found("TOKEN", token.start(), token.start() + len(value)))
                break
    return found


def _without_overlaps(spans: list[Found], taken: list[Found]) -> list[Found]:
    """`taken` (in order, none overlapping) and the `spans` that overlap neither it nor each other, the longest first
    where two start together. One pass over both, in order: linear however many spans a text holds."""
    kept = list(taken)
    index, last_end = 0, -1
    for span in sorted(spans, key=lambda f: (f.start, -(f.end - f.start))):
        while index < len(taken) and taken[index].end <= span.start:
            index += 1
        if (index < len(taken) and taken[index].start < span.end) or span.start < last_end:
            continue
        kept.append(span)
        last_end = span.end
    return kept


def find_secrets(text: str) -> list[Found]:
    """Every secret in `text`, in order, none overlapping. A known format wins over the generic rules (an
    assignment's value, a token beside a secret word) where they find the same text."""
    if len(text) < 8:
        return []
    formats: list[Found] = _private_keys(text) if "PRIVATE KEY" in text else []
    for kind, anchors, pattern in _FORMATS:
        if any(anchor in text for anchor in anchors):
            formats.extend(Found(kind, m.start(), m.end()) for m in pattern.finditer(text))
    kept = _without_overlaps(formats, [])
    places = _word_places(text)
    if places:
        kept = _without_overlaps([*_assignments(text, places), *_tokens_beside_words(text, places)], kept)
    return sorted(kept, key=lambda f: f.start)
