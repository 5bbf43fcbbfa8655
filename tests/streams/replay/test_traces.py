"""Loaders against the real files in ../shared/data (their upstream formats), and bad input."""

from pathlib import Path

import numpy as np
import pytest

from streams.replay.traces import TraceError, load_itp, load_philly, load_skyplane

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


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
