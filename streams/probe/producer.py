"""Producer SDK for probes: buffer samples, send Arrow IPC batches keyed by source node.

A batch leaves when it holds ``max_samples`` samples or its oldest sample is ``max_age_s`` old,
whichever comes first, so the wire carries hundreds to thousands of samples per message.

    async with ProbeProducer(settings) as probes:
        probes.add_many(ts, "n01", dst, "rtt_ms", values)   # numpy columns, one source node
        probes.add(time.time(), "n01", "", "bw_util", 0.4)
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import numpy as np

from schemas.probe import encode_arrow
from schemas.topics import PROBE_SAMPLES
from streams.config import Settings
from streams.kafka import producer


class _Buffer:
    __slots__ = ("ts", "dst", "metric", "value", "n", "since")

    def __init__(self) -> None:
        self.ts: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []
        self.metric: list[np.ndarray] = []
        self.value: list[np.ndarray] = []
        self.n = 0
        self.since = 0.0


class ProbeProducer:
    def __init__(
        self,
        settings: Settings,
        max_samples: int = 1000,
        max_age_s: float = 0.1,
        topic: str = PROBE_SAMPLES,
    ) -> None:
        self.settings = settings
        self.max_samples = max_samples
        self.max_age_s = max_age_s
        self.topic = settings.topic(topic)
        self._producer = producer(settings)
        self._buffers: dict[str, _Buffer] = {}
        self._pending: set[asyncio.Future] = set()
        self._ticker: asyncio.Task | None = None
        self.samples_sent = 0
        self.messages_sent = 0

    async def start(self) -> None:
        await self._producer.start()
        self._ticker = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._ticker:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        await self.flush()
        await self._producer.stop()

    async def __aenter__(self) -> ProbeProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def add(self, ts: float, src: str, dst: str, metric: str, value: float | None) -> None:
        self.add_many(
            np.array([ts]), src, np.array([dst], dtype=object), np.array([metric], dtype=object),
            np.array([np.nan if value is None else value]),
        )

    def add_many(self, ts, src: str, dst, metric, value) -> None:
        """Queue samples of one source node; ``dst``/``metric`` may be one string or a column."""
        ts = np.asarray(ts, dtype=np.float64)
        n = ts.size
        dst = np.full(n, dst, dtype=object) if isinstance(dst, str) else np.asarray(dst, dtype=object)
        metric = (
            np.full(n, metric, dtype=object) if isinstance(metric, str) else np.asarray(metric, dtype=object)
        )
        buf = self._buffers.get(src)
        if buf is None:
            buf = self._buffers[src] = _Buffer()
        if buf.n == 0:
            buf.since = time.monotonic()
        buf.ts.append(ts)
        buf.dst.append(dst)
        buf.metric.append(metric)
        buf.value.append(np.asarray(value, dtype=np.float64))
        buf.n += n
        if buf.n >= self.max_samples:
            self._send(src, buf)

    def _send(self, src: str, buf: _Buffer) -> None:
        ts = np.concatenate(buf.ts)
        dst = np.concatenate(buf.dst)
        metric = np.concatenate(buf.metric)
        value = np.concatenate(buf.value)
        self._buffers[src] = _Buffer()
        for a in range(0, ts.size, self.max_samples):
            b = a + self.max_samples
            payload = encode_arrow(ts[a:b], np.full(min(b, ts.size) - a, src, dtype=object),
                                   dst[a:b], metric[a:b], value[a:b])
            fut = asyncio.ensure_future(self._producer.send(self.topic, payload, key=src.encode()))
            self._pending.add(fut)
            fut.add_done_callback(self._pending.discard)
            self.messages_sent += 1
            self.samples_sent += min(b, ts.size) - a

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.max_age_s / 2)
            now = time.monotonic()
            for src, buf in list(self._buffers.items()):
                if buf.n and now - buf.since >= self.max_age_s:
                    self._send(src, buf)

    async def flush(self) -> None:
        """Send everything buffered and wait until the broker has it."""
        for src, buf in list(self._buffers.items()):
            if buf.n:
                self._send(src, buf)
        if self._pending:
            results = await asyncio.gather(*list(self._pending), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    raise r
            # a send() future resolves to a delivery future; wait for those too
            await asyncio.gather(*[r for r in results if asyncio.isfuture(r)])
        await self._producer.flush()
