"""Team quotas (`sched.quotas`, GET/PUT /quotas, CNSCHED_QUOTAS_FILE): cards per team and accelerator
class that a team is guaranteed, and the most it may hold by borrowing what others leave idle."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.compute import NODE_ID_PATTERN

ANY_CLASS = "*"
DEFAULT_TEAM = "default"  # the team of a task that names none


class Quota(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(pattern=NODE_ID_PATTERN, description="the team, as tasks name it in `team`")
    accel_class: str = Field(default=ANY_CLASS, min_length=1, max_length=128,
                             description="an accelerator class, or * for cards of any class")
    guaranteed_cards: int = Field(default=0, ge=0, le=10_000_000,
                                  description="cards the team may always use; idle, others may borrow them")
    max_cards: int | None = Field(default=None, ge=0, le=10_000_000,
                                  description="the most the team may hold, borrowing included; none: no limit")
    tidal: bool = Field(default=False, description=(
        "tidal lending: the team's idle guaranteed cards go only to deferrable tasks (deferrable_until), "
        "and are taken back before its forecast demand peaks"))

    @model_validator(mode="after")
    def _max_covers_guarantee(self) -> Quota:
        if self.max_cards is not None and self.max_cards < self.guaranteed_cards:
            raise ValueError(f"max_cards {self.max_cards} is below guaranteed_cards {self.guaranteed_cards}")
        return self


class QuotaSet(BaseModel):
    """The whole set, replaced at once (PUT /quotas). No quotas: every task may use any free card."""

    model_config = ConfigDict(extra="forbid")

    quotas: list[Quota] = Field(default_factory=list, max_length=10_000)
    changed_at: float | None = Field(default=None, gt=0, description="set by the worker on a change")
    allow_unnamed_teams: bool = Field(default=False, description=(
        "apply even though queued or running tasks belong to teams the set does not name (they then wait "
        "for ever, 'team X has no quota'); without it such a set is refused (409) naming those teams and tasks"))

    @model_validator(mode="after")
    def _one_entry_per_team_and_class(self) -> QuotaSet:
        seen = set()
        for q in self.quotas:
            key = (q.team, q.accel_class)
            if key in seen:
                raise ValueError(f"team {q.team!r} has two quotas for class {q.accel_class!r}")
            seen.add(key)
        return self

    def teams(self) -> list[str]:
        return sorted({q.team for q in self.quotas})
