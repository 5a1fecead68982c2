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
from daari.routing.folded import Folded, contains_all_of_any, lower_text

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
# Every match holds one of these (the word counts, the topic alternatives, "title"/"name" the rest): a system prompt
# with none is no match without the search (as classifier.py's rules; tests/test_rule_scans.py).
SIDE_CALL_HINTS = ("word", "topic", "title", "name")
_SIDE_CALL = Folded(SIDE_CALL, SIDE_CALL_HINTS)  # on the lower-cased text where that finds the same (routing/folded.py)
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
# Exact for any text without "ſ", "ı" or "İ" (routing/folded.py `lower_text`).
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
    lower = lower_text(text)
    if lower is not None and not contains_all_of_any(lower, _EDIT_FORMAT_WORDS):
        return False
    return EDIT_FORMAT.search(text) is not None


def is_probe(request: ChatRequest) -> bool:
    """A request whose answer cannot be more than a few tokens: a quota or connectivity check."""
    max_tokens = request.max_tokens
    return max_tokens is not None and max_tokens <= PROBE_MAX_TOKENS and not request.tools


def is_xml_tools_agent(request: ChatRequest) -> bool:
    return not request.tools and _xml_tools(system_text(request))


def _xml_tools(system: str) -> bool:
    # The tag first: a literal "</" is found in C at memchr speed, where the section's case-insensitive
    # alternation is tried at every character of what may be a 40 KB agent manual.
    return bool(XML_TOOL_TAG.search(system) and XML_TOOL_SECTION.search(system))


def is_side_call_prompt(system: str) -> bool:
    """R-C1's side-call wording in a short system prompt."""
    return bool(system) and len(system) <= SIDE_CALL_SCAN_CHARS and _SIDE_CALL.found(system, lower_text(system))


def _earlier_user_asks_edit_format(request: ChatRequest) -> bool:
    for message in request.messages[:-1]:
        if message.role == "user" and asks_edit_format(message.text()):
            return True
    return False


def recognise(request: ChatRequest) -> Shape | None:
    """Which client shape the request has, if any; the most specific first."""
    if is_probe(request):
        return "side_call"
    system = system_text(request)
    if not request.tools and _xml_tools(system):
        return "xml_tools"
    if asks_edit_format(system) or _earlier_user_asks_edit_format(request):
        return "edit_format"
    if not request.tools and is_side_call_prompt(system):
        return "side_call"
    return None
