"""The benchmark baseline: a plain Faust agent taking one JSON sample per message and adding it to
a tumbling windowed table, the way a first Faust pipeline is usually written. `cnsched bench ingest`
runs it beside the real ingest path, in the same run, to report the ratio."""

from __future__ import annotations

import time

import faust

from streams.app import faust_app
from streams.config import Settings
from streams.metrics import Counters

BASELINE_TOPIC = "bench.baseline.samples"


def create_baseline_app(settings: Settings) -> tuple[faust.App, Counters]:
    app = faust_app(settings, f"{settings.app_id}-baseline")
    counters = Counters()
    topic = app.topic(settings.topic(BASELINE_TOPIC), partitions=settings.partitions)
    sums = app.Table(f"{settings.topic_prefix}baseline-sums", default=float).tumbling(
        settings.window_seconds, expires=settings.window_seconds * 6
    )

    @app.agent(topic, name="baseline")
    async def baseline(stream):
        async for sample in stream:
            if counters.get("ingest_first_event_unixtime") == 0:
                counters.set("ingest_first_event_unixtime", time.time())
            key = f"{sample['src']}|{sample['dst']}|{sample['metric']}"
            if sample.get("value") is not None:
                sums[key] += sample["value"]
            counters.inc("samples_accepted_total")
            counters.set("ingest_last_event_unixtime", time.time())

    @app.page("/metrics")
    class Metrics(faust.web.View):
        async def get(self, request):
            return self.text(counters.exposition(), content_type="text/plain; version=0.0.4")

    return app, counters
