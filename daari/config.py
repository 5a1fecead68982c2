"""daari.yaml: every key with its default, loaded strictly (an unknown key is an error naming it).

The dataclasses below are the documentation of record for defaults; docs/configuration.md mirrors them.
Ranges: a field's `Annotated[..., Ge(1)]` (annotated_types) is checked by pydantic; a plain int or float
field must be >= 0 (sizes, counts, seconds); `Annotated[float, Le(0)]` and the like state other ranges.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from annotated_types import Ge, Gt, Le, Lt
from pydantic import TypeAdapter, ValidationError

from daari.datadir import default_data_dir
from daari.errors import ConfigError
from daari.models import EMBEDDED_MODELS
from daari.redact import redact_url
from daari.task_types import MODEL_TASK_TYPES
from daari.tenant import team_tenant

TIER_NAMES = ("L3", "L4", "L5", "L6")
TierName = Literal["L3", "L4", "L5", "L6"]
CLIENT_CALL_TYPES = ("main", "subagent", "background", "long_context")
# docs/performance.md, "1,000 streams at once and the collector's pauses" and "Shorter young collections"
GC_YOUNG_THRESHOLD = 10_000
GC_MIDDLE_THRESHOLD = 50
DEFAULT_CONCURRENCY = {"embedded": 1, "ollama": 4, "openai": 32, "anthropic": 32}
ExecutorKind = Literal["embedded", "openai", "ollama", "anthropic"]


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: Annotated[int, Ge(0), Le(65535)] = 8787  # 0: any free port
    # A request body (decompressed, when it comes compressed) past this is refused with 413 as it is read.
    max_body_bytes: Annotated[int, Ge(1)] = 8 * 1024 * 1024
    # A compressed body may grow at most this many times its size on the wire (past 1 MiB): 413 past it.
    max_expansion_ratio: Annotated[float, Ge(1)] = 10_000.0
    # Slow or oversized clients (docs/operations.md, "Limits"): a connection that has not sent a whole request
    # head this long after it opened, or after its previous answer, is closed (also the keep-alive idle time);
    # a body not received whole this long after its head is answered 408.
    header_timeout_s: Annotated[float, Gt(0)] = 30.0
    body_timeout_s: Annotated[float, Gt(0)] = 60.0
    max_header_bytes: Annotated[int, Ge(1024)] = 32 * 1024  # names and values of all fields together; 431 past it
    max_headers: Annotated[int, Ge(8)] = 100  # header fields in one request; 431 past it
    grace_period_s: float = 10.0  # SIGINT/SIGTERM: in-flight requests get this long, then are cancelled
    # After this many seconds with next to no CPU used, freed heap memory goes back to the OS (glibc's
    # malloc_trim, once per quiet period: server/idle_trim.py); 0: never.
    idle_trim_s: Annotated[float, Ge(0)] = 30.0
    # Request bodies at least this large are decoded, validated and hashed on a worker thread (0: never).
    thread_parse_bytes: int = 256 * 1024
    # Host header names accepted besides the loopback names and the bound address ("*": any; DNS rebinding).
    allowed_hosts: list[str] = field(default_factory=list)
    # Browser origins allowed to call daari (CORS); a request with any other Origin gets 403.
    allowed_origins: list[str] = field(default_factory=list)
    # Environment variable holding daari's own token; when it is set, every request must carry it.
    token_env: str = "DAARI_TOKEN"
    # Connections the kernel holds for daari before it accepts them (the listen backlog; Linux caps it at
    # net.core.somaxconn). Hypercorn's own default, 100, reset connections when hundreds of clients opened
    # streams at once (docs/performance.md, "Stream relay per chunk").
    backlog: Annotated[int, Ge(1)] = 1024
    # The HTTP/1.1 front end: "hypercorn" (HTTP/1.1, h2c, websockets) or "h11", daari's own lean HTTP/1.1 and
    # websocket server on h11/wsproto (docs/configuration.md, "Front end"). Both serve the same app and limits.
    front_end: Literal["hypercorn", "h11"] = "hypercorn"
    # The cyclic collector's youngest generation is collected after this many net new container objects
    # (Python's own: 700; 0 leaves Python's). Larger: fewer of a request's or stream's live objects are moved to
    # older generations, so full collections, each a pause of every task, come less often (daari/heap.py).
    gc_young_threshold: Annotated[int, Ge(0)] = GC_YOUNG_THRESHOLD
    # The middle generation is collected after this many young collections (Python's own: 10; 0 leaves
    # Python's); with the young threshold it sets how many new objects come between middle collections.
    gc_middle_threshold: Annotated[int, Ge(0)] = GC_MIDDLE_THRESHOLD


@dataclass
class LogConfig:
    # Seconds between the INFO summary of routing decisions (hits included, which are logged one by one
    # only at DEBUG); 0 turns it off.
    summary_interval_s: Annotated[float, Ge(0)] = 60.0
    # The decision log (<data_dir>/decisions.sqlite): one row per request, written in batches off the
    # request path. Prompts: "none" (nothing), "hash" (a keyed hash of the last user message, so repeats
    # can be told apart without the text), "full" (the text; it may hold code and secrets).
    decisions: bool = True
    prompts: Literal["none", "hash", "full"] = "hash"
    retention_days: Annotated[float, Gt(0)] = 30.0
    max_rows: Annotated[int, Ge(1000)] = 1_000_000
    queue_size: Annotated[int, Ge(16)] = 4096  # decisions waiting for the writer; past it rows are dropped
    batch_size: Annotated[int, Ge(1)] = 256
    # The writer wakes at most this often: one hand-over to its process and one SQLite transaction per interval,
    # not per request. Decisions arriving meanwhile wait in its queue (queue_size).
    flush_interval_s: Annotated[float, Ge(0)] = 0.25


@dataclass
class TailConfig:
    buffer: Annotated[int, Ge(1)] = 256  # decisions queued per live-tail client; past it the client is closed
    send_timeout_s: Annotated[float, Gt(0)] = 10.0  # a client that reads nothing this long is dropped


@dataclass
class PriceConfig:
    input_per_mtok: Annotated[float, Ge(0)] = 0.0  # USD per million prompt tokens
    output_per_mtok: Annotated[float, Ge(0)] = 0.0  # USD per million completion tokens
    # The provider's prompt cache: a cached prompt token costs input x read, a token written to the cache input x
    # write. Anthropic's list prices (5-minute cache); OpenAI has no write premium (write 1.0) and reads at 0.1-0.5.
    cache_read_multiplier: Annotated[float, Ge(0)] = 0.1
    cache_write_multiplier: Annotated[float, Ge(0)] = 1.25


@dataclass
class PricingConfig:
    """What an answer is estimated to cost (daari/pricing.py): by the model that answered, else by tier.

    Tiers not listed cost nothing (local compute, caches, rules, tools). L6's default is a Sonnet-class
    list price; set your frontier model's price here for `daari report` to say what daari saved.
    """

    tiers: dict[str, PriceConfig] = field(default_factory=lambda: {"L6": PriceConfig(3.0, 15.0)})
    models: dict[str, PriceConfig] = field(default_factory=dict)


@dataclass
class L0Config:
    enabled: bool = True
    memory_mb: float = 64.0  # in-memory LRU in front of SQLite, by the entries' bytes
    max_pending_mb: float = 16.0  # answers acknowledged but not yet on disk; past it new ones are not cached
    max_disk_mb: float = 1024.0  # the SQLite store; past it the least recently used entries go (0: no bound)
    ttl_s: float = 2_592_000.0  # 30 days: older entries are not served and are deleted (0: never expire)


@dataclass
class L1Config:
    """The semantic cache (docs/caching.md, "L1"): embedding candidates, served only when verified."""

    enabled: bool = True
    # cosine (all-MiniLM-L6-v2) a candidate must reach to be verified. 0.70, not higher: the verifier decides
    # (rewordings that share few words score 0.70-0.80); measured per mode in docs/caching.md
    similarity_threshold: Annotated[float, Ge(0), Le(1)] = 0.70
    # pair_model: learned pair classifier with the lexical rules as vetoes (the default: it meets the most
    # targets of issue 18, docs/caching.md); lexical: the rules alone; model: a local model confirms
    verify: Literal["none", "lexical", "pair_model", "model"] = "pair_model"
    verify_tier: Literal["L3", "L4", "L5", "L6"] | None = None  # verify: model asks it (None: the first tier)
    max_entries: Annotated[int, Ge(1)] = 100_000  # oldest entries are evicted past this
    max_age_s: Annotated[float, Gt(0)] = 30 * 24 * 3600.0  # older entries are never served and are evicted
    embed_batch_size: Annotated[int, Ge(1)] = 32  # concurrent embeddings gathered into one model batch
    # how long the first request of a batch waits for company. 0: none; a batch is what queued while the model ran
    # the one before, and a lone request (an agent's turn) starts at once (docs/performance.md, "The L1 miss on an
    # agent's first turn")
    embed_batch_wait_ms: float = 0.0
    index_trees: Annotated[int, Ge(1)] = 16  # annoy trees: more is better recall, larger index, slower build
    rebuild_after: Annotated[int, Ge(1)] = 2000  # new entries searched exactly until the index is rebuilt
    # The false-hit rate L1 aims for: shadow samples raise the similarity bar per task type where they find
    # false hits (never below similarity_threshold; docs/caching.md, "Adaptive trust"). None: fixed threshold.
    error_bound: Annotated[float, Gt(0), Lt(1)] | None = 0.02
    # A candidate above the threshold that the verifier rejected is shown to the model as a draft (measured:
    # docs/caching.md, "Draft injection"; off because it did not win).
    draft_injection: bool = False
    # embeddings of recent texts, by text: an agent's tool loop sends the same last user turn on every turn, so its
    # L1 probe reuses the vector instead of running the model again (docs/performance.md, "L1 probe"; 0: off)
    embed_memo_mb: Annotated[float, Ge(0)] = 8.0


@dataclass
class RedisConfig:
    """The Redis of cache.backend: redis (docs/redis.md). The password never sits in the config: it is read from
    the environment variable `password_env`."""

    url: str = "redis://127.0.0.1:6379/0"  # rediss:// for TLS; a username may be in it, a password may not
    username: str | None = None  # an ACL user (None: the URL's, else Redis's "default")
    password_env: str | None = None  # the environment variable holding the password (AUTH)
    tls_ca_file: str | None = None  # rediss://: the CA that signed the server's certificate (None: the system's)
    key_prefix: str = "daari:"  # every key daari writes starts with it (several caches may share one Redis)
    # A command that takes longer fails and the request is served without the cache; Redis is then marked down
    # and asked again (PING) after reconnect_initial_s, doubling up to reconnect_max_s, until it answers.
    timeout_s: Annotated[float, Gt(0)] = 0.25
    connect_timeout_s: Annotated[float, Gt(0)] = 1.0
    reconnect_initial_s: Annotated[float, Gt(0)] = 0.25
    reconnect_max_s: Annotated[float, Gt(0)] = 10.0

    def __post_init__(self) -> None:
        check_redis_url(self.url, "cache.redis.url")
        if any(c in self.key_prefix for c in "*?[]\\ \t\r\n"):
            # It is matched as a pattern (SCAN, ACL key patterns): a glob character would reach other caches' keys.
            raise ConfigError(f"cache.redis.key_prefix: {self.key_prefix!r} holds a space or a glob character "
                              "(* ? [ ] \\)")
        if self.tls_ca_file and urlsplit(self.url).scheme != "rediss":
            raise ConfigError("cache.redis.tls_ca_file is set but cache.redis.url is not rediss://: the connection "
                              "would not use TLS")


@dataclass
class OrgCacheConfig:
    """The org cache (docs/redis.md, "Org cache"): after a local L0 miss, the tenant's entries in the org's Redis,
    reached with the Redis user `daari org-cache serve` hands this daari for the tenant. Off without `url`."""

    url: str | None = None  # the org-cache service, http(s)://host:port
    token_env: str = "DAARI_ORG_TOKEN"  # the environment variable holding this daari's token for the service
    # The tenant every request is in: this team id. None: each caller's own, from its API key's credential
    # partition (then a tier must forward client keys, and instances of one org share the partition secret).
    team: str | None = None
    tls_ca_file: str | None = None  # when the service names a rediss:// Redis: the CA that signed its certificate
    timeout_s: Annotated[float, Gt(0)] = 0.25  # per Redis command and per service call; slower is a miss
    # L1-org (cache.l1 on): the similarity an org entry needs. It can only raise the local bar
    # (cache.l1.similarity_threshold), never lower it; the verifier is the local one. None: the local bar.
    l1_similarity_threshold: Annotated[float, Ge(0), Le(1)] | None = None
    # L1-org without a team (each caller's key its own tenant): the indexes of this many most recently active key
    # tenants are held, each up to cache.l1.max_entries; the least recent is dropped. 0: no L1-org for key tenants.
    l1_key_tenants: Annotated[int, Ge(0)] = 4

    def __post_init__(self) -> None:
        if self.url is not None and urlsplit(self.url).scheme not in ("http", "https"):
            raise ConfigError(f"cache.org.url: expected an http:// or https:// URL, got {redact_url(self.url)!r}")
        if self.team is not None:
            team_tenant(self.team)


@dataclass
class CacheConfig:
    l0: L0Config = field(default_factory=L0Config)
    l1: L1Config = field(default_factory=L1Config)
    # Where L0 and L1 entries live: "disk" (SQLite files in data_dir) or "redis" (shared by every daari pointed at
    # the same Redis and key_prefix; each keeps its own in-memory L0 front and vector index).
    backend: Literal["disk", "redis"] = "disk"
    redis: RedisConfig = field(default_factory=RedisConfig)
    org: OrgCacheConfig = field(default_factory=OrgCacheConfig)  # L0-org after a local miss (docs/redis.md)


def check_redis_url(url: str, where: str) -> None:
    """redis:// or rediss://, and no password in it: passwords come from an environment variable."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(f"{where}: expected a redis:// or rediss:// URL, got {redact_url(url)!r}")
    if parts.password:
        raise ConfigError(f"{where}: the URL holds a password; put it in the environment variable named by "
                          "password_env instead")


