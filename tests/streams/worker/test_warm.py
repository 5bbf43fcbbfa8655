"""Issue 55 item 8: the first decision after a worker start compiled its kernels inside the event loop
(~15 s on a cold cache). The warm-up runs a few decisions through the scheduler itself; after it, a
live-like burst — a bigger cluster, other shapes, gangs, data, the queue and moves — compiles nothing
more: every numba kernel it calls already has the signature it needs. A burst big enough for the
parallel scoring kernel is among them (it was compiled again inside the first large burst: numba
tells a read-only array from a writable one)."""

import subprocess
import sys
import textwrap


def test_after_the_warm_up_a_burst_of_decisions_compiles_nothing():
    code = textwrap.dedent("""
        import sys
        import numba
        from streams.worker.warm import compile_decisions, compile_scoring

        def kernels():
            out = {}
            for name, mod in list(sys.modules.items()):
                if not (name.startswith("core.") or name.startswith("streams.")):
                    continue
                for attr, v in list(vars(mod).items()):
                    if isinstance(v, numba.core.registry.CPUDispatcher):
                        out[f"{name}.{attr}"] = len(v.signatures)
            return out

        compile_scoring()  # as the worker's warmer: scoring, then decisions
        compile_decisions()
        before = kernels()
        from streams.dev.bench.decide import _tasks, _world
        sched, now, _ = _world(96, 3)
        sched.decide_many(_tasks(60, 3, "b"), now)
        for t in _tasks(20, 4, "c"):
            sched.decide(t, now)
        for tid in list(sched.running)[:10]:
            sched.start(tid, sched.running[tid].nodes)
        sched.retry_pending(now + 1)
        sched.reschedule(now + 400)
        big, now, _ = _world(1200, 5)  # 60 tasks x 1,200 nodes: the parallel kernel, on the read-only node view
        big.decide_many(_tasks(60, 5, "d"), now)
        after = kernels()
        grew = sorted(k for k, n in after.items() if n > before.get(k, 0))
        print("KERNELS", len(before), "GREW", ",".join(grew))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("KERNELS"))
    count, grew = line.split()[1], line.split("GREW", 1)[1].strip()
    assert int(count) >= 5 and grew == ""  # kernels were warmed, and the burst needed no new one
