"""The real data beside the checkout (../shared/data): tests that read it skip where it is not there
(a clone elsewhere), and say so."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


def skyplane_network(folder: Path, regions: int = 24, seed: int = 0) -> str:
    """``--network skyplane:LATENCY,THROUGHPUT`` of made-up regions, in the columns skyplane's profiles
    ship (PREMIUM tier, every pair both ways: RTT 5-120 ms, 2-20 Gbit/s): for tests of the CLI's
    plumbing that need regions to draw from, not the measurements themselves."""
    import numpy as np

    rng = np.random.default_rng(seed)
    names = [f"cloud:region-{k}" for k in range(regions)]
    lat = ["src_region,src_tier,src_instance_class,dst_region,dst_tier,dst_instance_class,min_rtt,avg_rtt,max_rtt,"
           "mdev_rtt"]
    thr = ["src_region,src_tier,src_instance_class,dst_region,dst_tier,dst_instance_class,iperf3_connections,"
           "iperf3_runtime_s,throughput_sent_gbps,throughput_received_gbps,cpu_utilization,success,grid_run"]
    for a in names:
        for b in names:
            if a != b:
                rtt, gbps = rng.uniform(5, 120), rng.uniform(2, 20)
                lat.append(f"{a},PREMIUM,m,{b},PREMIUM,m,{rtt * 0.99:.3f},{rtt:.3f},{rtt * 1.01:.3f},0.3")
                thr.append(f"{a},PREMIUM,m,{b},PREMIUM,m,64,5,{gbps:.4f},{gbps:.4f},10,True,run")
    (folder / "latency.csv").write_text("\n".join(lat) + "\n")
    (folder / "throughput.csv").write_text("\n".join(thr) + "\n")
    return f"skyplane:{folder / 'latency.csv'},{folder / 'throughput.csv'}"
