"""`cnsched` commands over the DuckDB history and power series: sql, backtest, report, battery."""

from __future__ import annotations

import sys

from streams.cli.common import Parser, UsageError, drawing, print_result
from streams.config import Settings


def add_parsers(sub) -> None:
    q = sub.add_parser("sql", help="run a query on the DuckDB file (also while the sink writes it)")
    q.add_argument("query", help="SQL, e.g. \"SELECT count(*) FROM windows\"")
    q.add_argument("--json", action="store_true", help="rows as a JSON array of objects")
    q.add_argument("--csv", action="store_true", help="rows as CSV with a header (raw values)")
    q.add_argument("--timeout", type=float, default=10.0, help="seconds to wait while the sink writes")
    q.add_argument("--allow-files", action="store_true",
                   help="let the query read and write other files (COPY ... TO 'x.parquet', read_csv); off by default")

    bt = sub.add_parser("backtest", help="forecast stored path history and score it against what followed")
    bt.add_argument("--metric", default="rtt_ms")
    bt.add_argument("--stat", default="p95", help="mean, p50, p95, p99, min or max")
    bt.add_argument("--step-seconds", type=int, default=60)
    bt.add_argument("--horizon-minutes", type=float, default=60.0)
    bt.add_argument("--day-seconds", type=int, default=86400, help="length of the daily rhythm")
    bt.add_argument("--days", type=float, default=7.0, help="origins over the last D days (default 7)")
    bt.add_argument("--every-minutes", type=float, default=0.0, help="between origins (default: the horizon)")
    bt.add_argument("--rows", action="store_true", help="per-series MASE of every method")
    bt.add_argument("--plot", metavar="FILE.png", default=None,
                    help="draw one series over the scored span with the forecast and its upper band")
    bt.add_argument("--series", metavar="SRC->DST", default=None,
                    help="the series to plot (default: the one with the most data)")
    bt.add_argument("--json", action="store_true")
    bt.add_argument("--quiet", action="store_true", help="no progress (there is none off a terminal either)")

    bat = sub.add_parser("battery", help="size a battery that smooths a power series (MW)")
    bat.add_argument("values", nargs="*", metavar="VALUE",
                     help="power in MW, one per interval; or one CSV file; or - to read CSV from stdin")
    bat.add_argument("--interval", default="1min", help="time between samples, e.g. 1min, 15s, 100ms (default 1min)")
    bat.add_argument("--window", required=True, help="smoothing window: samples (15) or a duration (15min)")
    bat.add_argument("--margin", type=float, default=1.2, help="safety margin (default 1.2)")
    bat.add_argument("--ramp-limit", type=float, default=None, help="grid ramp limit, MW/min")
    bat.add_argument("--dod", type=float, default=0.9, help="depth of discharge (default 0.9)")
    bat.add_argument("--trailing", action="store_true", help="trailing moving average instead of block means")
    bat.add_argument("--column", default=None, help="CSV column with the power (default power_mw, else the last)")
    bat.add_argument("--json", action="store_true", help="the figures and both curves as JSON")
    bat.add_argument("--plot", metavar="FILE.png", default=None, help="draw load, target and compensation")

    rp = sub.add_parser("report", help="reports from the DuckDB audit (benefit, learned alphas, incidents, quotas, cost)")
    rsub = rp.add_subparsers(dest="report", metavar="REPORT", parser_class=Parser, required=True)
    rb = rsub.add_parser("benefit", help="outcomes by type, network-aware vs compute-only, utilisation")
    rb.add_argument("--show-sql", action="store_true", help="print the SQL behind each table")
    rb.add_argument("--json", action="store_true")
    ra = rsub.add_parser("alpha", help="the alpha learned per task type from finished tasks")
    ra.add_argument("--min-tasks", type=int, default=None, help="default CNSCHED_ALPHA_MIN_TASKS")
    ra.add_argument("--show-sql", action="store_true", help="print the SQL that reads the finished tasks")
    ra.add_argument("--json", action="store_true")
    ri = rsub.add_parser("incidents", help="node failures: cause, time to locate and to recover, work lost")
    ri.add_argument("--show-sql", action="store_true", help="print the SQL behind the table")
    ri.add_argument("--json", action="store_true")
    rq = rsub.add_parser("quotas", help="by team: waits, preemptions, work lost, card-hours; Jain's fairness index")
    rq.add_argument("--show-sql", action="store_true", help="print the SQL behind each table")
    rq.add_argument("--json", action="store_true")
    rc = rsub.add_parser("cost", help="cost by task, team, type and month (cards, modelled energy), idle draw")
    rc.add_argument("--show-sql", action="store_true", help="print the SQL behind each table")
    rc.add_argument("--json", action="store_true")
    rk = rsub.add_parser("capacity", help="weekly card-hours per class and site, their forecast, cards for a p95 wait")
    rk.add_argument("--weeks", type=int, default=4, help="weeks to forecast (default 4)")
    rk.add_argument("--wait-target", default="1h", help="the p95 wait to keep under (default 1h)")
    rk.add_argument("--json", action="store_true")



