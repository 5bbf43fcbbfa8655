"""What an operator asks at the end of the demo, and the answers printed: the worker's HTTP API (how
is a node, how are its paths, what can each node compute, a path's forecast, a site's battery) and
the DuckDB reports (benefit, learned alphas)."""

from __future__ import annotations

import time

from sinks.cost import cost_sections, weekly_demand
from sinks.duckdb_store import DuckStore
from sinks.queries import INCIDENTS, run_sections
from streams.analytics.alphas import learned_alphas
from streams.analytics.capacity import capacity_plan
from streams.client import base_url, call
from streams.config import Settings
from streams.dev.sim import Topology
from streams.render import tables


def get(settings: Settings, path: str) -> dict:
    return _ok(call(base_url(settings.web_host, settings.web_port), "GET", path, timeout=5))


def _ok(answer: tuple[int, dict]) -> dict:
    status, body = answer
    if status >= 400:
        raise OSError(f"HTTP {status}: {body}")
    return body


def post(settings: Settings, path: str, body: dict) -> dict:
    return _ok(call(base_url(settings.web_host, settings.web_port), "POST", path, body))


def print_summaries(settings: Settings, topo: Topology, watch) -> None:
    """What an operator asks: how is node X, how is the path X -> Y, what can node X compute."""
    node = watch[0][0]
    try:
        n = get(settings, f"/network/nodes/{node}")
        print(f"\nGET /network/nodes/{node}")
        print(f"  nic util {_r(n['bw_util'], 2)}, retrans {_r(n['retrans_rate'], 4)}, mean quality to "
              f"{n['peers']} peers {_r(n['mean_quality_to_peers'], 1)}, worst peer {n['worst_peer']}, "
              f"window age {_r(n['age_s'], 1)} s")
        for src, dst in watch:
            p = get(settings, f"/network/paths/{src}/{dst}")
            x = p["inputs"]
            print(f"GET /network/paths/{src}/{dst}")
            qp = p["quality_by_profile"]
            print(f"  quality {_r(p['quality'], 1)} (latency profile {_r(qp['latency'], 1)}, bandwidth "
                  f"{_r(qp['bandwidth'], 1)}); p95 {_r(x['p95_rtt_ms'], 3)} ms, jitter {_r(x['jitter_ms'], 3)} ms, "
                  f"loss {_r(x['loss'], 4)}, util {_r(x['bw_util'], 2)}; window age {_r(p['age_s'], 1)} s")
        c = get(settings, "/compute/nodes?limit=1000")
        print("GET /compute/nodes")
        for item in c["items"][: min(len(c["items"]), 6)]:
            print(f"  {item['node']:<10} {item['class']:<5} available={item['available']!s:<5} "
                  f"training {item['compute_score']['training']:6.1f}  inference {item['compute_score']['inference']:6.1f}")
    except OSError as exc:
        print(f"summaries unavailable: {exc}")


def print_forecast(settings: Settings, path) -> None:
    src, dst = path
    try:
        f = get(settings, f"/forecast/paths/{src}/{dst}?metric=rtt_ms&stat=p95&horizon=60m")
    except OSError as exc:
        print(f"forecast unavailable: {exc}")
        return
    pts = f["points"]
    vals = [p["value"] for p in pts]
    print(f"GET /forecast/paths/{src}/{dst}?metric=rtt_ms&stat=p95&horizon=60m  (from {f['history_steps']:,} "
          f"steps of {f['step_s']:g} s history)")
    print("  " + "  ".join(f"{time.strftime('%H:%M', time.localtime(p['t']))} {p['value']:.1f}" for p in pts[::10])
          + f"   (min {min(vals):.1f}, max {max(vals):.1f} ms)")
    if pts and pts[0].get("upper") is not None:
        rhythm = "a daily profile" if f.get("seasonal") else "the current level (no daily rhythm worth using)"
        print(f"  p{round(100 * f['quantile'])} up to {max(p['upper'] for p in pts):.1f} ms; from {rhythm}")


def print_power(settings: Settings, site: str) -> None:
    path = f"/power/{site}/smoothing?window=5min&interval=1min&period=1d&ramp_limit=2"
    try:
        b = get(settings, path)
    except OSError as exc:
        print(f"power smoothing unavailable: {exc}")
        return
    print(f"GET {path}")
    print(f"  {b['samples']:,} minutes: battery {b['power_capacity_mw']:.1f} MW / {b['recommended_energy_kwh']:,.0f} kWh "
          f"(largest discharge {b['discharge_energy_kwh']:,.0f} kWh, charge {b['charge_energy_kwh']:,.0f} kWh, "
          f"SOC swing {b['soc_swing_kwh']:,.0f} kWh); max ramp {b['original_max_ramp_mw_per_min']:.1f} -> "
          f"{b['smoothed_max_ramp_mw_per_min']:.1f} MW/min ({b['smoothing_rate_pct']:.0f} % smoother)"
          + ("" if b["ramp_limit_met"] else f"; the 15-min block target itself ramps "
             f"{b['target_max_ramp_mw_per_min']:.1f} MW/min"))


def print_reports(settings: Settings, true_alpha: dict[str, float]) -> None:
    try:
        with DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=10) as store:
            sections = run_sections(store.con)
            incidents = run_sections(store.con, INCIDENTS)
            cost = cost_sections(settings.card_prices, settings.energy_price_per_mwh,
                                 settings.idle_power_share, settings.transfer_price_per_gb)
            costs = run_sections(store.con, (cost[2], cost[3]))  # by type and month; idle draw by site
            plan = capacity_plan(*weekly_demand(store.con), weeks=2, wait_target_h=1.0)
            alphas = learned_alphas(store.con, min_tasks=settings.alpha_min_tasks)
    except Exception as exc:  # the demo still ends with its summary
        print(f"reports unavailable: {exc}")
        return
    print("\ncnsched report benefit  (from DuckDB)")
    print(tables.sections(sections), end="")
    print("cnsched report alpha  (learned from finished tasks; the runner's true alphas: "
          + ", ".join(f"{k} {v}" for k, v in true_alpha.items() if k in {r['task_type'] for r in alphas}) + ")")
    print(tables.alpha_table(alphas))
    print("\ncnsched report incidents  (from DuckDB)")
    print(tables.sections(incidents), end="")
    print("\ncnsched report cost  (from DuckDB; prices CNSCHED_CARD_PRICES, CNSCHED_ENERGY_PRICE_PER_MWH; the "
          "per-task and per-team tables too in the full report)")
    print(tables.sections(costs), end="")
    print("\ncnsched report capacity  (weekly card-hours per class and site and their forecast; one week seen "
          "here, so the forecast is that week)")
    for r in plan:
        print(f"  {r['accel_class'] or '-':6} {r['site']:10} {r['cards']:3} cards  last week {r['last_week_card_h']:8.3f} "
              f"card-h  next 2 weeks {r['forecast_card_h']}  cards for p95 wait <= 1 h: {r['cards_needed']}")


def _r(v, digits: int):
    return None if v is None else round(v, digits)
