"""One exception hierarchy for everything daari reports to a client.

Each error knows its HTTP status and its type in both protocols; `daari.protocol.openai_wire` and
`daari.protocol.anthropic_wire` render it into that protocol's error shape. Messages never hold secrets.
"""

from __future__ import annotations


class DaariError(Exception):
    status: int = 500
    openai_type: str = "api_error"
    anthropic_type: str = "api_error"
    code: str | None = None

    @property
    def anthropic_status(self) -> int:
        """Anthropic reports overload as 529 where OpenAI says 503."""
        return 529 if self.anthropic_type == "overloaded_error" else self.status

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after = retry_after


class InvalidRequest(DaariError):
    status = 400
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"


class NotFound(DaariError):
    status = 404
    openai_type = "invalid_request_error"
    anthropic_type = "not_found_error"
    code = "not_found"


class MethodNotAllowed(DaariError):
    status = 405
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(DaariError):
    status = 413
    openai_type = "invalid_request_error"
    anthropic_type = "request_too_large"
    code = "request_too_large"


class RequestTimeout(DaariError):
    """The client did not send its whole request body in time (server.body_timeout_s)."""

    status = 408
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "request_timeout"


class UpgradeRequired(DaariError):
    """A plain HTTP request to a websocket-only endpoint (the live tail)."""

    status = 426
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "upgrade_required"


class HeadersTooLarge(DaariError):
    """The request head has more header fields, or more bytes of them, than daari takes."""

    status = 431
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "headers_too_large"


class Overloaded(DaariError):
    """daari itself sheds load (a full mailbox, an actor that is down)."""

    status = 503
    openai_type = "server_error"
    anthropic_type = "overloaded_error"
    code = "overloaded"


class ActorDown(Overloaded):
    """An actor daari needs stopped or its supervisor gave up: asks fail at once, pointing at /healthz."""

    code = "actor_down"


class ActorCrashed(DaariError):
    """An actor failed while working on this request (it is restarted)."""

    status = 500
    code = "actor_crashed"


class UpstreamError(DaariError):
    """An upstream answered wrongly: a 5xx, malformed JSON, a truncated stream."""

    status = 502
    openai_type = "server_error"
    anthropic_type = "api_error"
    code = "upstream_error"

    def __init__(self, message: str, *, upstream: str = "", upstream_status: int | None = None,
                 retryable: bool = False, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.upstream = upstream
        self.upstream_status = upstream_status
        self.retryable = retryable


class UpstreamRateLimited(UpstreamError):
    status = 429
    openai_type = "rate_limit_error"
    anthropic_type = "rate_limit_error"
    code = "rate_limited"


class UpstreamOverloaded(UpstreamError):
    """The upstream said overloaded (HTTP 529 or a mid-stream overloaded_error): the client sees the same."""

    status = 503
    openai_type = "server_error"
    anthropic_type = "overloaded_error"
    code = "upstream_overloaded"


_OPENAI_TYPE_BY_STATUS = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}
_ANTHROPIC_TYPE_BY_STATUS = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                             413: "request_too_large"}


class UpstreamRejected(UpstreamError):
    """The upstream refused the request with a 4xx (not 429): its status, message and type pass through."""

    code = "upstream_rejected"

    def __init__(self, message: str, *, status: int, anthropic_type: str | None = None, **kw: object) -> None:
        kw.setdefault("upstream_status", status)
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.status = status
        self.openai_type = _OPENAI_TYPE_BY_STATUS.get(status, "invalid_request_error")
        self.anthropic_type = anthropic_type or _ANTHROPIC_TYPE_BY_STATUS.get(status, "invalid_request_error")


class UpstreamTimeout(UpstreamError):
    status = 504
    openai_type = "timeout_error"
    anthropic_type = "api_error"
    code = "upstream_timeout"


class UpstreamUnavailable(UpstreamError):
    """The circuit breaker is open, or the upstream refused the connection."""

    status = 503
    openai_type = "server_error"
    anthropic_type = "overloaded_error"
    code = "upstream_unavailable"


class ToolCallsUnsupportedLocally(DaariError):
    status = 422
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "tool_calls_unsupported_locally"


class ModelNotInstalled(DaariError):
    """An embedded model's package is missing; the message says the exact command to fix it."""

    status = 503
    openai_type = "server_error"
    anthropic_type = "api_error"
    code = "model_not_installed"


class Unauthorized(DaariError):
    """No valid daari token, or no credential for a tier that forwards the client's own key."""

    status = 401
    openai_type = "authentication_error"
    anthropic_type = "authentication_error"
    code = "unauthorized"


class Forbidden(DaariError):
    """The request guard refused it: a foreign Host (DNS rebinding) or an Origin not allowed (a web page)."""

    status = 403
    openai_type = "permission_error"
    anthropic_type = "permission_error"
    code = "forbidden"


class UnsupportedMediaType(DaariError):
    status = 415
    openai_type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    code = "unsupported_media_type"


class ConfigError(Exception):
    """daari.yaml is wrong: an unknown key, a bad value. Not a client error."""


class StartupError(Exception):
    """daari cannot start (the data dir is not writable, the port is taken): one line says why."""
