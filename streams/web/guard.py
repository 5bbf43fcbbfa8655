"""What every request passes before a view sees it (one aiohttp middleware): authentication with
bearer tokens and scopes, JSON-only bodies, a time limit, and a rate limit on task submission.

Closed by default:
- the API binds CNSCHED_WEB_BIND (default: CNSCHED_WEB_HOST, itself 127.0.0.1);
- a state change (POST, PUT, PATCH, DELETE) needs a token of scope ``write`` from CNSCHED_API_TOKENS;
  with no token configured, state changes are accepted from the loopback interface only, and only when
  Host (and Origin, if sent) name it by a loopback name: a browser on this host carrying a page whose
  name was rebound to 127.0.0.1 (DNS rebinding) sends that name, and is refused;
- reads need a ``read`` or ``write`` token only when CNSCHED_API_READ_NEEDS_TOKEN is set
  (``/health`` never does: liveness and readiness probes carry no secrets; nor do the dashboard's
  static files, ``/ui``: its data comes from the API, with the token);
- bodies must be ``application/json`` (415 otherwise: a web page cannot post a "simple" form
  request across origins), at most 1 MiB (413);
- a request taking longer than CNSCHED_WEB_REQUEST_TIMEOUT_SECONDS gets 503 and its work is cancelled;
- POST /tasks: at most CNSCHED_API_TASK_RATE per second per client (token, else address), bursts of
  twice that; 429 with Retry-After beyond;
- heavy work (battery sizing, forecasts) at most CNSCHED_API_HEAVY_REQUESTS at once, four times as many
  waiting; 429 with Retry-After beyond (streams/web/base.py WebContext.heavy).
Refusals are JSON ``{"error", "detail"}`` bodies and counted on /metrics (``api_refused_total``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import time

from aiohttp import web

from streams.config import ApiToken, Settings
from streams.metrics import Counters
from streams.web.base import IDENTITY, Busy
from streams.web.dashboard import PATHS as DASHBOARD_PATHS

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = frozenset({"/health", "/health/live", "/health/ready"}) | DASHBOARD_PATHS
MAX_BODY_BYTES = 1 << 20
RATE_LIMITED = {("POST", "/tasks")}


_HTTP_DETAIL = {404: "no such path: see /openapi.json", 405: "this path does not take this method: see /openapi.json",
                413: f"the body is over {MAX_BODY_BYTES} bytes"}


def _refuse(counters: Counters, status: int, error: str, detail: str, **headers: str) -> web.Response:
    counters.inc("api_refused_total", status=str(status))
    return web.Response(status=status, text=json.dumps({"error": error, "detail": detail}),
                        content_type="application/json", headers=headers)


def _loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:  # a unix socket
        return False


def _loopback_name(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    return _loopback(host.strip("[]"))


def _names_loopback(request: web.Request) -> bool:
    """Host (and Origin, when a browser sends one) name this host by a loopback name: a page whose
    name was rebound to 127.0.0.1 keeps its own name in both, so it is told apart."""
    from yarl import URL

    origin = request.headers.get("Origin")
    try:
        return _loopback_name(URL(f"http://{request.headers.get('Host', '')}").host) and (
            origin is None or _loopback_name(URL(origin).host))  # "null" (a sandboxed frame, a file): no host
    except ValueError:  # garbage
        return False


class TokenBuckets:
    """Per-client token buckets: ``rate`` per second, ``burst`` at most."""

    def __init__(self, rate: float, burst: float, max_clients: int = 10_000) -> None:
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self.buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def take(self, client: str, now: float) -> float:
        """0 when the request may go, else the seconds until it could."""
        tokens, at = self.buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1:
            self.buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
        if len(self.buckets) >= self.max_clients and client not in self.buckets:
            self.buckets.clear()  # bounded memory; a reset only ever lets through
        self.buckets[client] = (tokens - 1, now)
        return 0.0


def token_of(settings: Settings, header: str | None) -> ApiToken | None:
    """The request's bearer token as configured (a bare scope named token-<sha256 prefix>), None
    without a valid one (compared in constant time)."""
    if not header or not header.startswith("Bearer "):
        return None
    given = header.removeprefix("Bearer ").strip().encode()
    found = None
    for token, spec in (settings.api_tokens or {}).items():
        if hmac.compare_digest(given, token.encode()):
            found = spec if isinstance(spec, ApiToken) else ApiToken(
                scope=spec, name="token-" + hashlib.sha256(token.encode()).hexdigest()[:8])
    return found


def scope_of(settings: Settings, header: str | None) -> str | None:
    """The scope of the request's bearer token, None without a valid one."""
    token = token_of(settings, header)
    return None if token is None else token.scope


