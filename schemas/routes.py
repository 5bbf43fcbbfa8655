"""``sched.routes`` (issue 54): a service's routing weights — for each origin of its requests, the
share each serving replica gets and the weight a load balancer applies (HAProxy: 0..256) — keyed by
the service's id, the newest superseding the rest."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ReplicaRoute(BaseModel):
    replica: str = Field(description="the replica's task id (a load balancer's server name)")
    node: str
    address: str | None = Field(default=None, description="host:port it serves on (the node's address and the "
                                                          "service's port), when the service names a port")
    weight: int = Field(ge=0, le=256, description="0: sent nothing (cold, unmeasured from the origin, or not worth it)")
    share: float = Field(ge=0, le=1, description="of the origin's requests")
    rtt_ms: float | None = Field(default=None, description="the measured p50 RTT from the origin (None: not measured)")
    warm: bool = Field(description="its model is loaded (started): a cold replica gets nothing")


class OriginRoutes(BaseModel):
    origin: str
    endpoint: str = Field(description="the probe endpoint its delays were measured from")
    request_rate: float = Field(ge=0, description="requests/s routed: the service's rate x the origin's share")
    expected_response_ms: float | None = Field(default=None, description=(
        "mean expected time to answer: delay + queueing at the replica (M/M/1), over its requests"))
    replicas: list[ReplicaRoute] = Field(default_factory=list)


class Routes(BaseModel):
    service_id: str
    computed_at: float = Field(description="epoch seconds")
    trigger: Literal["window", "load", "scaled", "request"] = Field(description=(
        "what changed: the network view or the inventory (a replica starting too), a load report, the "
        "replicas, or an API request asking before any was published"))
    version: int = Field(ge=0, description="increases with each publication for the service")
    request_rate: float = Field(ge=0, description="requests/s the weights were computed for")
    capacity_per_replica: float = Field(gt=0, description="requests/s a replica serves at full load (as assumed)")
    rate_known: bool = Field(description="False: no load reported yet; half the capacity is assumed")
    overloaded: bool = Field(description="the demand exceeds 98 % of the warm replicas' capacity: spread by capacity")
    origins: list[OriginRoutes] = Field(default_factory=list)
    compute_ms: float = Field(ge=0, description="the weights' computation, from the change to the message")
