"""Request shapes of real coding clients that the size and keyword rules cannot see (docs/routing.md, R-C1..R-C3).

Recognised from the payload only (system prompt markers, max_tokens), never from headers or client names:
- side calls: a title or name for a session, a topic check, a quota/connectivity probe (`max_tokens` <= 4);
- edit-format requests: the model must answer in an edit protocol (aider's SEARCH/REPLACE blocks, unified
  diffs, whole files), so an acknowledgement is not an answer;
- XML-tool agents: tools described in the system prompt as XML tags (Roo Code, Cline) with no `tools` array.
"""

from __future__ import annotations

import re
from typing import Literal

from daari.protocol.chat import ChatRequest

Shape = Literal["side_call", "edit_format", "xml_tools"]

PROBE_MAX_TOKENS = 4  # an answer this short is a probe: nobody reads it (Claude Code's quota check sends 1)
SIDE_CALL_SCAN_CHARS = 4000  # side-call instructions are short; a long system prompt is a main turn

# A short title / name / topic for a session or conversation, asked for in a few words (Claude Code's
# session title and /rename name, its older new-topic check, and the same idea in other clients).
SIDE_CALL = re.compile(
    r"\b(?:title|name|topic|summary|label)\b[^\n]{0,120}?\(?\b\d\s*(?:-|–|to)\s*\d{1,2}\s+words\b"
    r"|\b(?:\d\s*(?:-|–|to)\s*\d{1,2})[- ]word\s+(?:title|name|topic|summary|label)\b"
    r"|\bnew\s+conversation\s+topic\b|\bisNewTopic\b"
    r"|\b(?:title|name)\s+(?:for|of)\s+(?:this|the)\s+(?:coding\s+)?(?:session|conversation|chat|thread)\b"
    r"|\b(?:session|conversation|chat)\s+title\b",
    re.IGNORECASE,
)
# An edit protocol the answer must follow.
EDIT_FORMAT = re.compile(
    r"<{7} SEARCH|>{7} REPLACE|\bSEARCH/REPLACE\s+blocks?\b"
    r"|\bunified\s+diff\b[^\n]{0,80}\bdiff\s+-U0\b"
    r"|\*added\s+these\s+files\s+to\s+the\s+chat\*"
    r"|\boutput\s+a\s+copy\s+of\s+each\s+file\s+that\s+needs\s+changes\b",
    re.IGNORECASE,
)
# What each EDIT_FORMAT alternative cannot match without (lower-case): a text holding none of a branch's
# words is no match, found with a few substring scans where the regex (an alternation that can start anywhere)
# takes ~100 ns a character: 1.4 ms for an 11 KB system prompt on every request (bench/body_size.py).
# Exact for any text without "ſ", "ı" or "İ": under IGNORECASE those match "s" and "i", which lower() does not
# give ("K", the Kelvin sign, lower-cases to "k"; re's other case equivalences involve no ASCII letter).
_FOLDS_TO_ASCII = ("ſ", "ı", "İ")
_EDIT_FORMAT_WORDS = (("<<<<<<< search",), (">>>>>>> replace",), ("search/replace",), ("unified", "-u0"),
                      ("*added",), ("output", "copy", "each", "needs", "changes"))
# Tools described as XML tags in the prompt: a "tool use" section and at least one closing tool tag.
XML_TOOL_SECTION = re.compile(r"\bTOOL\s+USE\b|\btools?\s+(?:use|calls?)\s+(?:are\s+)?formatted\s+using\s+XML",
                              re.IGNORECASE)
XML_TOOL_TAG = re.compile(
    r"</(?:attempt_completion|read_file|write_to_file|execute_command|replace_in_file|apply_diff"
    r"|ask_followup_question|search_files|list_files|use_mcp_tool)>"
)


def system_text(request: ChatRequest) -> str:
    return "\n".join(m.text() for m in request.messages if m.role == "system")


def asks_edit_format(text: str) -> bool:
    """EDIT_FORMAT.search(text), skipped for a text that lacks a word every alternative needs."""
    if text.isascii() or not any(char in text for char in _FOLDS_TO_ASCII):
        lower = text.lower()
        if not any(all(word in lower for word in words) for words in _EDIT_FORMAT_WORDS):
            return False
    return EDIT_FORMAT.search(text) is not None


def is_probe(request: ChatRequest) -> bool:
    """A request whose answer cannot be more than a few tokens: a quota or connectivity check."""
    max_tokens = request.max_tokens
    return max_tokens is not None and max_tokens <= PROBE_MAX_TOKENS and not request.tools


def is_xml_tools_agent(request: ChatRequest) -> bool:
    return not request.tools and _xml_tools(system_text(request))


def _xml_tools(system: str) -> bool:
    return bool(XML_TOOL_SECTION.search(system) and XML_TOOL_TAG.search(system))


def recognise(request: ChatRequest) -> Shape | None:
    """Which client shape the request has, if any; the most specific first."""
    if is_probe(request):
        return "side_call"
    system = system_text(request)
    if not request.tools and _xml_tools(system):
        return "xml_tools"
    if asks_edit_format(system) or any(asks_edit_format(m.text()) for m in request.messages[:-1]
                                       if m.role == "user"):
        return "edit_format"
    if not request.tools and system and len(system) <= SIDE_CALL_SCAN_CHARS and SIDE_CALL.search(system):
        return "side_call"
    return None
