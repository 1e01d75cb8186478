"""Starting the emulator and the proxy as subprocesses for the proxy benchmarks
(``bench_proxy.py``, ``bench_proxy_load.py``): one helper, one way to switch recording off."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CLI", "RECORDING_OFF", "started"]

CLI = ("-m", "stableprompt")
"""How ``started`` runs the CLI by default: ``python -m stableprompt ARGS``."""

RECORDING_OFF = ("-c", """
import sys
from stableprompt._recording._recorder import Recorder
Recorder.recordable = staticmethod(lambda path, method="POST": False)
from stableprompt._cli import main
sys.exit(main(sys.argv[1:]))
""")
"""The CLI with no request analysed (each call then gets only its cheap unanalysed row):
the forwarding cost alone."""


@contextmanager
def started(args: list[str], pattern: str, launcher: tuple[str, ...] = CLI) -> Iterator[str]:
    """Run ``python LAUNCHER ARGS``, yield the first group of ``pattern`` in its first line
    of output (its URL), terminate it on exit.

    Raises:
        RuntimeError: The first line does not match (the process did not start).
    """
    proc = subprocess.Popen([sys.executable, *launcher, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(pattern, line)
        if match is None:
            raise RuntimeError(f"{args[0]} did not start: {line!r}")
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
