"""Slurm's node listing as compute reports, on real output: ``scontrol show node -o -d`` of the local
three-node Slurm (Debian's slurm-wlm 22.05, cards as a GRES named ``card``) with a 5-card job on n2
and n3 drained — captured as a fixture — and the typed, socket-annotated GPU forms of real clusters."""

from pathlib import Path

from schemas.compute import ComputeReport
from streams.bridge.slurm_parse import gres_count, node_reports, parse_line, state_flags, status_of

FIXTURE = Path(__file__).parents[2] / "fixtures" / "slurm" / "scontrol_show_node_od.txt"
NOW = 1_764_601_445.0


def test_the_real_listing_gives_cards_free_cards_memory_and_status():
    reports = {r["node"]: r for r in node_reports(FIXTURE.read_text(), NOW, sites={"n1": {"zone": "dc1", "rack": "r1"}})}
    assert sorted(reports) == ["n1", "n2", "n3"]
    assert [(r["cards"], r["free"]["cards"], r["status"]) for r in (reports["n1"], reports["n2"], reports["n3"])] == [
        (8, 8, "up"), (8, 3, "up"), (8, 8, "down")]  # drained: down by default (issue 29)
    assert reports["n2"]["slurm_state"] == "MIXED" and reports["n3"]["slurm_state"] == "IDLE+DRAIN"
    assert reports["n3"]["slurm_reason"].startswith("disk errors [root@")  # a value with spaces, read whole
    assert reports["n1"]["host_mem_gb"] == round(8000 / 1024, 3) and reports["n1"]["partitions"] == ["main"]
    assert (reports["n1"]["zone"], reports["n1"]["rack"]) == ("dc1", "r1")
    for r in reports.values():  # what the worker accepts on compute.nodes
        ComputeReport.model_validate(r)


def test_values_with_spaces_and_gres_forms_of_real_gpu_clusters():
    line = "NodeName=g7 Gres=gpu:a100:4(S:0),gpu:v100:2(S:1) GresUsed=gpu:a100:3(IDX:0-2),gpu:v100:0(IDX:N/A) " \
           "State=MIXED+DRAIN OS=Linux 5.14.0 #1 SMP Reason=fan failure [admin@2026-11-30T10:00:00]"
    f = parse_line(line)
    assert f["OS"] == "Linux 5.14.0 #1 SMP" and f["Reason"] == "fan failure [admin@2026-11-30T10:00:00]"
    assert gres_count(f["Gres"], "gpu") == 6 and gres_count(f["GresUsed"], "gpu") == 3
    assert gres_count("(null)", "gpu") == 0 and gres_count("N/A", "card") == 0 and gres_count("card:8", "gpu") == 0


def test_states_map_to_up_leaving_and_down():
    assert state_flags("IDLE+DRAIN") == {"IDLE", "DRAIN"} and state_flags("DOWN*") == {"DOWN", "NOT_RESPONDING"}
    cases = {"IDLE": "up", "MIXED": "up", "ALLOCATED": "up", "COMPLETING": "up", "IDLE+DRAIN": "leaving",
             "MIXED+DRAIN": "leaving", "DRAINED": "leaving", "DOWN": "down", "DOWN*": "down", "IDLE*": "down",
             "DOWN+DRAIN": "down", "INVAL": "down", "FAIL": "down", "": "down"}
    assert {s: status_of(s, drain_as="leaving") for s in cases} == cases
    drained = ("IDLE+DRAIN", "MIXED+DRAIN", "DRAINED")
    assert {s: status_of(s) for s in cases} == {s: "down" if s in drained else v for s, v in cases.items()}


def test_the_real_job_listing_gives_states_nodes_and_run_times():
    from streams.bridge.slurm_parse import jobs

    got = {j["name"]: j for j in jobs((FIXTURE.parent / "scontrol_show_job_o.txt").read_text())}
    # a 2-node gang that slept 2 s, a command that exited 3, one cancelled, one that ran 1 s after it
    assert [(n, got[n]["state"], got[n]["nodes"], got[n]["run_s"]) for n in ("gang1", "bad1", "long1", "waits1")] == [
        ("gang1", "COMPLETED", ["n1", "n2"], 2), ("bad1", "FAILED", ["n3"], 0), ("long1", "CANCELLED", ["n3"], 1),
        ("waits1", "COMPLETED", ["n3"], 1)]
    assert got["bad1"]["exit_code"] == "3:0" and got["bad1"]["reason"] == "NonZeroExitCode"


def test_host_lists_and_run_times():
    from streams.bridge.slurm_parse import duration_s, expand_hostlist

    assert expand_hostlist("n[1-3]") == ["n1", "n2", "n3"]
    assert expand_hostlist("gpu-a[01,03-04],gpu-b7") == ["gpu-a01", "gpu-a03", "gpu-a04", "gpu-b7"]
    assert expand_hostlist("(null)") == [] and expand_hostlist("n3") == ["n3"]
    assert [duration_s(x) for x in ("00:00:02", "12:34", "1-02:03:04", "INVALID")] == [2, 754, 93784, None]


def test_a_requested_limit_is_whole_minutes_rounded_up():
    from streams.bridge.slurm_jobs import slurm_minutes

    assert [slurm_minutes(s) for s in (1, 59.5, 60, 60.1, 90, 3600)] == [1, 1, 1, 2, 2, 60]
