"""What Slurm says, as cnsched's contracts: ``scontrol show node -o -d`` lines as compute reports.

A node's cards are its GRES of the configured name (``card`` on the local test cluster, ``gpu`` on
most real ones; typed ``gpu:a100:8`` and socket-annotated ``gpu:a100:8(S:0-1)`` forms count too);
its free cards are those less ``GresUsed``; its host memory ``RealMemory`` (MB). Its status follows
its state: a node Slurm cannot use (down, not responding ``*``, failed, invalid, unknown, powered
down) is ``down``; a drained or draining node is ``down`` too by default (an incident, its work moved
at once) or, with ``drain_as="leaving"``, drained by cnsched (no new work, its work moves at its next
checkpoint); otherwise ``up``.
"""

from __future__ import annotations

import math
import re

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")
_GRES = re.compile(r"^([A-Za-z0-9_.-]+)(?::([A-Za-z0-9_.-]+))?:(\d+)")
DOWN_STATES = frozenset({"DOWN", "FAIL", "FAILING", "INVAL", "UNKNOWN", "POWERED_DOWN", "POWER_DOWN", "NOT_RESPONDING",
                         "FUTURE", "REBOOT_ISSUED"})
DRAIN_STATES = frozenset({"DRAIN", "DRAINING", "DRAINED"})


def parse_line(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one ``-o`` line (a value runs to the next `` Key=``: ``OS=Linux 6.1 #1``,
    ``Reason=disk errors [root@...]``)."""
    marks = [(m.group(1), m.start(1), m.end()) for m in _KEY.finditer(line)]
    out = {}
    for k, (key, _, end) in enumerate(marks):
        stop = marks[k + 1][1] if k + 1 < len(marks) else len(line)
        out[key] = line[end:stop].strip()
    return out


def gres_count(text: str | None, name: str) -> int:
    """Cards of GRES ``name`` in a ``Gres``/``GresUsed`` value (``card:8``, ``gpu:a100:4(IDX:0-3),
    gpu:v100:2``): the sum over every entry of that name; 0 when there is none (``(null)``, ``N/A``)."""
    total = 0
    for entry in re.split(r",(?![^(]*\))", text or ""):
        m = _GRES.match(entry.strip())
        if m and m.group(1) == name:
            total += int(m.group(3))
    return total


def state_flags(state: str) -> set[str]:
    """``IDLE+DRAIN`` -> {IDLE, DRAIN}; a trailing ``*`` (not responding) adds NOT_RESPONDING."""
    flags = {f for f in state.rstrip("*~#!%$@^-").upper().split("+") if f}
    if state.endswith("*"):
        flags.add("NOT_RESPONDING")
    return flags


def status_of(state: str, drain_as: str = "down") -> str:
    """A Slurm node state as a report's status. A drained or draining node is ``drain_as``: ``down``
    (the default, what issue 29 asks: an incident, its work moved at once) or ``leaving`` (cnsched's own
    drain: no new work, its work moves at its next checkpoint)."""
    flags = state_flags(state)
    if flags & DOWN_STATES or not flags:
        return "down"
    return drain_as if flags & DRAIN_STATES else "up"


def node_report(fields: dict[str, str], now: float, gres: str = "card", site: dict | None = None,
                drain_as: str = "down", cluster: str = "") -> dict:
    """A ``compute.nodes`` report of one Slurm node (``site``: its region, zone, rack, tier, accelerator
    model and class from the bridge's configuration; ``cluster``: the Slurm cluster it belongs to, as
    ``slurm_cluster``: a gang is kept inside one)."""
    cards = gres_count(fields.get("Gres"), gres)
    used = gres_count(fields.get("GresUsed"), gres)
    mem_mb = _number(fields.get("RealMemory"))
    report = {"node": fields["NodeName"], "ts": now, "status": status_of(fields.get("State", ""), drain_as), "cards": cards,
              "free": {"cards": max(cards - used, 0)}, "slurm_state": fields.get("State", ""),
              "partitions": [p for p in fields.get("Partitions", "").split(",") if p]}
    if mem_mb is not None:
        report["host_mem_gb"] = round(mem_mb / 1024, 3)
    if fields.get("Reason"):
        report["slurm_reason"] = fields["Reason"][:512]
    if cluster:
        report["slurm_cluster"] = cluster
    return report | {k: v for k, v in (site or {}).items() if v not in (None, "")}


def node_reports(text: str, now: float, gres: str = "card", sites: dict[str, dict] | None = None,
                 drain_as: str = "down", cluster: str = "") -> list[dict]:
    """Every node of ``scontrol show node -o -d`` output."""
    out = []
    for line in text.splitlines():
        fields = parse_line(line)
        if "NodeName" in fields:
            out.append(node_report(fields, now, gres, (sites or {}).get(fields["NodeName"]), drain_as, cluster))
    return out


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "N/A") else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------- jobs
FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})
LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})


def expand_hostlist(text: str | None) -> list[str]:
    """Slurm's compressed host list (``n[1-3]``, ``gpu-a[01,03-04],gpu-b7``) as names; [] for none."""
    if not text or text in ("(null)", "None"):
        return []
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        m = re.match(r"^(.*)\[([^\]]*)\](.*)$", part)
        if not m:
            out.append(part)
            continue
        head, ranges, tail = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            for k in range(int(lo), int(hi or lo) + 1):
                out.append(f"{head}{str(k).zfill(len(lo))}{tail}")
    return out


def duration_s(text: str | None) -> float | None:
    """``RunTime`` as seconds: ``HH:MM:SS``, ``MM:SS`` or ``D-HH:MM:SS``."""
    if not text or text in ("INVALID", "N/A", "UNLIMITED"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days) if days else 0) * 86_400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def jobs(text: str) -> list[dict]:
    """``scontrol show job -o`` lines as ``{job_id, name, state, reason, nodes, run_s, exit_code, comment,
    started}``
    (``started``: it ran, however briefly — a command that fails at once did start)."""
    out = []
    for line in text.splitlines():
        f = parse_line(line)
        if "JobId" not in f:
            continue
        out.append({"job_id": f["JobId"], "name": f.get("JobName", ""), "state": f.get("JobState", ""),
                    "reason": f.get("Reason", ""), "nodes": expand_hostlist(f.get("NodeList")),
                    "run_s": duration_s(f.get("RunTime")), "exit_code": f.get("ExitCode", ""),
                    "comment": f.get("Comment", ""), "tres_per_node": f.get("TresPerNode", ""),
                    "started": f.get("JobState") != "PENDING" and f.get("StartTime", "Unknown") not in ("Unknown", "None", "")})
    return out


def slurm_minutes(seconds: float) -> int:
    """sbatch's ``--time`` in whole minutes, rounded up (Slurm's smallest unit; at least 1). Worked:
    90 s -> 2, 3,600 s -> 60."""
    return max(1, -(-int(math.ceil(seconds)) // 60))
