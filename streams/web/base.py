"""What every view shares: the worker's state it answers from (WebContext), answering with a
schemas.api model, one page of a list, and routing to the worker that owns a state table."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from dataclasses import dataclass, field

import faust
from faust.web import Request, Response, View

from schemas.api import ApiModel, ErrorBody, Page, TaskAnswer
from streams.analytics import Abandoned
from streams.config import Settings
from streams.metrics import Counters
from streams.web.params import paging

ROUTE_KEY = "state"  # any key: the state tables have one partition
HEAVY_QUEUE_FACTOR = 4  # requests waiting for a heavy slot, per slot, before more are refused
POLL_S = 0.05  # how often a write's answer is looked for in the state it changes (until_applied)
WARM_WAIT_S = 120.0  # the longest a write's answer waits for this worker's kernels to compile (until_applied)
PAGES_PER_VERSION = 64  # rendered pages of one list kept per version of what it was built from


class Busy(Exception):
    """Every slot for heavy work is taken and the line for them is full: 429 (streams/web/guard.py)."""


@dataclass
class WebContext:
    app: faust.App
    counters: Counters
    settings: Settings
    net: object  # streams.worker.state_tables.NetState
    inv: object  # streams.worker.state_tables.Inventory
    tasks: object  # streams.worker.taskbook.TaskBook
    tasks_topic: object
    readiness: object = None  # streams.worker.health.Readiness
    quotas: object = None  # streams.worker.scheduling.quota_agent.QuotaState
    quotas_topic: object = None
    scheduler: object = None  # streams.worker.scheduling.view.SchedulerView: read-only answers, never its state
    events_topic: object = None  # sched.events: operators' commands (cancel, hold, release, priority)
    maintenance_topic: object = None  # sched.maintenance: cordon, drain, uncordon
    _known_metadata: set = field(default_factory=set)
    memo: dict = field(default_factory=dict)  # answers built once per state version (streams/web/compute.py)
    _heavy: asyncio.Semaphore | None = None
    _heavy_waiting: int = 0

    async def heavy(self, fn, *args, **kw):
        """``fn(*args, cancel=event, **kw)`` in a thread, at most CNSCHED_API_HEAVY_REQUESTS at once
        (battery sizing of the largest allowed request takes seconds and a hundred MB); up to
        HEAVY_QUEUE_FACTOR times as many wait their turn, beyond them Busy. When the request is
        cancelled (its time limit, its client gone), ``event`` is set: ``fn`` stops at its next check
        instead of burning a core for nobody."""
        limit = self.settings.api_heavy_requests
        if self._heavy is None:
            self._heavy = asyncio.Semaphore(limit)
        if self._heavy.locked() and self._heavy_waiting >= HEAVY_QUEUE_FACTOR * limit:
            raise Busy(f"{limit} heavy requests run and {self._heavy_waiting} wait (CNSCHED_API_HEAVY_REQUESTS)")
        self._heavy_waiting += 1
        try:
            await self._heavy.acquire()
        finally:
            self._heavy_waiting -= 1
        cancel = threading.Event()

        def run():
            try:
                return fn(*args, cancel=cancel, **kw)
            except Abandoned:
                self.counters.inc("api_work_abandoned_total")  # its request went: stopped at a check
                raise

        try:
            return await asyncio.to_thread(run)
        finally:
            cancel.set()  # done, or the request went: either way the thread need not go on
            self._heavy.release()

    async def ensure_metadata(self, table) -> None:
        """Faust hashes a table key with the producer's metadata of the table's changelog topic and
        fails without it: fetch it once per table."""
        name = table.changelog_topic.get_topic_name()
        if name not in self._known_metadata:
            await self.app.producer._ensure_producer().partitions_for(name)  # aiokafka: fetches metadata
            self._known_metadata.add(name)

    async def from_owner(self, table, path: str, local, headers: dict | None = None):
        """``local()`` when this worker owns the state table, else the owner's JSON answer to GET
        ``path`` (None while the owner is unknown, rebalancing, or answers other than 200)."""
        try:
            await self.ensure_metadata(table)
            owner = self.app.router.key_store(table.name, ROUTE_KEY)
        except Exception:  # no assignment yet
            return None
        me = self.app.conf.canonical_url
        if (owner.host, owner.port) == (me.host, me.port):
            return local()
        try:
            async with self.app.http_client.get(owner.with_path(path), headers=headers) as resp:
                return await resp.json() if resp.status == 200 else None
        except Exception:  # the owner is rebalancing: try again
            return None

    def state_route(self, table):
        """``app.table_route`` for a state table: the request is answered by the worker owning it."""
        routed = self.app.table_route(table=table, exact_key=ROUTE_KEY)

        def decorate(fun):
            inner = routed(fun)

            @functools.wraps(fun)
            async def get(view, request, *args, **kwargs):
                await self.ensure_metadata(table)
                return await inner(view, request, *args, **kwargs)

            return get

        return decorate


class Resource(View):
    """A view over the worker's state. ``routed``: the WebContext attribute (``net``, ``inv``,
    ``tasks``) whose table's owner answers GET; ``ctx`` is set when the route is registered."""

    ctx: WebContext
    routed: str | None = None

    def answer(self, model: ApiModel, status: int = 200) -> Response:
        return self.json(model.body(), status=status)

    def paged(self, request: Request, items: list, render, render_page=None, version=None) -> Response:
        """One page of ``items`` (``render``: item -> ApiModel or dict; ``render_page``: the page's items
        -> theirs, once per page), or 400 for bad paging. With ``version`` (what ``items`` were built
        from), a page's JSON is rendered once per version and sent again as it was: in a burst of
        1,000 GET /compute/nodes at 200 nodes, rendering each answer took as long as building it."""
        page = paging(request.query, self.ctx.settings.page_limit_max)
        if isinstance(page, ErrorBody):
            return self.answer(page, 400)
        offset, limit = page
        memo = self.ctx.memo.setdefault(("pages", type(self).__name__), {})
        if version is not None and memo.get("version") != version:
            memo.clear()
            memo["version"] = version
        if version is not None and (offset, limit) in memo:
            return self.text(memo[(offset, limit)], content_type="application/json")  # as self.json sends it
        shown = items[offset:offset + limit]
        shown = render_page(shown) if render_page is not None else shown
        resp = self.answer(Page(items=[_plain(render(i)) for i in shown], total=len(items), offset=offset, limit=limit))
        if version is not None and len(memo) <= PAGES_PER_VERSION:
            memo[(offset, limit)] = resp.text
        return resp