def guard_middleware(settings: Settings, counters: Counters):
    buckets = TokenBuckets(settings.api_task_rate, 2 * settings.api_task_rate)
    counters.describe("api_refused_total", "API requests refused before a view ran, by status")
    counters.describe("api_work_abandoned_total", "heavy API work (sizing, forecasts) stopped because its request "
                      "went: its time limit, or its client disconnected")

    @web.middleware
    async def guard(request: web.Request, handler):
        write = request.method in WRITE_METHODS
        header = request.headers.get("Authorization")
        token = token_of(settings, header)
        scope = None if token is None else token.scope
        request[IDENTITY] = None if token is None else (token.name, token.act_for_others)
        if request.path not in OPEN_PATHS:
            refused = _authorise(settings, counters, request, write, header, scope)
            if refused is not None:
                return refused
        if write:
            ctype = request.headers.get("Content-Type", "")
            if request.can_read_body and ctype.split(";")[0].strip().lower() != "application/json":
                return _refuse(counters, 415, "unsupported media type", "send the body as application/json")
            if (request.method, request.path) in RATE_LIMITED:
                client = f"token:{header}" if scope else f"addr:{request.remote}"
                wait = buckets.take(client, time.monotonic())
                if wait > 0:
                    return _refuse(counters, 429, "too many requests",
                                   f"at most {settings.api_task_rate:g} per second (CNSCHED_API_TASK_RATE)",
                                   **{"Retry-After": str(max(1, round(wait)))})
        try:
            answer = await asyncio.wait_for(handler(request), settings.web_request_timeout_seconds)
        except TimeoutError:
            return _refuse(counters, 503, "request timed out",
                           f"not answered within {settings.web_request_timeout_seconds:g} s")
        except Busy as exc:
            return _refuse(counters, 429, "busy", f"{exc}; try again shortly", **{"Retry-After": "1"})
        except web.HTTPException as exc:  # aiohttp's own refusals (no route, method, body too large): JSON too
            if exc.status < 400:
                raise
            return _refuse(counters, exc.status, exc.reason.lower(), _HTTP_DETAIL.get(exc.status, exc.reason),
                           **{k: v for k, v in exc.headers.items() if k in ("Allow",)})
        if answer.status in _HTTP_DETAIL and answer.content_type == "text/plain" and not request.path.startswith("/ui"):
            return _refuse(counters, answer.status, answer.reason.lower(), _HTTP_DETAIL[answer.status],
                           **{k: v for k, v in answer.headers.items() if k in ("Allow",)})
        return answer

    return guard


def _authorise(settings: Settings, counters: Counters, request: web.Request, write: bool,
               header: str | None, scope: str | None) -> web.Response | None:
    """None when the request may go on, else the refusal."""
    if header is not None and scope is None:
        return _refuse(counters, 401, "unauthorised", "the bearer token is not valid",
                       **{"WWW-Authenticate": "Bearer"})
    if write:
        if scope == "write":
            return None
        if scope == "read":
            return _refuse(counters, 403, "forbidden", "this token may read, not change state")
        if not settings.api_tokens and _loopback(request.remote):
            if not _names_loopback(request):
                return _refuse(counters, 403, "forbidden", "a state change without a token must name this host as "
                               "localhost, 127.0.0.1 or [::1] in Host and Origin: a web page from elsewhere may not "
                               "send it through a browser here (DNS rebinding)")
            return None
        if not settings.api_tokens:
            return _refuse(counters, 403, "forbidden", "state changes come from this host only unless "
                           "CNSCHED_API_TOKENS names a token of scope write")
        return _refuse(counters, 401, "unauthorised", "a bearer token of scope write is needed",
                       **{"WWW-Authenticate": "Bearer"})
    if settings.api_read_needs_token and scope is None:
        return _refuse(counters, 401, "unauthorised", "a bearer token is needed (CNSCHED_API_READ_NEEDS_TOKEN)",
                       **{"WWW-Authenticate": "Bearer"})
    return None
