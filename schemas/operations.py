"""An operator's and the failure detector's messages: `sched.maintenance` (a node's cordon, drain,
uncordon or removal) and `sched.incidents` (a failure of a node, a site or a path, and how it ended)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.sched import DURATION_MAX_S, EPOCH_MAX, ID_PATTERN


class NodeCommand(BaseModel):
    """`sched.maintenance`, keyed by node: an operator's cordon (no new placements; its work stays),
    drain (cordon, and its work moves at its next checkpoint or when it ends — by ``deadline_s``, then
    wherever it can, re-queued from its checkpoint if nowhere) or uncordon (it takes work again). The
    latest per node is in force. A node that reports status ``leaving`` drains by itself."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    node: str = Field(pattern=ID_PATTERN)
    action: Literal["cordon", "drain", "uncordon", "remove"] = Field(description=(
        "remove: the node leaves the inventory (its open incident is recovered as removed); a node agent "
        "that reports it again brings it back"))
    at: float = Field(gt=0, le=EPOCH_MAX, description="epoch seconds")
    deadline_s: float | None = Field(default=None, ge=0, le=DURATION_MAX_S, description=(
        "drain: how long its work may wait for a checkpoint (default CNSCHED_DRAIN_DEADLINE_SECONDS)"))
    by: str | None = Field(default=None, max_length=128)
    reason: str | None = Field(default=None, max_length=1024)


class Incident(BaseModel):
    """`sched.incidents`: a failure of a node, a whole site or a path, sent when it is detected (status
    open, cause located if it can be), when its tasks are all elsewhere (status mitigated: moved,
    re-queued or ended; the failure still there, the incident still open) and when it is over (status
    recovered, ``resolution`` says how)."""

    node: str = Field(description=(
        "what failed: a node's id; for a whole site site/<name>; for a path between two nodes "
        "path/<a><-><b>, its ends in order (path/n1<->n2)"))
    scope: Literal["node", "site", "path"] = "node"
    nodes: list[str] = Field(default_factory=list, description="a site's nodes, or a path's two ends")
    status: Literal["open", "mitigated", "recovered"]
    cause: Literal["compute", "network", "both", "unknown", "observers"] = Field(
        description="compute: silent or down while its paths carry probes; network: reports in time but every "
        "path of evidence lost, seen by two or more probing sources; both; unknown: silent, no path known; "
        "observers: every path lost, but on too many nodes at once to believe (the probes are suspect): "
        "nothing moved")
    detected_at: float
    located_at: float | None = None
    mitigated_at: float | None = Field(default=None, description="when none of its tasks ran on the node any more")
    recovered_at: float | None = Field(default=None, description="when the node was back, or removed")
    resolution: Literal["node back", "node removed", "site back", "path back", "an end failed"] | None = None
    tasks: list[str] = []
    work_lost_s: float = Field(default=0.0, ge=0, description="task time since the last checkpoint (since placement when none)")
    outcomes: dict[str, str] = Field(
        default_factory=dict, description="mitigated and after: what became of each task — 'moved to <nodes>', 'placed on "
        "<nodes> (preempting <tasks>)' or 'queued' (re-queued from its checkpoint: no node could take it), 'ended'")
