"""A real three-node Slurm on this machine, for tests and trying the bridge (Debian's slurm-wlm: one
``slurmctld`` and one ``slurmd -N nK`` per node, all on loopback ports in a temporary folder; cards
are a GRES named ``card`` without devices). What FIELD-NOTES.md verified: ``AuthType=auth/none``,
``SlurmUser=root``, ``select/cons_tres``, ``SLURM_CONF`` exported to every daemon and client."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "scontrol", "sbatch", "squeue")


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run here (not installed, or not root); the message says which."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process below them (``pgrep -P``), parents first."""
    out, todo = [], list(pids)
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        todo += [int(k) for k in kids]
    return out


def missing() -> str | None:
    """Why a local Slurm cannot start here, or None."""
    absent = [d for d in DAEMONS if shutil.which(d) is None]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): apt-get install slurmctld slurmd slurm-client"
    if os.geteuid() != 0:
        return "the local Slurm runs its daemons as root (SlurmUser=root): run as root"
    return None


@dataclass
class SlurmCluster:
    """``nodes`` nodes of ``cards`` cards each, started by :meth:`start`, stopped by :meth:`stop`."""

    root: Path
    nodes: tuple[str, ...] = ("n1", "n2", "n3")
    name: str = "cnsched"  # its ClusterName: a site's own cluster beside another's (one bridge each)
    cards: int = 8
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)  # each node claims the machine's CPUs
    mem_mb: int = 8000
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment every Slurm client needs (``SLURM_CONF``)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        ports = [_free_port() for _ in self.nodes]
        names = ",".join(self.nodes)
        lines = [
            f"ClusterName={self.name}", "SlurmctldHost=localhost", f"SlurmctldPort={_free_port()}",
            "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "GresTypes=card",
            "SchedulerType=sched/backfill", "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SlurmdTimeout=30", "InactiveLimit=0", "MinJobAge=300", "KillWait=5",
            f"StateSaveLocation={self.root / 'state'}", f"SlurmdSpoolDir={self.root / 'spool'}/%n",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}", f"SlurmdPidFile={self.root / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={self.root / 'log' / 'slurmd-%n.log'}",
        ]
        for name, port in zip(self.nodes, ports, strict=True):
            lines.append(f"NodeName={name} NodeHostname=localhost Port={port} CPUs={self.cpus} "
                         f"RealMemory={self.mem_mb} Gres=card:{self.cards} State=UNKNOWN")
        lines.append(f"PartitionName=main Nodes={names} Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.root / "gres.conf").write_text(f"NodeName={names} Name=card Count={self.cards}\n")

    def start(self, timeout_s: float = 60.0) -> SlurmCluster:
        """Write the configuration and start the daemons; return once every node is idle."""
        why = missing()
        if why is not None:
            raise SlurmUnavailable(why)
        self.write_config()
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i"], env=self.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True))
        for name in self.nodes:
            (self.root / "spool" / name).mkdir(parents=True, exist_ok=True)
            self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", name], env=self.env, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
            states = dict(line.split() for line in out.splitlines() if line.strip())
            if sorted(states) == sorted(self.nodes) and all(s == "idle" for s in states.values()):
                return self
            time.sleep(0.5)
        self.stop()
        raise SlurmUnavailable(f"the local Slurm did not come up within {timeout_s:g} s (see {self.root / 'log'})")

    def kill_node(self, name: str) -> None:
        """The node's software dies: its slurmd and the processes of the jobs it runs are killed
        (SIGKILL; the machine itself, and its network, stay up); slurmctld finds out by its pings."""
        proc = self.procs[1 + self.nodes.index(name)]
        jobs = [line.split()[0] for line in self.run("squeue", "-h", "-w", name, "-o", "%i %N", check=False).splitlines()]
        proc.kill()
        proc.wait()
        for job in jobs:  # its steps' processes (slurmstepd and all it ran) die with the machine
            steps = subprocess.run(["pgrep", "-f", f"slurmstepd: \\[{job}\\."], capture_output=True, text=True)
            for pid in _with_descendants([int(p) for p in steps.stdout.split()]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def run(self, *argv: str, check: bool = True) -> str:
        """A Slurm client command's standard output."""
        out = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=30)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip() or out.stdout.strip()}")
        return out.stdout

    def stop(self, drain_s: float = 20.0) -> None:
        """Cancel the cluster's jobs and wait (up to ``drain_s``) until Slurm has ended them, then stop the
        daemons: a slurmd stopped first leaves its jobs' slurmstepd running after the cluster is gone."""
        if self.procs and self.procs[0].poll() is None:
            jobs = self.run("squeue", "-h", "-o", "%i", check=False).split()
            if jobs:
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + drain_s
                while self.run("squeue", "-h", "-o", "%i", check=False).strip() and time.monotonic() < deadline:
                    time.sleep(0.3)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
