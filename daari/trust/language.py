"""Which natural language a short text is in, as far as can be told cheaply: by script, then by stopwords.

Only confident answers count: the judge flags a wrong language when the answer is plainly in another one,
never on a guess (titles are a few words, code and file names are Latin in every language).
"""

from __future__ import annotations

import re
import unicodedata

# Required language name -> the script its text is written in ("latin" ones are told apart by stopwords).
LANGUAGE_SCRIPT = {
    "english": "latin", "german": "latin", "french": "latin", "spanish": "latin", "italian": "latin",
    "portuguese": "latin", "dutch": "latin", "polish": "latin", "turkish": "latin", "vietnamese": "latin",
    "chinese": "han", "japanese": "kana", "korean": "hangul", "russian": "cyrillic", "ukrainian": "cyrillic",
    "arabic": "arabic", "hebrew": "hebrew", "greek": "greek", "hindi": "devanagari", "thai": "thai",
}
LANGUAGES = tuple(LANGUAGE_SCRIPT)

# A few very common function words each; enough to tell a sentence's language, never a single word's.
STOPWORDS: dict[str, frozenset[str]] = {
    "english": frozenset("the and of to is in for with on that this it are be as by from an or was your you "
                         "how what when which not can will but into when add fix update remove use make run using "
                         "after before without".split()),
    "german": frozenset("der die das und ist nicht ein eine mit für auf den dem des zu im von wie ich sie "
                        "wird oder auch bei nach".split()),
    "french": frozenset("le la les et est une des du de pour dans avec sur pas que qui au aux ce cette sont "
                        "par ou mais je vous".split()),
    "spanish": frozenset("el la los las y es una un de del para con por que en no se al lo como más pero "
                         "sus está mi cómo qué".split()),
    "italian": frozenset("il lo la gli le e è una un del della per con che non di da nel sono come più "
                         "anche".split()),
    "portuguese": frozenset("o a os as e é um uma do da para com que não em no na por se dos das mais "
                            "como".split()),
    "dutch": frozenset("de het een en is van voor met op dat niet te zijn in aan bij ook om als".split()),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_FENCE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_SCRIPT_OF_NAME = (("CJK", "han"), ("HIRAGANA", "kana"), ("KATAKANA", "kana"), ("HANGUL", "hangul"),
                   ("CYRILLIC", "cyrillic"), ("ARABIC", "arabic"), ("HEBREW", "hebrew"), ("GREEK", "greek"),
                   ("DEVANAGARI", "devanagari"), ("THAI", "thai"), ("LATIN", "latin"))
MIN_LETTERS = 8  # fewer letters than this and no script is told


def _script(char: str) -> str | None:
    name = unicodedata.name(char, "")
    for prefix, script in _SCRIPT_OF_NAME:
        if name.startswith(prefix):
            return script
    return None


def script_shares(text: str) -> dict[str, float]:
    """Share of the letters (code spans left out) in each script."""
    counts: dict[str, int] = {}
    for char in _FENCE.sub(" ", text):
        if char.isalpha():
            script = _script(char)
            if script is not None:
                counts[script] = counts.get(script, 0) + 1
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return {}
    # Japanese mixes kana and kanji: its han letters count as kana when any kana is present.
    if counts.get("kana"):
        counts["kana"] += counts.pop("han", 0)
    return {script: n / total for script, n in counts.items()}


NON_LATIN_SHARE = 0.25  # one Han character is a word, a Latin word is several letters: a quarter is plenty


def main_script(text: str) -> str | None:
    """The script a text is written in: a non-Latin one with a quarter of the letters (technical terms stay
    Latin in any language), else Latin when it has most of them."""
    shares = script_shares(text)
    if not shares:
        return None
    script, share = max(((s, v) for s, v in shares.items() if s != "latin"), key=lambda item: item[1],
                        default=("latin", 0.0))
    if share >= NON_LATIN_SHARE:
        return script
    return "latin" if shares.get("latin", 0.0) >= 0.6 else None


def latin_language(text: str) -> str | None:
    """The Latin-script language whose stopwords the text uses, when one clearly wins (2+ hits, twice the next)."""
    words = [w.lower() for w in _WORD.findall(_FENCE.sub(" ", text))]
    if len(words) < 4:
        return None
    hits = sorted(((sum(1 for w in words if w in stop), lang) for lang, stop in STOPWORDS.items()), reverse=True)
    (best, lang), (second, _) = hits[0], hits[1]
    return lang if best >= 2 and best >= 2 * second else None


def language_of(text: str) -> str | None:
    """A language name, a script name for a non-Latin script ("han", "cyrillic"...), or None when unsure."""
    script = main_script(text)
    if script is None:
        return None
    return latin_language(text) if script == "latin" else script


# English words that are words of other languages too ("in" is German, "die" is German, "on" French...).
_SHARED = frozenset(("in", "a", "an", "on", "die", "so", "also", "is", "be", "was", "will", "an", "or"))
ENGLISH_ONLY = STOPWORDS["english"] - _SHARED - frozenset().union(*(w for k, w in STOPWORDS.items() if k != "english"))


def _hits(text: str, words: frozenset[str]) -> int:
    return sum(1 for w in _WORD.findall(_FENCE.sub(" ", text)) if w.lower() in words)


# Word endings that are English and never the language's own: Spanish writes -ción/-mento/-idad, Italian
# -zione/-mento/-ità, Portuguese -ção/-mento/-idade ("Authentication": autenticación, autenticazione, autenticação).
# French and German share -tion and -ment with English, so only -ity/-ness tell there. A title has few function
# words ("Remove: the, this, my, a, an"), so an English title is often told only by its nouns.
_ROMANCE_ENGLISH = ("tion", "tions", "ment", "ments", "ity", "ities", "ness")
ENGLISH_ENDINGS: dict[str, tuple[str, ...]] = {
    "spanish": _ROMANCE_ENGLISH, "italian": _ROMANCE_ENGLISH, "portuguese": _ROMANCE_ENGLISH,
    "french": ("ity", "ities", "ness"), "german": ("ity", "ities", "ness"), "dutch": ("ity", "ities", "ness"),
}
MIN_ENDING_WORD = 6  # "mention" is a word; "ment" alone or "city" too short to say anything


def _english_endings(text: str, required: str) -> int:
    endings = ENGLISH_ENDINGS.get(required, ())
    return sum(1 for w in _WORD.findall(_FENCE.sub(" ", text))
               if len(w) >= MIN_ENDING_WORD and w.lower().endswith(endings))


def breaks_language(answer: str, required: str) -> bool:
    """The answer is plainly not in `required` (a name of LANGUAGE_SCRIPT, or a script name)."""
    script = LANGUAGE_SCRIPT.get(required, required)
    shares = script_shares(answer)
    if not shares:
        return False
    if script != "latin":
        # Technical terms and file names stay Latin in any language: only an answer with (almost) none of
        # the required script breaks it.
        target = shares.get(script, 0.0) + (shares.get("han", 0.0) if script == "kana" else 0.0)
        return target < 0.2 and shares.get("latin", 0.0) > 0.6
    if shares.get("latin", 0.0) < 0.4:
        return True  # a Latin language was asked for and another script answered
    if required not in STOPWORDS:
        return False
    if required != "english":
        # A few words are all a title has: an English function word or an English-only word ending, and none of
        # the required language's function words, says English; neither says nothing.
        english = _hits(answer, ENGLISH_ONLY) + _english_endings(answer, required)
        return english >= 1 and _hits(answer, STOPWORDS[required]) == 0 and len(_WORD.findall(answer)) >= 3
    found = latin_language(answer)
    return found is not None and found != required


def same_language_broken(answer: str, user_text: str) -> bool:
    """The user wrote in one language and the answer is plainly in another."""
    user = language_of(user_text)
    if user is None:
        return False
    return breaks_language(answer, user)
