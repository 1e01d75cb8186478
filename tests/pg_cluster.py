"""A throwaway PostgreSQL cluster for the ledger tests: Debian's ``postgresql`` package
(``initdb``, ``pg_ctl``; ``.ci/run`` installs it where missing), a data directory in a temp
directory, listening on 127.0.0.1 only, password authentication (scram-sha-256), fsync off.

PostgreSQL refuses to run as root, so as root (CI) the server runs as the ``postgres`` user
the package creates (else ``nobody``), through ``runuser``. :func:`start` raises
:class:`Unavailable` with the reason when any of that cannot be done; the fixture skips with it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

USER = "stableprompt"
PASSWORD = "pg-test-Secret-7f3a9c"  # a password the tests check is never shown


class Unavailable(RuntimeError):
    """No PostgreSQL server can be started here (the message says why)."""


@dataclass
class Cluster:
    """A running cluster: ``url(dbname)`` is a URL with the password."""

    root: Path
    port: int
    bin_dir: Path
    run_as: list[str]
    start_s: float

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            subprocess.run([*self.run_as, str(self.bin_dir / "pg_ctl"), "-D",
                            str(self.root / "data"), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _bin_dir() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if not versions:
        raise Unavailable("PostgreSQL is not installed (no initdb on PATH or in "
                          "/usr/lib/postgresql/*/bin; apt-get install postgresql)")
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> tuple[list[str], int | None, int | None]:
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            runuser = shutil.which("runuser")
            if runuser is None:
                raise Unavailable("running as root without runuser: cannot start PostgreSQL")
            return [runuser, "-u", name, "--"], entry.pw_uid, entry.pw_gid
    raise Unavailable("running as root and no postgres or nobody user to run PostgreSQL as")


def start() -> Cluster:
    """Make and start a cluster.

    Raises:
        Unavailable: Not installed, or initdb / pg_ctl failed (their output is in the message).
    """
    bin_dir = _bin_dir()
    run_as, uid, gid = _run_as()
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="stableprompt-pg-"))
    try:
        if uid is not None and gid is not None:
            os.chown(root, uid, gid)
        pwfile = root / "pw"
        pwfile.write_text(PASSWORD)
        if uid is not None and gid is not None:
            os.chown(pwfile, uid, gid)
        init = subprocess.run(
            [*run_as, str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", USER,
             "--pwfile", str(pwfile), "--auth", "scram-sha-256", "-E", "UTF8",
             "--locale", "C", "--no-sync"],
            capture_output=True, text=True, timeout=120, check=False, cwd=root)
        if init.returncode != 0:
            raise Unavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-500:]}")
        port = _free_port()
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} "
                   f"-c unix_socket_directories={root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        ctl = subprocess.run(
            [*run_as, str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-o", options,
             "-l", str(root / "log"), "-w", "-t", "60", "start"],
            capture_output=True, text=True, timeout=90, check=False, cwd=root)
        if ctl.returncode != 0:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
            raise Unavailable(f"pg_ctl start failed: {ctl.stderr.strip()} {log[-500:]}")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Cluster(root, port, bin_dir, run_as, time.monotonic() - began)