@dataclass
class ShadowConfig:
    """Shadow sampling (docs/caching.md, "Trust"): a sampled answer asked again, in the background, of the tier
    that would have answered without the cache (or, for tier evals, of the next tier up), and compared."""

    rate: Annotated[float, Ge(0), Le(1)] = 0.02  # share of cache hits (L0, L1) sampled
    tier_rate: Annotated[float, Ge(0), Le(1)] = 0.0  # share of L2/L3/L4 answers asked again one tier up
    max_per_minute: Annotated[int, Ge(1)] = 6  # samples started per minute at most (both kinds)
    daily_tokens: int = 50_000  # tokens (prompt + answer) shadow calls may spend per UTC day; 0: none
    max_answer_tokens: Annotated[int, Ge(1)] = 1024  # a shadow answer's max_tokens (the client's, if lower)
    queue: Annotated[int, Ge(1)] = 32  # samples waiting for the ShadowActor; past it they are dropped (counted)
    wait_s: Annotated[float, Gt(0)] = 300.0  # a sample waits this long at most for an idle slot on its tier
    # Also shadow on the embedded model: it shares the CPU slot with every L1 lookup's embedding, so a
    # background generation there would slow clients by up to one token step each. Off: such samples skip.
    in_process: bool = False


@dataclass
class TrustConfig:
    shadow: ShadowConfig = field(default_factory=ShadowConfig)