def _plain(item):
    return item.body() if isinstance(item, ApiModel) else item


IDENTITY = "cnsched_identity"  # on a request: (token name, may act for others); None: no token (the loopback)


class NotAllowed(Exception):
    """A token without act_for_others named someone else as ``by``."""


def acting(request: Request, by: str | None) -> str:
    """Who a state change is recorded under: the token's name (the ``by`` it may give only with
    act_for_others), or without tokens (the loopback) ``by`` as given, else "api"."""
    ident = request.get(IDENTITY)
    if ident is None:
        return by or "api"
    name, may = ident
    if by is not None and by != name and not may:
        raise NotAllowed(f"this token acts as {name}; it may not name another by (act_for_others)")
    return by if by is not None else name


def auth_of(request: Request) -> dict:
    """The request's Authorization header, to pass on when asking the owner of a state table."""
    return {"Authorization": request.headers["Authorization"]} if "Authorization" in request.headers else {}


async def until_gone(ctx: WebContext, read, ident: str, status: str, detail: str):
    """A deletion's outcome: until ``await read()`` (its owner's answer) is None, a 200 TaskAnswer of
    ``status`` and ``detail`` about ``ident``; 202 if not within CNSCHED_DECISION_TIMEOUT_SECONDS."""
    async def gone():
        return True if await read() is None else None

    if await until_applied(ctx, gone, bool):
        return TaskAnswer(task_id=ident, status=status, detail=detail), 200
    return TaskAnswer(task_id=ident, status="accepted", detail=f"{status.removesuffix('d')} sent"), 202


async def until_applied(ctx: WebContext, read, done):
    """A write's outcome: ``await read()`` (the state as its owner answers) every POLL_S until
    ``done(answer)``, for at most CNSCHED_DECISION_TIMEOUT_SECONDS. The answer that was done, or None
    (the caller answers 202: sent, not applied yet). While this worker still compiles its decision
    kernels (a fresh checkout: seconds), the clock starts once they are ready (at most WARM_WAIT_S):
    the worker deciding is compiling them too, and the first tasks would otherwise all get 202."""
    warmer = getattr(ctx.readiness, "warmer", None)
    if warmer is not None and not warmer.done.is_set():
        await asyncio.to_thread(warmer.done.wait, WARM_WAIT_S)
    deadline = time.monotonic() + ctx.settings.decision_timeout_seconds
    while time.monotonic() < deadline:
        answer = await read()
        if answer is not None and done(answer):
            return answer
        await asyncio.sleep(POLL_S)
    return None
