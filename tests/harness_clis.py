"""Today's agent CLIs at pinned versions, installed once per machine from the npm registry for
the tests marked ``harness`` (``tests/test_harness_cli.py``).

Layout (outside the repository, like ``peer_envs``)::

    <stableprompt cache>/harness/<cli>-<key>/      an npm prefix (``_cache.cache_root()``)
        node_modules/.bin/<command>
        .installed                                  the package spec, written last
    <stableprompt cache>/harness/<cli>-<key>.lock  held while one process installs it

``key`` is 12 hex digits of SHA-256 over the package spec and the npm version. Both CLIs are
native binaries shipped inside npm platform packages (``optionalDependencies``): Claude Code's
postinstall links the binary over ``bin/claude.exe``; Codex's ``bin/codex.js`` launcher (node)
starts the Rust binary of ``@openai/codex-linux-x64``. Claude Code 2.1.332 declares
``engines.node >=22`` for that postinstall; the binary itself needs no node, and npm only
warns on node 20 (Debian 12's), so it installs and runs there.

Failures (:class:`HarnessCliError`) say whether the registry was unreachable (npm's network
error: callers skip) or npm failed on a reachable registry (callers fail).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from peer_envs import locked
from stableprompt._cache import cache_root

__all__ = ["CLIS", "HarnessCliError", "cli_path", "install_dir"]

CLIS: dict[str, tuple[str, str]] = {  # cli -> (npm package spec, command); checked 2026-12-07
    "claude": ("@anthropic-ai/claude-code@2.1.332", "claude"),
    "codex": ("@openai/codex@0.171.0", "codex"),
}

_NPM_TIMEOUT_S = 900.0
#: npm's words for "could not reach the registry".
_NETWORK = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH"
    r"|network request to .* failed|request to .* failed|socket hang up|UNABLE_TO_GET_ISSUER"
    r"|SELF_SIGNED_CERT|getaddrinfo", re.IGNORECASE)


class HarnessCliError(RuntimeError):
    """A CLI could not be installed.

    Attributes:
        cli: The CLI (a :data:`CLIS` key).
        reason: npm's error line, or why npm could not run.
        unreachable: The registry could not be reached (or npm is missing); ``False`` for a
            failure on a reachable registry.
    """

    def __init__(self, cli: str, reason: str, *, unreachable: bool) -> None:
        super().__init__(f"{cli} ({CLIS[cli][0]}): {reason}")
        self.cli, self.reason, self.unreachable = cli, reason, unreachable


def _npm() -> str | None:
    return shutil.which("npm")


def install_dir(cli: str) -> Path:
    """Where ``cli`` is (or would be) installed; nothing is created here.

    Raises:
        KeyError: ``cli`` is not in :data:`CLIS`.
    """
    spec = CLIS[cli][0]
    npm = _npm() or "npm"
    version = subprocess.run([npm, "--version"], capture_output=True, text=True, check=False,
                             timeout=60).stdout.strip() if _npm() else "none"
    key = hashlib.sha256(f"{spec}\n{version}".encode()).hexdigest()[:12]
    return cache_root() / "harness" / f"{cli}-{key}"


def _reason(output: str) -> str:
    """npm's first two error lines (its log-file pointer left out), else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("npm error", "npm ERR!"))
              and "complete log" not in line and "_logs" not in line]
    return ("; ".join(errors[:2]) if errors else lines[-1] if lines else "no output")[:300]


def cli_path(cli: str) -> Path:
    """The command of ``cli`` at its pinned version, installing it first when missing or
    incomplete (a minute or two the first time; a check of one file afterwards). The install
    is checked by running ``<command> --version``.

    Raises:
        KeyError: ``cli`` is not in :data:`CLIS`.
        HarnessCliError: npm is missing or failed; ``unreachable`` says whether the registry
            (or npm itself) was the cause.
    """
    spec, command = CLIS[cli]
    npm = _npm()
    if npm is None:
        raise HarnessCliError(cli, "npm not found on PATH (.ci/run installs Debian's nodejs "
                              "and npm)", unreachable=True)
    where = install_dir(cli)
    marker, binary = where / ".installed", where / "node_modules" / ".bin" / command
    if marker.is_file() and marker.read_text() == spec and binary.exists():
        return binary
    with locked(where.with_name(where.name + ".lock")):
        if marker.is_file() and marker.read_text() == spec and binary.exists():
            return binary
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(where), "--no-audit", "--no-fund",
                 "--no-update-notifier", "--loglevel=error", spec],
                capture_output=True, text=True, check=False, timeout=_NPM_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise HarnessCliError(cli, f"npm install timed out after {_NPM_TIMEOUT_S:.0f} s",
                                  unreachable=True) from exc
        output = f"{done.stdout}\n{done.stderr}"
        if done.returncode:
            raise HarnessCliError(cli, f"npm install failed (exit {done.returncode}): "
                                  f"{_reason(output)}",
                                  unreachable=_NETWORK.search(output) is not None)
        check = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                               check=False, timeout=120)
        if check.returncode:
            raise HarnessCliError(cli, f"{command} --version failed after install: "
                                  f"{_reason(check.stdout + check.stderr)}",
                                  unreachable=False)
        marker.write_text(spec)
    return binary