def cmd_sql(args, settings: Settings) -> int:
    import datetime
    import decimal
    import json

    import duckdb

    from sinks.duckdb_store import DuckStore
    from sinks.queries import run_query

    store = DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=args.timeout,
                           external_access=args.allow_files)
    try:
        try:
            cols, rows = run_query(store.con, args.query)
        except duckdb.Error as exc:
            print(f"cnsched: sql: {exc}", file=sys.stderr)
            return 1
    finally:
        store.close()

    def plain(v):
        if isinstance(v, (datetime.date, datetime.datetime, decimal.Decimal)):
            return str(v)
        return v

    if args.json:
        print(json.dumps([{c: plain(v) for c, v in zip(cols, r, strict=True)} for r in rows]))
    elif args.csv:
        import csv

        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(cols)
        out.writerows([["" if v is None else plain(v) for v in r] for r in rows])
    else:
        print(sql_table(cols, rows))
    return 0


def sql_table(cols: list[str], rows: list[tuple]) -> str:
    """Aligned columns for a person: epoch-second columns as UTC clock times, numbers right-aligned
    (--csv and --json keep the raw values for machines)."""
    from streams.render.human import is_time_column, when
    from streams.render.tables import table

    times = [is_time_column(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    shown = [tuple(when(v) if times[i] and v is not None else v for i, v in enumerate(r)) for r in rows]
    return table(list(cols), shown)


def cmd_backtest(args, settings: Settings) -> int:
    from sinks.duckdb_store import DuckStore
    from sinks.queries import load_series
    from streams.analytics.backtest import HistoryError, backtest

    if (args.step_seconds < 1 or args.horizon_minutes <= 0 or args.day_seconds < 2 * args.step_seconds
            or args.days <= 0 or args.every_minutes < 0):
        raise UsageError("--step-seconds >= 1, --horizon-minutes > 0, --day-seconds >= 2 steps, --days > 0 and "
                         "--every-minutes >= 0")
    store = DuckStore.open(settings.duckdb_path, read_only=True)
    try:
        try:
            paths, values, first = load_series(store.con, args.metric, args.stat, args.step_seconds)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    finally:
        store.close()
    horizon = max(1, int(round(args.horizon_minutes * 60 / args.step_seconds)))
    every = int(round(args.every_minutes * 60 / args.step_seconds))
    names = [f"{a}->{b}" for a, b in paths]
    trace = _plotted_series(args, names, values) if args.plot else None
    from streams.cli.progress import bar

    origins = bar(int(args.days * 86_400 / ((every or horizon) * args.step_seconds)), "backtest origins",
                  args.json or args.quiet, unit="origin")
    try:
        result = backtest(values, first, args.step_seconds, horizon, args.day_seconds // args.step_seconds,
                          days=args.days, every=every, rows=args.rows, names=names, trace=trace, tick=origins.update)
    except HistoryError as exc:
        print(f"cnsched: backtest: {len(paths)} series of {args.metric} {args.stat}: {exc}", file=sys.stderr)
        return 1
    finally:
        origins.close()
    if args.plot:
        import numpy as np

        from streams.render.charts import Band, line_chart

        tr = result.pop("trace")
        minutes = np.arange(len(tr["truth"])) * args.step_seconds / 60.0
        with drawing("--plot", args.plot):
            line_chart(args.plot, [(str(tr["series"]), tr["truth"]), ("forecast (p50)", tr["p50"])],
                       band=Band("p50 to upper", tr["p50"], tr["upper"]), x=minutes, xlabel="minutes into the scored span",
                       ylabel=f"{args.metric} {args.stat}", title=f"backtest of {tr['series']}: forecasts made "
                       f"every {args.every_minutes:g} min for {args.horizon_minutes:g} min ahead")
        result["plot"] = {"file": args.plot, "series": tr["series"]}
    print_result({"metric": args.metric, "stat": args.stat, **result}, args.json)
    return 0


def _plotted_series(args, names: list[str], values) -> int:
    """The index of ``--series`` (UsageError naming the known ones when absent), else of the series
    with the most data."""
    import numpy as np

    if args.series is None:
        return int(np.argmax(np.isfinite(values).sum(axis=1))) if names else 0
    if args.series not in names:
        known = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise UsageError(f"--series {args.series}: no such series (known: {known or 'none'})")
    return names.index(args.series)


def cmd_battery(args, settings: Settings) -> int:
    import json
    from pathlib import Path

    from core.battery import BatteryInputError, size_battery
    from streams.analytics import power
    from streams.cli import power_input
    from streams.render import battery

    try:
        if len(args.values) == 1 and (args.values[0] == "-" or Path(args.values[0]).is_file()):
            text = sys.stdin.read() if args.values[0] == "-" else Path(args.values[0]).read_text()
            load = power_input.read_csv(text, args.column)
        elif not args.values:
            raise BatteryInputError("give power values, a CSV file, or - to read CSV from stdin")
        else:
            load = power_input.parse_values(args.values)
        interval = power.interval_seconds(args.interval)
        window = power.window_samples(args.window, interval)
        sizing = size_battery(load, interval, window, args.margin, args.ramp_limit, args.dod, args.trailing)
    except (BatteryInputError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"battery: {exc}") from None
    if args.plot:
        with drawing("--plot", args.plot, "battery"):
            battery.plot(sizing, load, args.plot, interval)
    if args.json:
        print(json.dumps(power.sizing_body(sizing, {
            "samples": int(load.size), "interval_s": interval, "window_samples": window, "margin": args.margin,
            "dod": args.dod, "ramp_limit_mw_per_min": args.ramp_limit,
            "target": "trailing" if args.trailing else "block"})))
    else:
        print(battery.as_table(sizing, load.size, interval, window, args.margin, args.dod, args.ramp_limit,
                             args.trailing), end="")
        if args.plot:
            print(f"{'plot':<24}{args.plot}")
    return 0


def _replay_sections(settings: Settings, live) -> list[dict]:
    """The benefit report's replay sections from CNSCHED_REPLAY_DUCKDB_PATH; from the live store ``live``
    while there is no such file (replays stored there before they had a file of their own)."""
    from sinks.duckdb_store import DuckStore
    from sinks.queries import BENEFIT_REPLAY, run_sections

    path = settings.replay_duckdb_path
    if not path.exists() or path.resolve() == settings.duckdb_path.resolve():
        return run_sections(live.con, BENEFIT_REPLAY)
    with DuckStore.open(path, read_only=True) as store:
        return run_sections(store.con, BENEFIT_REPLAY)


def cmd_report(args, settings: Settings) -> int:
    import json

    from sinks.cost import cost_sections
    from sinks.duckdb_store import DuckStore
    from sinks.queries import BENEFIT, BENEFIT_LIVE, FINISHED_SQL, INCIDENTS, QUOTAS, run_sections
    from streams.analytics.alphas import learned_alphas
    from streams.render import tables

    if args.report == "capacity":
        return _report_capacity(args, settings)
    with DuckStore.open(settings.duckdb_path, read_only=True) as store:
        if args.report in ("benefit", "incidents", "quotas", "cost"):
            if args.report == "cost":
                chosen = cost_sections(settings.card_prices, settings.energy_price_per_mwh, settings.idle_power_share,
                                       settings.transfer_price_per_gb)
            else:
                chosen = {"incidents": INCIDENTS, "quotas": QUOTAS}.get(args.report, BENEFIT)
            sections = run_sections(store.con, BENEFIT_LIVE if chosen is BENEFIT else chosen)
            if chosen is BENEFIT:  # the replay's sections from its own file, when there is one
                sections += _replay_sections(settings, store)
            if args.json:
                print(json.dumps([{"title": s["title"], "sql": s["sql"] if args.show_sql else None,
                                   "rows": [dict(zip(s["columns"], r, strict=True)) for r in s["rows"]]}
                                  for s in sections]))
            else:
                print(tables.sections(sections, args.show_sql), end="")
            return 0
        min_tasks = settings.alpha_min_tasks if args.min_tasks is None else args.min_tasks
        if min_tasks < 3:
            raise UsageError("--min-tasks must be at least 3")
        rows = learned_alphas(store.con, min_tasks=min_tasks)
    if args.json:
        print(json.dumps(rows))
        return 0
    if args.show_sql:
        print(FINISHED_SQL.strip())
        print()
    print(tables.alpha_table(rows))
    return 0


def _report_capacity(args, settings: Settings) -> int:
    import json

    from schemas.units import parse_duration
    from sinks.cost import weekly_demand
    from sinks.duckdb_store import DuckStore
    from streams.analytics.capacity import capacity_plan
    from streams.render import tables

    try:
        target_h = parse_duration(args.wait_target) / 3600
    except ValueError as exc:
        raise UsageError(f"--wait-target: {exc}") from None
    if not 1 <= args.weeks <= 52:
        raise UsageError("--weeks must be 1 to 52")
    with DuckStore.open(settings.duckdb_path, read_only=True) as store:
        weekly, cards = weekly_demand(store.con)
    plan = capacity_plan(weekly, cards, args.weeks, target_h)
    if args.json:
        print(json.dumps(plan))
        return 0
    cols = ["class", "site", "cards", "weeks", "last week card-h", "util %", "p95 wait s",
            f"next {args.weeks} weeks card-h (90 % interval)", f"cards for p95 wait <= {args.wait_target}"]
    rows = [(r["accel_class"] or "-", r["site"], r["cards"], r["weeks_seen"], r["last_week_card_h"],
             r["utilisation_last_week_pct"], r["wait_p95_last_week_s"],
             "; ".join(f"{m:g}" + ("" if lo is None else f" [{lo:g}-{hi:g}]")
                       for m, lo, hi in zip(r["forecast_card_h"], r["forecast_low"], r["forecast_high"], strict=True)),
             r["cards_needed"]) for r in plan]
    print(tables.sections([{"title": "Capacity by accelerator class and site", "columns": cols, "rows": rows,
                            "sql": ""}]), end="")
    return 0


COMMANDS = {"sql": cmd_sql, "backtest": cmd_backtest, "battery": cmd_battery, "report": cmd_report}
