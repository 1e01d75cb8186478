"""The CLI's failure contract: SIGTERM unwinds (cleanup runs, exit 143), and with ``--json`` an
error is also one JSON object on stdout."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stableprompt import EngineError
from stableprompt._cli import _REGISTERED, main, register
from stableprompt._subcommand import Subcommand


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Register the test's commands; remove them afterwards. Yields the cleanup log."""
    log: list[str] = []
    yield log
    for name in ("sleepy", "failing"):
        _REGISTERED.pop(name, None)


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")


def test_sigterm_runs_the_commands_cleanup_and_exits_143(
        registered: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """SIGTERM during a command raises inside it, so its ``finally`` blocks run (a demo stops
    the llama-server it started); the default SIGTERM action is restored afterwards."""

    def run(_args: argparse.Namespace) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
            return 0
        finally:
            registered.append("cleaned up")

    register(Subcommand(name="sleepy", help="sleeps", add_arguments=_json_flag, run=run))
    started = time.monotonic()
    assert main(["sleepy"]) == 143
    assert time.monotonic() - started < 5
    assert registered == ["cleaned up"]
    assert "terminated (SIGTERM)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_embedding_programs_sigterm_handler_is_left_alone(registered: list[str]) -> None:
    """A SIGTERM handler installed by the program that calls ``main`` stays in charge."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))

    def run(_args: argparse.Namespace) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    try:
        register(Subcommand(name="sleepy", help="", add_arguments=_json_flag, run=run))
        assert main(["sleepy"]) == 0
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize(("argv", "status", "code"), [
    (["failing", "--json"], 1, "engine-start-failed"),
    (["failing", "--json", "--bad-input"], 2, "input-invalid"),
])
def test_json_mode_errors_are_one_json_object_on_stdout(
        registered: list[str], capsys: pytest.CaptureFixture[str], argv: list[str],
        status: int, code: str) -> None:
    """Under ``--json`` the error line still goes to stderr, and stdout holds
    ``{"error": {"code", "message", "exit_status"}}`` (nothing else)."""
    from stableprompt import InputError

    def add(parser: argparse.ArgumentParser) -> None:
        _json_flag(parser)
        parser.add_argument("--bad-input", action="store_true")

    def run(args: argparse.Namespace) -> int:
        if args.bad_input:
            raise InputError("argument --x: not a number", code="input-invalid")
        raise EngineError("the engine did not start", code="engine-start-failed")

    register(Subcommand(name="failing", help="", add_arguments=add, run=run))
    assert main(argv) == status
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["code"] == code and error["exit_status"] == status
    assert error["message"] in captured.err and not error["message"].startswith("stableprompt:")
    assert main([a for a in argv if a != "--json"]) == status  # text mode: stderr only
    assert capsys.readouterr().out == ""


def test_engine_serve_json_error_is_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The reviewer's case: ``engine serve --json --template /etc/passwd`` was accepted; now
    it is refused before anything is built or fetched, and stdout is the error object."""
    from stableprompt._engine import _server

    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path))

    def no_build(**_kwargs: object) -> Path:
        raise AssertionError("built before the template was checked")

    monkeypatch.setattr(_server, "build_server", no_build)
    assert main(["engine", "serve", "--json", "--template", "/etc/passwd"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "engine-template-invalid" and "/etc/passwd" in error["message"]


@pytest.mark.parametrize("argv", [["lint", "--exit-zero"], ["lint", "--exit-zero", "--json"]])
def test_a_full_disk_on_stdout_is_one_line_not_a_traceback(argv: list[str]) -> None:
    """Writing the output to /dev/full (ENOSPC on the final flush too): one error line, exit
    1, no traceback, nothing printed at interpreter exit."""
    import subprocess
    import sys

    capture = Path(__file__).parent / "fixtures" / "lint" / "clean.jsonl"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "stableprompt", *argv, str(capture)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                              check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], done.stderr
