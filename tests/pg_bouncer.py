"""PgBouncer in front of the throwaway cluster (``pg_cluster.py``), as fleets run a shared
PostgreSQL ledger: Debian's ``pgbouncer`` (``.ci/run`` installs it where missing) on
127.0.0.1 in ``pool_mode = transaction`` with two server connections per database, so
consecutive transactions of one client run on different server sessions (``server_round_robin``;
:meth:`Bouncer.warm` opens both) (what breaks
prepared statements, cursors and ``SET`` left on a session). Clients authenticate with
SCRAM against an ``auth_file`` holding the cluster user's password; PgBouncer logs in to the
server with it. Run as the cluster's user when we are root (PgBouncer refuses root), switched
in the child itself so that the process stopped at the end is PgBouncer.

:func:`start` raises :class:`Unavailable` with the reason when it cannot run; the fixture
skips with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pg_cluster as pg


class Unavailable(RuntimeError):
    """PgBouncer cannot be started here (the message says why)."""


@dataclass
class Bouncer:
    """A running PgBouncer: ``url(dbname)`` reaches the cluster's ``dbname`` through it."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{pg.USER}:{pg.PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def warm(self, dbname: str) -> None:
        """Open both server connections of ``dbname``'s pool (two transactions at once):
        with ``server_round_robin`` a client's consecutive transactions then alternate
        between them, as on a busy pool."""
        import psycopg

        with psycopg.connect(self.url(dbname)) as one, psycopg.connect(self.url(dbname)) as two:
            one.execute("SELECT 1")
            two.execute("SELECT 1")  # both in a transaction: two server connections

    def log(self) -> str:
        path = self.root / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.send_signal(signal.SIGINT)  # "safe shutdown" would wait for clients
            self.proc.wait(timeout=10)
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def _binary() -> str:
    for candidate in (shutil.which("pgbouncer"), "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise Unavailable("PgBouncer is not installed (apt-get install pgbouncer)")


def start(cluster: pg.Cluster) -> Bouncer:
    """Start PgBouncer in transaction pooling mode in front of ``cluster``.

    Raises:
        Unavailable: Not installed, or it did not start listening (its log is in the message,
            with the password removed).
    """
    binary = _binary()
    _, uid, gid = pg._run_as()  # as root: run as the cluster's user
    root = Path(tempfile.mkdtemp(prefix="stableprompt-pgbouncer-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    (root / "userlist.txt").write_text(f'"{pg.USER}" "{pg.PASSWORD}"\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={cluster.port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = scram-sha-256\nauth_file = {root / 'userlist.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 2\nserver_round_robin = 1\n"
        "max_client_conn = 200\nmax_db_connections = 0\n"
        f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n"
        "server_login_retry = 1\nlog_connections = 0\nlog_disconnections = 0\n")
    if uid is not None and gid is not None:
        for path in (root, *root.iterdir()):
            os.chown(path, uid, gid)
        os.chmod(root / "userlist.txt", 0o600)
    with open(root / "stderr.log", "wb") as stderr:  # a pipe nobody reads would fill
        # the user switched in the child itself (not runuser): the process signalled at the
        # end is PgBouncer, never left running behind a wrapper
        proc = subprocess.Popen([binary, str(root / "pgbouncer.ini")], user=uid, group=gid,
                                extra_groups=[] if gid is not None else None,
                                stdout=subprocess.DEVNULL, stderr=stderr)
    bouncer = Bouncer(root, port, proc)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = (root / "stderr.log").read_text(errors="replace")
            log = bouncer.log()
            bouncer.stop()
            raise Unavailable(f"pgbouncer exited ({proc.returncode}): "
                              f"{(err + log).replace(pg.PASSWORD, '***')[-500:]}")
        with socket.socket() as probe, contextlib.suppress(OSError):
            probe.settimeout(0.2)
            probe.connect(("127.0.0.1", port))
            return bouncer
        time.sleep(0.05)
    log = bouncer.log()
    bouncer.stop()
    raise Unavailable("pgbouncer did not listen within 15 s: "
                      f"{log.replace(pg.PASSWORD, '***')[-500:]}")