@dataclass
class ActorsConfig:
    mailbox_size: Annotated[int, Ge(1)] = 256
    max_restarts: int = 5  # in restart_window_s; past that the actor stays down and /healthz says so
    restart_window_s: Annotated[float, Gt(0)] = 60.0
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 5.0


@dataclass
class TimeoutsConfig:
    connect_s: Annotated[float, Gt(0)] = 5.0
    first_byte_s: Annotated[float, Gt(0)] = 60.0  # request sent -> response headers / first stream chunk
    idle_s: Annotated[float, Gt(0)] = 30.0  # between two stream chunks
    total_s: Annotated[float, Gt(0)] = 600.0


@dataclass
class RetryConfig:
    max_retries: int = 2  # 5xx and 429 before the first byte only
    backoff_initial_s: float = 0.25
    backoff_max_s: float = 4.0
    retry_after_cap_s: float = 10.0


@dataclass
class BreakerConfig:
    failure_threshold: Annotated[int, Ge(1)] = 5  # consecutive failures that open the circuit
    cooldown_s: float = 30.0  # open -> half-open after this long


@dataclass
class TierConfig:
    executor: ExecutorKind = "embedded"
    base_url: str | None = None
    # None: the client's model name is passed through; embedded: which model (daari/models.py EMBEDDED_MODELS,
    # default qwen2.5-coder-0.5b-instruct)
    model: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key, never the key
    # A request crossing protocols: translate reasoning effort <-> thinking budget and strict tools
    # (docs/agents.md). Off by default: OpenAI's non-reasoning models refuse reasoning_effort, and Anthropic's
    # strict tools need a beta and a model that has it.
    translate_options: bool = False
    forward_client_key: bool = False  # anthropic: forward the client's own x-api-key
    # Generations at once; None: by executor (DEFAULT_CONCURRENCY): a local model serves one or a few at a
    # time, a hosted API many (agents such as Claude Code send parallel requests).
    max_concurrency: Annotated[int, Ge(1)] | None = None
    max_queue: int = 64  # requests waiting for a slot beyond max_concurrency; past that: 503 (Anthropic 529)
    max_tokens: Annotated[int, Ge(1)] = 512  # used when the client sets none (embedded and ollama)
    keep_alive: str | None = None  # ollama keep_alive
    # embedded: llama.cpp threads generating (None: the cores daari may use minus one, 1-4): the request path
    # keeps a core, so an agent turn beside a side call is not slowed (docs/performance.md, "Side calls").
    threads: Annotated[int, Ge(1)] | None = None
    # openai: which API the upstream speaks. "responses" posts to {base_url}/responses, and a Responses
    # client's body passes through untouched (custom tools, reasoning items); "chat": /chat/completions.
    wire_api: Literal["chat", "responses"] = "chat"
    # Hosted tools a Responses client offers (web_search, file_search, code_interpreter, image_generation,
    # remote MCP) that this tier cannot run: "drop" answers without them (said in daari_meta.dropped_tools),
    # "refuse" leaves such requests to a tier that can (a Responses upstream), else a 400.
    hosted_tools: Literal["drop", "refuse"] = "drop"
    # With no `model`: the client model names (fnmatch globs) this upstream serves; a request naming another is
    # not sent here. Empty: any name (Ollama: the models /api/tags lists).
    models: list[str] = field(default_factory=list)
    # The model's context window in tokens (prompt and answer). None: Ollama's /api/show says, else unknown. A
    # request that does not fit is sent to the next tier, never cut (docs/agents.md, "Context windows").
    context_window: Annotated[int, Ge(256)] | None = None
    # Tool calls a model writes as text made real (local/tool_repair.py): "auto" for Ollama and OpenAI-compatible
    # servers on this machine or a private network; "on" / "off" for any tier.
    tool_repair: Literal["auto", "on", "off"] = "auto"
    # Whether this tier's model runs outside this machine, so its requests are redacted (docs/privacy.md). None:
    # L6 yes, embedded no, any other tier yes unless its base_url is on this machine (loopback, localhost).
    remote: bool | None = None
    # anthropic: Claude Code's per-request billing system block. "auto" keeps it for Anthropic's own API (which
    # leaves it out of its cache) and strips it elsewhere (it would make every turn a cache miss).
    billing_block: Literal["auto", "keep", "strip"] = "auto"
    # anthropic: `cache_control.ttl` as the client sent it. "auto" keeps it and, once the upstream refuses a ttl,
    # leaves it out from then on; "strip" always leaves it out.
    cache_ttl: Literal["auto", "keep", "strip"] = "auto"
    # The HTTP client of an upstream tier: "auto" uses daari's lean HTTP/1.1 client for a plain http:// base_url
    # reached without a proxy (local servers: the least CPU per request) and httpx otherwise (https, proxies);
    # "httpx" always httpx (docs/performance.md, "The upstream hop").
    http_client: Literal["auto", "httpx"] = "auto"
    timeouts: TimeoutsConfig = field(default_factory=TimeoutsConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def concurrency(self) -> int:
        return max(1, self.max_concurrency or DEFAULT_CONCURRENCY[self.executor])


@dataclass
class FrontierConfig:
    enabled: bool = False  # gates L6


@dataclass
class ConfidenceConfig:
    """Pass marks on one 0-1 scale (routing spec): a self-evaluation rating r counts as r/5, so 0.8 is ">= 4/5"."""

    l3_min: Annotated[float, Ge(0), Le(1)] = 0.7
    l4_min: Annotated[float, Ge(0), Le(1)] = 0.8  # 0-1 like the others: was a 1-5 rating before the spec's scale
    l5_min: Annotated[float, Ge(0), Le(1)] = 0.8
    # Mean token logprob mapped to confidence 0 (docs/routing.md, "Calibration"): with -4.0, l3_min 0.7 is a
    # mean logprob of -1.2, about the pass mark measured on the golden prompts before the spec's 0.7.
    logprob_floor: Annotated[float, Le(0)] = -4.0


@dataclass
class RoutingConfig:
    escalation: bool = True
    slm_classifier: bool = False
    # How a stream request whose tier may escalate is served: "buffered" generates, judges, then streams
    # the accepted answer (escalation on low confidence works, first token comes late); "live" streams
    # from the first tier that answers (first token early; escalation only on faults before the first byte).
    stream_escalation: Literal["buffered", "live"] = "buffered"
    # Coding agents' call types -> the tier each starts at (docs/routing.md, "Client call types"): main,
    # subagent, background (titles, topics, summaries, quota probes), long_context. Unlisted: classified as usual.
    client_calls: dict[str, TierName] = field(default_factory=dict)
    # Client model names (fnmatch globs, first match wins) -> the tier they start at, e.g. {"claude-haiku-*": L3}.
    models: dict[str, TierName] = field(default_factory=dict)
    # A session stays on the tier holding its provider prompt cache unless moving saves more than rebuilding the
    # cache costs (docs/routing.md, "Session affinity").
    session_affinity: bool = True
    # The task types that start at L3 when a tier above it is configured; None: the judge figures' choice when L3
    # is the embedded model, every type when it is an upstream (daari/routing/l3_default.py, docs/routing.md).
    l3_task_types: list[str] | None = None


@dataclass
class RulesConfig:
    enabled: bool = True  # L2 generic rules (JSON/YAML conversions): deterministic, they run no commands
    max_input_bytes: int = 256 * 1024  # a larger message is left to the model tiers


@dataclass
class ToolCommandConfig:
    command: str | None = None  # split with shlex and run without a shell; None: found on PATH if installed
    timeout_s: float | None = None  # None: tools.timeout_s


@dataclass
class CcsConfig:
    """Command context store TTLs: how long a command's result answers a repeat without running it."""

    enabled: bool = True
    git_ttl_s: float = 60.0
    test_ttl_s: float = 300.0
    lint_ttl_s: float = 300.0
    build_ttl_s: float = 600.0
    script_ttl_s: float = 0.0  # 0: a script's result is never served again without running it


@dataclass
class ToolsConfig:
    enabled: bool = False  # L2-dev / Lt / CCS: daari runs commands only when this is true
    repo_root: str | None = None  # used when a request names no repo (X-Daari-Repo)
    allowed_roots: list[str] = field(default_factory=list)  # X-Daari-Repo must be a directory under one
    auto_confirm: bool = False  # true: destructive tools run without X-Daari-Confirm-Tool: true
    min_confidence: float = 0.95  # a message must *be* the command (see docs/tools.md)
    timeout_s: float = 300.0  # per command; the whole process group is killed past it
    max_concurrency: int = 2  # commands running at once
    max_queue: int = 16  # commands waiting beyond that; past it the request goes on to the model tiers
    answer_max_chars: int = 6000  # output shown in the answer; the full log is saved in <data_dir>/tools/logs
    log_max_bytes: int = 16 * 1024 * 1024  # per command log; output past it is dropped (and said so)
    # All command logs together (<data_dir>/tools/logs), the oldest deleted first, at start and after each command.
    logs_max_files: Annotated[int, Ge(1)] = 1000
    logs_max_total_bytes: Annotated[int, Ge(1)] = 512 * 1024 * 1024
    logs_max_age_days: Annotated[float, Gt(0)] = 14.0
    git: str = "git"  # the git executable
    eslint: ToolCommandConfig = field(default_factory=ToolCommandConfig)
    prettier: ToolCommandConfig = field(default_factory=ToolCommandConfig)
    intellij: ToolCommandConfig = field(default_factory=ToolCommandConfig)  # never searched on PATH
    ccs: CcsConfig = field(default_factory=CcsConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.allowed_roots, list) or not all(isinstance(r, str) for r in self.allowed_roots):
            raise ConfigError("tools.allowed_roots: expected a list of directory paths")
        if self.max_concurrency < 1 or self.max_queue < 0 or self.timeout_s <= 0:
            raise ConfigError("tools: max_concurrency >= 1, max_queue >= 0 and timeout_s > 0 are required")


@dataclass
class ResponsesConfig:
    # Stored responses (store: true) kept for previous_response_id, per credential partition: past `keep` in one,
    # its oldest are pruned; past `keep_total` in all, the oldest of the partition holding the most.
    keep: Annotated[int, Ge(1)] = 10_000
    keep_total: Annotated[int, Ge(1)] = 100_000


@dataclass
class PrivacyConfig:
    # Secrets in requests to remote tiers (docs/privacy.md): "on" swaps them for placeholders (restored in the
    # answer), "report" only counts them (metrics, daari_meta), "off" does neither.
    redact: Literal["on", "off", "report"] = "on"
    # fnmatch globs of files whose content never goes to a remote tier: a tool result of a call naming one is
    # replaced by a notice (e.g. [".env", ".env.*", "*.pem", "*/secrets/*"]).
    never_send: list[str] = field(default_factory=list)


@dataclass
class SpendLimits:
    daily_usd: Annotated[float, Ge(0)] | None = None  # None: no cap
    monthly_usd: Annotated[float, Ge(0)] | None = None


@dataclass
class BudgetConfig:
    # Caps in the price table's currency (docs/budget.md): a request that would cross one goes to the best tier
    # under it (X-Daari-Budget: downgraded), and is refused (429) only when no tier can answer it.
    daily_usd: Annotated[float, Ge(0)] | None = None  # all spend, per UTC day
    monthly_usd: Annotated[float, Ge(0)] | None = None  # all spend, per UTC month
    project: SpendLimits = field(default_factory=SpendLimits)  # each project's own (git root of X-Daari-Repo)
    client: SpendLimits = field(default_factory=SpendLimits)  # each client family's own (claude-code, codex...)
    # One project's or client's own caps, replacing `project:` or `client:` for it (a null period: uncapped).
    # Project keys: a git root path ("/home/me/app", "~/app"), or a name matched against its last part ("app").
    projects: dict[str, SpendLimits] = field(default_factory=dict)
    clients: dict[str, SpendLimits] = field(default_factory=dict)  # client family -> caps ("claude-code": {...})
    soft_ratio: Annotated[float, Gt(0), Le(1)] = 0.8  # past this share of a cap: a warning in the log and daari_meta
    output_tokens: Annotated[int, Ge(1)] = 500  # the answer size a request's cost is estimated with


@dataclass
class OtelConfig:
    # One OpenTelemetry trace per request over OTLP/HTTP with JSON (docs/observability.md): off by default.
    enabled: bool = False
    endpoint: str = "http://127.0.0.1:4318/v1/traces"
    service_name: str = "daari"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. an auth header your collector wants
    flush_interval_s: Annotated[float, Gt(0)] = 2.0
    batch_size: Annotated[int, Ge(1)] = 256  # decisions per export request
    queue_size: Annotated[int, Ge(1)] = 8192  # decisions waiting; past it they are dropped and counted
    timeout_s: Annotated[float, Gt(0)] = 5.0


def _default_tiers() -> dict[str, TierConfig]:
    return {"L3": TierConfig(executor="embedded")}


@dataclass
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    log: LogConfig = field(default_factory=LogConfig)
    tail: TailConfig = field(default_factory=TailConfig)
    pricing: PricingConfig = field(default_factory=PricingConfig)
    data_dir: str = field(default_factory=default_data_dir)  # $XDG_DATA_HOME/daari, else ~/.local/share/daari
    cache: CacheConfig = field(default_factory=CacheConfig)
    actors: ActorsConfig = field(default_factory=ActorsConfig)
    tiers: dict[str, TierConfig] = field(default_factory=_default_tiers)
    frontier: FrontierConfig = field(default_factory=FrontierConfig)
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    responses: ResponsesConfig = field(default_factory=ResponsesConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    otel: OtelConfig = field(default_factory=OtelConfig)

    def configured_tiers(self) -> list[str]:
        """Tiers in escalation order, L6 only when frontier is enabled."""
        return [t for t in TIER_NAMES if t in self.tiers and (t != "L6" or self.frontier.enabled)]


def _build(cls: Any, data: Any, path: str) -> Any:
    """Build dataclass `cls` from plain YAML data, rejecting unknown keys with their dotted path."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls, include_extras=True)
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{path}.{key}" if path else str(key)
        if key not in known:
            raise ConfigError(f"unknown config key '{dotted}' (known: {', '.join(sorted(known))})")
        kwargs[key] = _coerce(hints[key], value, dotted)
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, path: str, ranged: bool = False) -> Any:
    """`value` as type `hint`; `ranged`: the caller checks the range the field states (no default range)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Annotated:
        checked = _coerce(args[0], value, path, ranged=True)
        _check_range(hint, checked, path)
        return checked
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, path)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping")
        if path == "tiers":
            for name in value:
                if name not in TIER_NAMES:
                    raise ConfigError(f"unknown tier '{path}.{name}' (tiers are {', '.join(TIER_NAMES)})")
        return {k: _coerce(args[1], v, f"{path}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        return [_coerce(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{path}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, path)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not ranged:
            _check_range(Annotated[float, Ge(0)], value, path)  # no stated range: seconds, sizes are >= 0
        return float(value)
    if hint in (int, str, bool) and not (isinstance(value, hint) and not (hint is int and isinstance(value, bool))):
        raise ConfigError(f"{path}: expected {hint.__name__}, got {value!r}")
    if hint is int and not ranged:
        _check_range(Annotated[int, Ge(0)], value, path)
    return value


@cache
def _adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


def _check_range(hint: Any, value: Any, path: str) -> None:
    """One line naming the key when pydantic finds `value` outside the range `hint` states."""
    try:
        _adapter(hint).validate_python(value, strict=True)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"]
        raise ConfigError(f"{path}: {message[:1].lower()}{message[1:]} (got {value!r})") from None


def read_yaml(path: str | Path) -> Any:
    """A YAML config file's data ({} when empty), or a ConfigError that names the file."""
    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Read daari.yaml (if any), apply dotted `overrides` (CLI flags), and validate the whole."""
    data: dict[str, Any] = read_yaml(path) if path is not None else {}
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config_from_dict(data)


def config_from_dict(data: dict[str, Any]) -> Config:
    config: Config = _build(Config, data, "")
    config.data_dir = os.path.expanduser(config.data_dir)  # "~/..." as a user writes it in daari.yaml
    for name, tier in config.tiers.items():
        if tier.executor != "embedded" and not tier.base_url:
            raise ConfigError(f"tiers.{name}: executor '{tier.executor}' needs base_url")
        if tier.wire_api == "responses" and tier.executor != "openai":
            raise ConfigError(f"tiers.{name}: wire_api 'responses' is for executor 'openai' only")
        if tier.executor == "embedded" and tier.model is not None and tier.model not in EMBEDDED_MODELS:
            raise ConfigError(f"tiers.{name}.model: unknown embedded model {tier.model!r}; "
                              f"choose one of {', '.join(EMBEDDED_MODELS)}")
    for task_type in config.routing.l3_task_types or ():
        if task_type not in MODEL_TASK_TYPES:
            raise ConfigError(f"unknown task type {task_type!r} in routing.l3_task_types (known: "
                              f"{', '.join(MODEL_TASK_TYPES)})")
    for call in config.routing.client_calls:
        if call not in CLIENT_CALL_TYPES:
            raise ConfigError(f"unknown call type 'routing.client_calls.{call}' (known: "
                              f"{', '.join(CLIENT_CALL_TYPES)})")
    return config


SECRET_WORDS = frozenset({"key", "token", "secret", "password", "authorization", "credential"})
URL_KEYS = ("base_url", "url")


def is_secret_name(name: str) -> bool:
    """A key named like a secret: one of its words is a secret word (`api_key`, not `max_tokens`);
    `*_env` keys name an environment variable and are not secrets."""
    words = name.lower().split("_")
    return words[-1] != "env" and any(w in SECRET_WORDS for w in words)


def redacted(config: Config) -> dict[str, Any]:
    """The effective config as JSON, secrets redacted (env var names stay, their values never appear)."""

    def scrub(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if is_secret_name(k) and v is not None and not isinstance(v, bool):
                    out[k] = "***"
                elif k in URL_KEYS and isinstance(v, str):
                    out[k] = redact_url(v)
                else:
                    out[k] = scrub(v)
            return out
        if isinstance(node, list):
            return [scrub(v) for v in node]
        return node

    data: dict[str, Any] = scrub(dataclasses.asdict(config))
    # An OTLP collector's headers usually carry its credential: names shown, values never.
    data["otel"]["headers"] = {name: "***" for name in config.otel.headers}
    data["otel"]["endpoint"] = redact_url(config.otel.endpoint)
    for name, tier in config.tiers.items():
        data["tiers"][name]["api_key_set"] = bool(tier.api_key())
    data["active_tiers"] = config.configured_tiers()
    return data
