"""``stableprompt emulator serve`` and the CLI dispatcher: one-line errors, real serving."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stableprompt import _cli
from stableprompt._cli import SUBCOMMANDS, Subcommand, main, register
from stableprompt.emulator import Emulator


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("argv", "needle"), [
    ([], "a command is required"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["emulator"], "required: ACTION"),
    (["emulator", "serve", "--port", "abc"], "not a port number"),
    (["emulator", "serve", "--port", "70000"], "port must be 0..65535"),
    (["emulator", "serve", "--host", "8.8.8.8"], "binds loopback only"),
    (["emulator", "serve", "--echo", "--script", "x.json"], "not allowed with argument"),
    (["emulator", "serve", "--capacity-entries", "0"], "must be >= 1"),
    (["emulator", "serve", "--script", "/nonexistent/turns.json"], "cannot read script"),
])
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    """Usage errors print one line on stderr and exit 2."""
    assert main(argv) == 2
    assert needle in one_line_error(capsys)


def test_bad_script_content_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A malformed script file is reported on one line with its JSON pointer."""
    script = tmp_path / "turns.json"
    script.write_text('[{"text": 3}]')
    assert main(["emulator", "serve", "--script", str(script)]) == 2
    err = one_line_error(capsys)
    assert "bad script turn" in err and "/0/text" in err


def test_port_in_use_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    """Serving on a taken port fails cleanly."""
    with Emulator() as taken:
        assert main(["emulator", "serve", "--port", str(taken.port)]) == 1
    assert "cannot listen on 127.0.0.1" in one_line_error(capsys)


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints usage to stdout and exits 0."""
    assert main(["emulator", "serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--port" in out and "not a provider" in out


def test_commands_can_be_registered(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registered Subcommand is parsed and run next to the built-in ones."""
    monkeypatch.setattr(_cli, "_REGISTERED", {})
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--times", type=int, default=1)

    def run(args: argparse.Namespace) -> int:
        print("hi" * args.times)
        return 7

    register(Subcommand("hello", "say hi", add, run))
    assert "emulator" in SUBCOMMANDS
    assert main(["hello", "--times", "2"]) == 7
    assert capsys.readouterr().out == "hihi\n"


def test_serve_answers_real_requests_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    """The CLI server prints its URL, serves scripted turns, and exits 0 on SIGINT."""
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"text": "scripted"}]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a suite started in the background of a non-interactive shell (nohup, `cmd &`) runs
    # with SIGINT ignored, which a child inherits and Python then leaves ignored: Ctrl-C as
    # a terminal sends it needs the default disposition
    proc = subprocess.Popen(
        [sys.executable, "-m", "stableprompt", "emulator", "serve", "--port", "0",
         "--script", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "an emulator, not a real provider" in banner
        match = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert match is not None
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=10)
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read())
        conn.close()
        assert response.status == 200
        assert answer["choices"][0]["message"]["content"] == "scripted"
        assert proc.stdout.readline().startswith("#1 POST /v1/chat/completions 200 in=")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err
