"""Word lists of the lexical verifier: framing, filler, synonyms, antonyms, units, negations.

Only data; daari/semantic/lexical.py applies it. Synonyms are written in their base form and stemmed when
loaded. A synonym group must only join words that ask for the same thing in a coding prompt.
"""

from __future__ import annotations

# Function words: never decide what a prompt asks for.
STOPWORDS = frozenset("""
a an the of in on at for with by as is are was were be been being am it its this that these those there
i me my mine we us our you your he she they them their his her and or but so if then than too very
do does did doing done can could would should shall will may might must have has had having
about via per each any some such own same other another also just into onto within inside
using through
""".split())

# How a request is framed, not what it asks: "how do I", "explain", "what is", "give me".
FRAMING = frozenset("""
how what what's whats which who whom whose where when way ways explain describe tell show-me give
please help want need like know wonder trying try possible able anyone someone somebody mean meaning
here example command code snippet
""".split())

# Filler that paraphrases add or drop without changing the question.
SOFT = frozenset("""
best simplest easiest simple easy easily quick quickly proper properly correct correctly right good
exactly really actually just simply basically together new particular specific certain existing
one thing something going get-to machine different
create make generate define declare send
""".split())

NEGATIONS = frozenset("not no never without none nothing neither nor cannot cant except excluding non".split())

# Words around which order decides roles: "from A to B", "A into B", "A than B", "A before B".
DIRECTIONAL = frozenset("to into onto from than before after instead".split())

NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "twelve": "12", "twenty": "20", "hundred": "100",
    "thousand": "1000", "first": "1", "second": "2", "third": "3", "once": "1", "twice": "2", "half": "0.5",
    "single": "1", "double": "2",
}

# Unit spellings -> one name. Bare single letters (s, m, h) count only when glued to a number ("5s").
UNITS = {
    "b": "byte", "byte": "byte", "bytes": "byte", "kb": "kb", "kib": "kb", "kilobyte": "kb", "kilobytes": "kb",
    "mb": "mb", "mib": "mb", "megabyte": "mb", "megabytes": "mb", "gb": "gb", "gib": "gb", "gigabyte": "gb",
    "gigabytes": "gb", "tb": "tb", "terabyte": "tb", "terabytes": "tb", "bit": "bit", "bits": "bit",
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms", "us": "us", "microsecond": "us", "microseconds": "us",
    "ns": "ns", "nanosecond": "ns", "nanoseconds": "ns", "s": "s", "sec": "s", "secs": "s", "second": "s",
    "seconds": "s", "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min", "h": "h",
    "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "d": "day", "day": "day", "days": "day", "week": "week",
    "weeks": "week", "px": "px", "em": "em", "rem": "rem", "pt": "pt", "vh": "vh", "vw": "vw", "%": "%",
    "percent": "%", "k": "thousand", "x": "x", "fps": "fps", "hz": "hz", "mhz": "mhz", "ghz": "ghz",
    "kbps": "kbps", "mbps": "mbps", "gbps": "gbps", "rpm": "rpm", "dpi": "dpi", "c": "celsius", "f": "fahrenheit",
}

# Multi-word spellings folded before tokenizing (lower case, matched on word boundaries).
PHRASES = (
    ("show me", "show-me"), ("how to", "how"), ("what's", "what is"), ("most recent", "last"),
    ("regular expression", "regex"), ("symbolic link", "symlink"), ("more than one", "multiple"),
    ("number of", "count"), ("command line", "terminal"), ("look for", "find"), ("get rid of", "remove"),
    ("set up", "setup"), ("env variable", "environment variable"), ("env var", "environment variable"),
    ("go back to", "revert to"), ("turn into", "convert to"), ("turn on", "enable"), ("turn off", "disable"),
    ("switch on", "enable"), ("switch off", "disable"), ("a lot of", "many"), ("lots of", "many"),
    ("is there a way", "how"), ("what is the way", "how"), ("how can i", "how"), ("how do i", "how"),
    ("how do you", "how"), ("how should i", "how"), ("i want to", ""), ("i need to", ""),
    ("remove duplicates from", "deduplicate"), ("remove duplicate", "deduplicate"),
    ("everything in it", "recursive"), ("and all its contents", "recursive"), ("k8s", "kubernetes"),
)

