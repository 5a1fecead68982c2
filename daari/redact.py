"""Secrets that hide inside ordinary values: credentials in a URL's userinfo or query string.

`redact_url` is for every place a configured URL is shown (startup table, logs, /healthz, the config
endpoint, error messages); `url_secrets` lists the parts to scrub from text an upstream sends back.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"


def redact_url(url: str) -> str:
    """The URL with its userinfo and every query value replaced by ***; the rest as written."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED  # not a URL we can take apart: show nothing of it
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(name, REDACTED) for name, _ in pairs], safe="*") if pairs else REDACTED
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str | None) -> list[str]:
    """The userinfo and query values of `url` (each at least 4 characters), to be scrubbed from text."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.username or "", parts.password or ""]
    found.extend(value for _, value in parse_qsl(parts.query, keep_blank_values=True))
    return [s for s in found if len(s) >= 4]


def scrub(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
