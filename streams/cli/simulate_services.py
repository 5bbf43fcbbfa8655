"""`cnsched simulate --services`: the elastic-service replay (streams.replay.services) over a trace's
submissions as requests: a table, JSON, or a chart of replicas."""

from __future__ import annotations

import json

from streams.cli.common import UsageError, drawing
from streams.cli.simulate import ITP, _jobs


def services(args) -> int:
    """The elastic-service replay (streams.replay.services): a table, JSON, or a chart of replicas."""
    from streams.replay.services import POLICIES, arrival_rate, replay_services

    if args.service_step <= 0 or args.service_load_s < 0 or args.service_max_replicas < 1 \
            or args.service_per_replica_rate < 0:
        raise UsageError("--service-step must be positive, --service-load-s and --service-per-replica-rate at "
                         "least 0, --service-max-replicas at least 1")
    spec = args.jobs or f"itp:{ITP}"
    trace = _jobs(spec)
    rate = arrival_rate(trace.submit_s[:args.limit] if args.limit else trace.submit_s, args.service_step)
    res = replay_services(rate, args.service_step, args.service_load_s, args.service_max_replicas,
                          args.service_per_replica_rate or None)
    res["trace"] = spec
    if args.png:
        from streams.render.charts import line_chart

        week = int(7 * 86400 / args.service_step)
        with drawing("--png", args.png):
            line_chart(args.png, [(p, res["policies"][p]["replicas"][:week]) for p in POLICIES],
                       title="serving replicas by scaling policy (first week)", xlabel="step",
                       ylabel="replicas")
        res["png"] = args.png
    for p in POLICIES:
        res["policies"][p]["replicas"] = res["policies"][p]["replicas"].tolist() if args.json else None
    if args.json:
        print(json.dumps(res, default=float))
        return 0
    print(f"elastic service over {res['steps']:,} steps of {args.service_step:g} s of {res['trace']} submissions; "
          f"a replica serves {res['per_replica_rate']:.4g} req/s, loads in {args.service_load_s:g} s")
    head = ("policy", "replica_hours", "unserved_share", "overloaded_share", "replicas_mean", "replicas_max",
            "scale_events")
    print("  ".join(f"{h:>18}" for h in head))
    for p in POLICIES:
        f = res["policies"][p]
        print("  ".join(f"{v:>18}" for v in (p, f["replica_hours"], f"{f['unserved_share']:.2%}",
                                              f"{f['overloaded_share']:.2%}", f["replicas_mean"], f["replicas_max"],
                                              f["scale_events"])))
    return 0
