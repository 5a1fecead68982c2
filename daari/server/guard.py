"""The request guard: who may talk to daari at all (Host, Origin, token, content type), for HTTP and websockets.

Pure checks over lower-cased request headers; the ASGI app runs them before routing, and a websocket route
calls `check_websocket` before it accepts the handshake. See docs/operations.md "Security".
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from daari.config import ServerConfig
from daari.errors import Forbidden, StartupError, Unauthorized, UnsupportedMediaType

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
TOKEN_HEADER = "x-daari-token"


@dataclass(frozen=True)
class GuardPolicy:
    allowed_hosts: frozenset[str]  # host names without port; "*" allows any Host
    allowed_origins: frozenset[str]  # exact origins ("https://app.example"); empty: no browser may call
    token: str | None = None  # when set, every request carries it
    # Host header value -> allowed: a client sends the same Host every time, so parse each value once.
    _host_verdicts: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def allows_host(self, host: str) -> bool:
        verdict = self._host_verdicts.get(host)
        if verdict is None:
            verdict = "*" in self.allowed_hosts or host_name(host) in self.allowed_hosts
            if len(self._host_verdicts) >= 256:  # bounded: a client cycling Host values cannot grow it
                self._host_verdicts.clear()
            self._host_verdicts[host] = verdict
        return verdict

    @classmethod
    def from_config(cls, server: ServerConfig, environ: Mapping[str, str] | None = None) -> GuardPolicy:
        env = os.environ if environ is None else environ
        hosts = {*LOOPBACK_HOSTS, *(host_name(h) for h in server.allowed_hosts)}
        if server.host not in WILDCARD_BINDS:
            hosts.add(host_name(server.host))
        token = env.get(server.token_env) or None
        return cls(frozenset(hosts), frozenset(o.rstrip("/").lower() for o in server.allowed_origins), token)


def host_name(value: str) -> str:
    """The host part of a Host header or a bind address, lower-cased: no port, no brackets, no final dot."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8787
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def is_loopback(host: str) -> bool:
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def require_token_where_needed(server: ServerConfig, policy: GuardPolicy) -> None:
    """Refuse to start where only the token would stand between a caller and the keys: on a non-loopback
    address (anyone on the network), and with `allowed_hosts: ["*"]` (no Host check: a DNS-rebinding page is
    then same-origin)."""
    if policy.token is not None:
        return
    if not is_loopback(server.host):
        raise StartupError(f"refusing to listen on {server.host} without a token: set {server.token_env} "
                           "(server.token_env) to a long random value, or bind to 127.0.0.1")
    if "*" in policy.allowed_hosts:
        raise StartupError(f'refusing to start with server.allowed_hosts ["*"] without a token: any web page '
                           f"could reach daari through DNS rebinding. Set {server.token_env} (server.token_env) "
                           "to a long random value, or list the host names daari is reached by")


def check_host(policy: GuardPolicy, headers: Mapping[str, str]) -> None:
    if "*" in policy.allowed_hosts:
        return
    host = headers.get("host")
    if host is None:
        raise Forbidden("the request has no Host header")
    if not policy.allows_host(host):
        # A foreign name that resolves to this machine is how DNS rebinding reaches a local server.
        raise Forbidden(f"Host {host_name(host)!r} is not allowed; add it to server.allowed_hosts")


def same_origin(headers: Mapping[str, str]) -> bool:
    """The page that sends the request was served by this daari (its own /ui): Origin names the Host itself.

    Safe because `check_host` runs first: the Host is one of ours, so no rebinding name can be that origin.
    """
    origin, host = headers.get("origin"), headers.get("host")
    if origin is None or host is None:
        return False
    scheme, _, rest = origin.strip().lower().rstrip("/").partition("://")
    return scheme in ("http", "https") and rest == host.strip().lower()


def check_origin(policy: GuardPolicy, headers: Mapping[str, str]) -> None:
    """A browser names the page that sends the request; tools and SDKs send no Origin. daari's own page may call."""
    origin = headers.get("origin")
    if origin is not None and origin.rstrip("/").lower() not in policy.allowed_origins and not same_origin(headers):
        raise Forbidden(f"Origin {origin!r} is not allowed; add it to server.allowed_origins")


def check_token(policy: GuardPolicy, headers: Mapping[str, str]) -> None:
    if policy.token is None:
        return
    if not _carries_token(policy.token, headers):
        raise Unauthorized(f"this daari needs its token: send it as {TOKEN_HEADER} or Authorization: Bearer")


def check_json_body(method: str, headers: Mapping[str, str]) -> None:
    """A POST must say JSON: a web page can send text/plain or form bodies without asking (no preflight)."""
    if method != "POST":
        return
    content_type = headers.get("content-type", "")
    if content_type == "application/json":  # what nearly every client sends, exactly
        return
    content_type = content_type.split(";", 1)[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        shown = content_type or "none"
        raise UnsupportedMediaType(f"the request body must be JSON (content-type: application/json), got {shown}")


def check_http(policy: GuardPolicy, method: str, headers: Mapping[str, str], query_token: str | None = None) -> None:
    """`query_token`: only for opening daari's own page (GET /ui?token=...), which a browser navigates to."""
    check_host(policy, headers)
    check_origin(policy, headers)
    if not _query_token_ok(policy, query_token):
        check_token(policy, headers)
    check_json_body(method, headers)


def _query_token_ok(policy: GuardPolicy, query_token: str | None) -> bool:
    return query_token is not None and policy.token is not None and \
        hmac.compare_digest(query_token.encode(), policy.token.encode())


def check_websocket(policy: GuardPolicy, headers: Mapping[str, str], query_token: str | None = None) -> None:
    """For a websocket handshake: browsers do not apply CORS to websockets, so Origin matters even more.

    A browser cannot set headers on a websocket, so the token may also come as `?token=` (daari's own page).
    """
    check_host(policy, headers)
    check_origin(policy, headers)
    if not _query_token_ok(policy, query_token):
        check_token(policy, headers)


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers


def cors_headers(policy: GuardPolicy, headers: Mapping[str, str]) -> dict[str, str]:
    """Response headers for an allowed browser origin; nothing when no Origin came (or none is configured)."""
    origin = headers.get("origin")
    if origin is None or origin.rstrip("/").lower() not in policy.allowed_origins:
        return {}
    return {"access-control-allow-origin": origin, "vary": "origin"}


def preflight_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The preflight answer besides `cors_headers` (which every response to an allowed origin carries)."""
    requested = headers.get("access-control-request-headers", "content-type")
    return {"access-control-allow-methods": "GET, POST",
            "access-control-allow-headers": requested, "access-control-max-age": "600"}


def without_token(policy: GuardPolicy, headers: dict[str, str]) -> dict[str, str]:
    """The headers the rest of daari sees: daari's own token removed, so it is never forwarded nor cached on."""
    if TOKEN_HEADER not in headers and (policy.token is None or "authorization" not in headers):
        return headers  # nothing of daari's in them: no copy
    out = {k: v for k, v in headers.items() if k != TOKEN_HEADER}
    if policy.token is not None and _bearer(out.get("authorization")) == policy.token:
        del out["authorization"]
    return out


def _bearer(value: str | None) -> str | None:
    if value is None:
        return None
    scheme, _, credential = value.strip().partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else None


def _carries_token(token: str, headers: Mapping[str, str]) -> bool:
    expected = token.encode()
    for candidate in (headers.get(TOKEN_HEADER), _bearer(headers.get("authorization"))):
        if candidate is not None and hmac.compare_digest(candidate.strip().encode(), expected):
            return True
    return False
