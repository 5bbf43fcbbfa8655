"""The bridge's record of copies (streams/bridge/slurm_staging.Copies) over Slurm's job listings as
`scontrol show job -o` gives them, parsed: a copy's job that Slurm no longer lists is forgotten."""

from streams.bridge.slurm_parse import jobs
from streams.bridge.slurm_staging import Copies


def record(job_id: str, state: str) -> str:
    return (f"JobId={job_id} JobName=t.stage UserId=u(1) JobState={state} Reason=None ExitCode=0:0 "
            f"RunTime=00:00:04 NodeList=n2 Comment=stage:1.0")


def test_copies_whose_jobs_slurm_forgot_are_forgotten():
    copies = Copies()
    copies.making([{"target": "store.east", "name": "imagenet"}], "11")
    copies.making([{"target": "store.west", "name": "c4"}, {"target": "store.west", "name": "wiki"}], "12")
    copies.making([{"target": "store.south", "name": "coco"}], "13")
    listed = {j["job_id"]: j for j in jobs("\n".join([record("11", "COMPLETED"), record("13", "RUNNING")]))}
    assert set(listed) == {"11", "13"}
    assert copies.poll(listed, 100.0) == []
    # job 12 ended long ago (past MinJobAge): both its copies are forgotten, the others kept
    assert copies.made_by == {"store.east/imagenet": "11", "store.south/coco": "13"}
    copies.poll({}, 200.0)  # Slurm lists none of them now
    assert copies.made_by == {}