SYNONYMS: dict[str, tuple[str, ...]] = {
    "remove": ("delete", "erase", "rm", "drop", "uninstall", "del"),
    "revert": ("undo", "rollback", "roll-back", "discard"),
    "create": ("make", "generate", "define", "declare", "send"),
    "edit": ("change", "modify", "alter", "amend"),
    "update": ("upgrade", "bump"),
    # Verbs of inquiry: in a coding question "get", "find", "check", "see" and "show" ask the same thing.
    "get": ("obtain", "retrieve", "access", "determine", "find", "search", "locate", "lookup", "detect", "identify",
            "check", "test", "verify", "tell", "validate", "whether", "confirm", "show", "list", "view", "display",
            "see", "output", "ls", "read", "load"),
    "install": ("setup", "add-package"),
    "run": ("execute", "launch", "invoke"),
    "exit": ("quit",),
    "kill": ("terminate",),
    "convert": ("transform", "turn", "cast"),
    "join": ("concatenate", "concat", "combine"),
    "fix": ("resolve", "solve", "repair"),
    "copy": ("clone", "duplicate-of"),
    "iterate": ("loop", "traverse"),
    "element": ("item", "entry"),
    "directory": ("folder", "dir"),
    "repository": ("repo",),
    "dictionary": ("dict", "map-type"),
    "configuration": ("config", "conf"),
    "environment": ("env",),
    "variable": ("var",),
    "argument": ("arg", "param", "parameter"),
    "function": ("func", "fn", "method-def"),
    "database": ("db",),
    "javascript": ("js",),
    "typescript": ("ts",),
    "go": ("golang",),
    "kubernetes": ("k8s",),
    "postgresql": ("postgres", "psql", "pg"),
    "integer": ("int",),
    "string": ("str",),
    "application": ("app",),
    "documentation": ("docs", "doc"),
    "package": ("pkg", "dependency", "dependencies"),
    "message": ("msg",),
    "last": ("latest", "newest", "recent"),
    "terminal": ("shell", "bash", "console", "cli", "cmd"),
    "big": ("large", "huge"),
    "small": ("little", "tiny"),
    "fast": ("quick", "speedy"),
    "all": ("every", "each", "entire", "whole"),
    "error": ("exception",),
    "regex": ("regexp",),
    "symlink": ("softlink",),
    "multiple": ("several", "many"),
    "lowercase": ("lower-case",),
    "uppercase": ("upper-case", "capitalize"),
    "strip": ("trim",),
    "element-count": ("size-of",),
}

# Known opposites: the content-word rule names them "antonym" (they are rejected either way).
ANTONYMS = (
    ("enable", "disable"), ("start", "stop"), ("add", "remove"), ("soft", "hard"), ("local", "remote"),
    ("encrypt", "decrypt"), ("serialize", "deserialize"), ("lock", "unlock"), ("upper", "lower"),
    ("uppercase", "lowercase"), ("increase", "decrease"), ("push", "pull"), ("compress", "extract"),
    ("compress", "decompress"), ("zip", "unzip"), ("mount", "unmount"), ("encode", "decode"),
    ("ascending", "descending"), ("get", "hide"), ("global", "local"), ("sync", "async"),
    ("synchronous", "asynchronous"), ("grant", "revoke"), ("min", "max"), ("minimum", "maximum"),
    ("get", "write"), ("freeze", "unfreeze"), ("public", "private"), ("attach", "detach"),
    ("left", "right"), ("static", "dynamic"), ("upload", "download"), ("follow", "unfollow"),
    ("install", "remove"), ("open", "close"), ("first", "last"), ("before", "after"), ("horizontal", "vertical"),
    ("horizontally", "vertically"), ("import", "export"), ("get", "set"), ("allow", "deny"), ("true", "false"),
    ("inner", "outer"), ("sum", "average"), ("min", "max"), ("mutable", "immutable"), ("stage", "unstage"),
)
