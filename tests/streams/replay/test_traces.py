"""Loaders against the real files in ../shared/data (their upstream formats), and bad input."""

import numpy as np
import pytest

from streams.replay.traces import TraceError, load_itp, load_philly, load_skyplane
from tests.helpers.data import DATA, needs_data


@needs_data
def test_philly_real_file():
    t = load_philly(DATA / "jobs/philly/philly_data_training.csv")
    assert len(t) == 15_000 and len(set(t.user)) == 136
    assert t.gpus.min() == 1 and t.gpus.max() == 48 and int((t.nodes > 1).sum()) == 440
    assert set(t.status) == {"Pass", "Failed", "Killed"} and (np.diff(t.submit_s) >= 0).all()
    assert t.submit_s[1] == 395146.0 and t.duration_s[0] == 1389243.0  # the running sum of intervals


@needs_data
def test_itp_real_file():
    t = load_itp(DATA / "jobs/itp/itp_raw_all_clusters.csv.gz")
    assert len(t) == 69_351 and t.gpus.min() == 1 and t.gpus.max() == 64
    assert (t.nodes == np.ceil(t.gpus / 8)).all() and (np.diff(t.submit_s) >= 0).all()
    # one cluster of the ten (zcat | awk: cluster05 has 3,629 rows, some of them CPU-only)
    one = load_itp(DATA / "jobs/itp/itp_raw_all_clusters.csv.gz", "cluster05")
    assert one.source == "itp cluster05" and 0 < len(one) <= 3_629 and len(one) + one.skipped.get("cpu_only", 0) == 3_629
    with pytest.raises(TraceError, match="no jobs of cluster 'cluster11'; its clusters: cluster01, cluster02"):
        load_itp(DATA / "jobs/itp/itp_raw_all_clusters.csv.gz", "cluster11")


@needs_data
def test_skyplane_real_files():
    p = load_skyplane(DATA / "network/skyplane/latency.csv.gz", DATA / "network/skyplane/throughput.csv.gz")
    assert len(p.sites) >= 60 and p.rtt_ms.shape == (len(p.sites),) * 2
    known = ~np.isnan(p.rtt_ms)
    spread = known & ~np.isnan(p.rtt_min_ms) & ~np.isnan(p.rtt_max_ms)
    assert known.sum() > 4000 and (p.rtt_min_ms[spread] <= p.rtt_ms[spread]).all()
    assert (p.rtt_ms[spread] <= p.rtt_max_ms[spread]).all() and np.nanmax(p.gbps) < 100
    a, b = p.sites.index("aws:eu-north-1"), p.sites.index("azure:eastus")
    assert p.rtt_ms[a, b] == 105.976  # the first row of latency.csv


def test_bad_input_names_file_row_and_field(tmp_path):
    f = tmp_path / "philly.csv"
    f.write_text("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
                 "0,1,1,0,1,0,100,0,Pass\n1,2,8,0,1,5,-3,0,Pass\n")
    with pytest.raises(TraceError, match=r"philly.csv: row 3: run_time: must be a finite number >= 0, got -3"):
        load_philly(f)
    g = tmp_path / "itp.csv"
    g.write_text("cluster,job_id,duration\nc,1,5\n")
    with pytest.raises(TraceError, match=r"itp.csv: row 1: missing column\(s\) submission_time, num_gpu"):
        load_itp(g)
    with pytest.raises(TraceError, match="cannot read"):
        load_itp(tmp_path / "nope.csv")


def test_generic_jobs_and_network(tmp_path):
    from streams.replay.traces import fill_gbps, load_generic_jobs, load_generic_network

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type,data_gb,data_site\n"
                    "50,600,16,2,alice,Pass,training-data-parallel,120,eu\n"
                    "10,30,1,1,bob,Failed,inference,,\n")
    t = load_generic_jobs(jobs)
    assert t.submit_s.tolist() == [10.0, 50.0] and t.job_type == ["inference", "training-data-parallel"]
    assert t.data_gb.tolist() == [0.0, 120.0] and t.data_site == ["", "eu"] and t.nodes.tolist() == [1, 2]
    net = tmp_path / "net.csv"
    net.write_text("t_s,src_site,dst_site,rtt_ms,gbps\n0,eu,us,80,\n60,eu,us,100,\n0,us,eu,90,5\n0,eu,eu2,1,\n")
    p = load_generic_network(net)
    e, u, e2 = (p.sites.index(x) for x in ("eu", "us", "eu2"))
    assert p.rtt_ms[e, u] == 90.0 and (p.rtt_min_ms[e, u], p.rtt_max_ms[e, u]) == (80.0, 100.0)
    assert p.gbps[u, e] == 5.0 and np.isnan(p.rtt_ms[u, e2])
    # filled: 64 MiB window per 90 ms round trip = 536.9 Mbit / 0.09 s = 5.965 Gbit/s; within 2 ms: 10
    assert p.gbps[e, u] == pytest.approx(64 * 2**20 * 8 / 1e9 / 0.09) and p.gbps[e, e2] == 10.0
    assert fill_gbps(np.array([10.0]))[0] == 10.0  # 53.7 Gbit/s capped at 10
    bad = tmp_path / "bad.csv"
    bad.write_text("src_site,dst_site,rtt_ms\neu,us,fast\n")
    with pytest.raises(TraceError, match="bad.csv: row 2: rtt_ms: not a number"):
        load_generic_network(bad)


HELIOS_STYLE = """u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status
1,uA,8,64,1,0,3600,0,Pass
2,uB,0,16,1,30,600,0,Pass
3,uA,16,128,2,60,7200,0,Failed
4,uC,0,4,1,15,60,0,Killed
5,uB,1,8,1,45,1800,0,Pass
"""


def test_a_helios_style_file_with_cpu_only_jobs_is_read_with_them_skipped_and_counted(tmp_path):
    """Helios (SenseTime), cut in Philly's columns, has CPU-only jobs (gpu_num 0): they are counted and
    skipped, their intervals still moving the clock, instead of the whole file being refused."""
    path = tmp_path / "helios.csv"
    path.write_text(HELIOS_STYLE)
    t = load_philly(path)
    assert len(t) == 3 and t.skipped == {"cpu_only": 2}
    assert t.submit_s.tolist() == [0.0, 90.0, 150.0]  # 0; 0+30+60; +15+45
    assert t.gpus.tolist() == [8, 16, 1] and t.user == ["uA", "uA", "uB"]
    bad = tmp_path / "bad.csv"
    bad.write_text(HELIOS_STYLE.replace("2,uB,0,16", "2,uB,-1,16"))
    with pytest.raises(TraceError, match="row 3: gpu_num"):
        load_philly(bad)


@needs_data
def test_the_replay_of_a_helios_style_file_says_what_it_skipped(tmp_path):
    import json
    import subprocess
    import sys

    path = tmp_path / "helios.csv"
    path.write_text(HELIOS_STYLE)
    out = subprocess.run([sys.executable, "-m", "streams.cli", "simulate", "--jobs", f"philly:{path}", "--seeds", "1",
                          "--no-store", "--quiet", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["jobs"], doc["skipped"]) == (3, {"cpu_only": 2})
    assert {r["jobs"] for r in doc["summary"] if r["class"] == "all"} == {3}  # every policy replayed the three
