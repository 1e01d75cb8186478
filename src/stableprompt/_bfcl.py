"""Berkeley Function Calling Leaderboard (BFCL) v4 data: a real tool-calling workload.

The data (Apache-2.0) ships inside the PyPI wheel ``bfcl-eval==2026.3.23`` under
``bfcl_eval/data/``. :func:`bfcl_data_dir` fetches that wheel once with
``python -m pip download --no-deps`` (the only network use), checks its SHA-256, and extracts only
``bfcl_eval/data/**`` into the user cache::

    $STABLEPROMPT_CACHE_DIR     (else $XDG_CACHE_HOME/stableprompt, else ~/.cache/stableprompt)
    └── bfcl-eval-2026.3.23/
        ├── .complete                  marker: extraction finished
        └── bfcl_eval/data/            the returned directory
            ├── BFCL_v4_live_multiple.json          JSON lines: {"id", "question", "function"}
            ├── BFCL_v4_multi_turn_base.json        JSON lines: {"id", "question",
            │                                        "initial_config", "path", "involved_classes",
            │                                        "excluded_function"?}
            ├── possible_answer/BFCL_v4_multi_turn_base.json   {"id", "ground_truth"}
            └── multi_turn_func_doc/<file>.json      JSON lines: {"name", "description",
                                                      "parameters", "response"}

Offline machines: download the wheel elsewhere and point ``STABLEPROMPT_BFCL_WHEEL`` at it.

Source: https://pypi.org/project/bfcl-eval/2026.3.23/ and
https://github.com/ShishirPatil/gorilla/tree/main/berkeley-function-call-leaderboard
(``bfcl_eval/constants/executable_backend_config.py`` maps classes to doc files).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._canonical import loads
from ._exceptions import WorkloadUnavailableError
from ._tools import ToolSet

__all__ = [
    "BFCL_VERSION",
    "BfclSession",
    "bfcl_data_dir",
    "load_live_multiple",
    "load_multi_turn_base",
]

BFCL_VERSION = "2026.3.23"
_WHEEL_NAME = f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"
# SHA-256 of the PyPI wheel (as published; verified on download and for STABLEPROMPT_BFCL_WHEEL).
_WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
_DATA_PREFIX = "bfcl_eval/data/"
_MARKER = ".complete"
_DOWNLOAD_TIMEOUT_S = 120.0
_FIX = (
    "Fix: make PyPI reachable (pip honours PIP_INDEX_URL / proxies), set STABLEPROMPT_CACHE_DIR "
    "to a writable directory, or download the wheel elsewhere (pip download --no-deps "
    f"bfcl-eval=={BFCL_VERSION}) and set STABLEPROMPT_BFCL_WHEEL=/path/to/{_WHEEL_NAME}."
)

# Class name (``involved_classes``) -> tool-doc file, as in BFCL's
# bfcl_eval/constants/executable_backend_config.py (MULTI_TURN_FUNC_DOC_FILE_MAPPING).
_FUNC_DOC_FILES: Mapping[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}


def _cache_root() -> Path:
    explicit = os.environ.get("STABLEPROMPT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "stableprompt"
    return Path.home() / ".cache" / "stableprompt"


def _unavailable(what: str) -> WorkloadUnavailableError:
    return WorkloadUnavailableError(f"BFCL v4 data unavailable: {what}. {_FIX}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_wheel(dest: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--quiet", "--dest", str(dest),
        f"bfcl-eval=={BFCL_VERSION}",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise _unavailable(
            f"'pip download' timed out after {_DOWNLOAD_TIMEOUT_S:.0f} s (PyPI unreachable?)"
        ) from exc
    except OSError as exc:
        raise _unavailable(f"cannot run {sys.executable} -m pip: {exc}") from exc
    wheel = dest / _WHEEL_NAME
    if done.returncode != 0 or not wheel.is_file():
        tail = (done.stderr or done.stdout).strip()[-600:]
        raise _unavailable(
            f"'pip download bfcl-eval=={BFCL_VERSION}' failed (exit {done.returncode}): {tail}"
        )
    return wheel


def _extract(wheel: Path, root: Path) -> None:
    """Extract ``bfcl_eval/data/**`` into a temp dir beside ``root``, then rename it into place."""
    actual = _sha256(wheel)
    if actual != _WHEEL_SHA256:
        raise _unavailable(
            f"{wheel} has SHA-256 {actual}, expected {_WHEEL_SHA256} (bfcl-eval=={BFCL_VERSION})"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bfcl-", dir=root.parent))
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                name = member.filename
                if not name.startswith(_DATA_PREFIX) or member.is_dir():
                    continue
                parts = Path(name).parts
                if ".." in parts or Path(name).is_absolute():
                    raise _unavailable(f"unsafe path {name!r} in {wheel}")
                target = staging.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        staging.chmod(0o755)  # mkdtemp makes 0700; the data is public and read-only in use
        (staging / _MARKER).write_text(f"bfcl-eval=={BFCL_VERSION} sha256={_WHEEL_SHA256}\n")
        try:
            os.rename(staging, root)
        except OSError:
            if not (root / _MARKER).is_file():  # not a concurrent winner: a broken leftover
                raise
    except zipfile.BadZipFile as exc:
        raise _unavailable(f"{wheel} is not a valid wheel: {exc}") from exc
    except OSError as exc:
        raise _unavailable(f"cannot write the cache at {root.parent}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def bfcl_data_dir(*, download: bool = True) -> Path:
    """Return the directory holding BFCL v4's ``bfcl_eval/data`` files, fetching them once.

    Args:
        download: When the cache is empty and ``STABLEPROMPT_BFCL_WHEEL`` is unset, run
            ``python -m pip download --no-deps bfcl-eval==2026.3.23`` (timeout 120 s). With
            ``False`` an empty cache raises instead.

    Returns:
        ``<cache>/bfcl-eval-2026.3.23/bfcl_eval/data`` (see the module docstring for the cache
        location and layout). Later calls return it without any network or extraction work.

    Raises:
        WorkloadUnavailableError: Download failed or timed out (PyPI unreachable), the wheel's
            SHA-256 does not match, ``STABLEPROMPT_BFCL_WHEEL`` names a missing file, or the
            cache directory is not writable (code ``workload-unavailable``). The message says
            how to fix it.
    """
    root = _cache_root() / f"bfcl-eval-{BFCL_VERSION}"
    data = root / "bfcl_eval" / "data"
    if (root / _MARKER).is_file():
        return data
    if root.exists():  # left by an interrupted older layout or by hand: not ours to trust
        raise _unavailable(f"{root} exists but is incomplete (no {_MARKER}); delete it and retry")
    given = os.environ.get("STABLEPROMPT_BFCL_WHEEL")
    if given:
        wheel = Path(given)
        if not wheel.is_file():
            raise _unavailable(f"STABLEPROMPT_BFCL_WHEEL={given} is not a file")
        _extract(wheel, root)
        return data
    if not download:
        raise _unavailable(f"not in the cache at {root} and download=False")
    with tempfile.TemporaryDirectory(prefix="stableprompt-bfcl-") as tmp:
        _extract(_download_wheel(Path(tmp)), root)
    return data


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Parse a BFCL JSON-lines file (one JSON object per non-empty line)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _unavailable(f"cannot read {path}: {exc}") from exc
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(loads(line))
            except ValueError as exc:
                raise _unavailable(f"{path}:{number} is not valid JSON: {exc}") from exc
    return rows


def load_live_multiple(*, download: bool = True) -> list[dict[str, Any]]:
    """Load ``BFCL_v4_live_multiple.json``: 1,053 user-contributed requests, 4,178 tool schemas.

    Returns:
        One dict per entry, file order: ``{"id": str, "question": [[{"role", "content"}, ...]],
        "function": [{"name", "description", "parameters"}, ...]}``. Schemas are BFCL-style
        (``"type": "dict"``, ``"float"``, ``"any"``, ``"tuple"``; names with ``.``): build tools
        with ``ToolSet.from_dicts(entry["function"], repair=True)``. Fresh objects per call.

    Raises:
        WorkloadUnavailableError: See :func:`bfcl_data_dir`.
    """
    return _read_lines(bfcl_data_dir(download=download) / "BFCL_v4_live_multiple.json")


@dataclass(frozen=True, slots=True)
class BfclSession:
    """One BFCL v4 multi-turn session with its tools and ground truth.

    Attributes:
        id: Entry id, e.g. ``"multi_turn_base_0"``.
        involved_classes: API classes the session uses, e.g. ``("TwitterAPI",
            "GorillaFileSystem")``, in the data's order.
        tool_docs: Raw BFCL tool docs (``{"name", "description", "parameters", "response"}``) of
            every involved class, concatenated in ``involved_classes`` order and file order,
            exactly as BFCL's ``populate_test_cases_with_predefined_functions`` builds them.
            Shared across sessions; do not mutate (use :meth:`tool_set`).
        turns: One tuple of messages (``{"role": "user", "content": str}``) per user turn.
        ground_truth: One tuple of expected call strings per turn, e.g.
            ``("cd(folder='document')", "mkdir(dir_name='temp')")``; same length as ``turns``.
        initial_config: Initial state of each involved class (BFCL ``initial_config``).
        path: BFCL's ``path`` list (the ``Class.method`` calls of the reference solution).
        excluded_functions: BFCL ``excluded_function`` names (empty when absent). BFCL v4's own
            pipeline does not remove them from the tool docs, and neither does this loader.
    """

    id: str
    involved_classes: tuple[str, ...]
    tool_docs: tuple[dict[str, Any], ...]
    turns: tuple[tuple[dict[str, Any], ...], ...]
    ground_truth: tuple[tuple[str, ...], ...]
    initial_config: dict[str, Any]
    path: tuple[str, ...]
    excluded_functions: tuple[str, ...]

    def tool_set(self, *, repair: bool = True) -> ToolSet:
        """Build the session's :class:`~stableprompt.ToolSet` from :attr:`tool_docs`.

        BFCL docs need ``repair=True`` (``"type": "dict"`` / ``"float"``, and the ``response``
        output schema is dropped); the fixes are listed in ``ToolSet.repairs``.
        """
        return ToolSet.from_dicts(self.tool_docs, repair=repair)


def load_multi_turn_base(*, download: bool = True) -> list[BfclSession]:
    """Load BFCL v4 ``multi_turn_base``: 200 sessions joined with ground truth and tool docs.

    Joins ``BFCL_v4_multi_turn_base.json`` with ``possible_answer/BFCL_v4_multi_turn_base.json``
    by ``id`` and attaches the ``multi_turn_func_doc/<file>.json`` docs of each session's
    ``involved_classes``.

    Returns:
        Sessions in file order (see :class:`BfclSession`).

    Raises:
        WorkloadUnavailableError: See :func:`bfcl_data_dir`; also when an entry has no ground
            truth, its turn count differs from the ground truth's, or it names an unknown class.
    """
    data = bfcl_data_dir(download=download)
    entries = _read_lines(data / "BFCL_v4_multi_turn_base.json")
    answers = {
        row["id"]: row["ground_truth"]
        for row in _read_lines(data / "possible_answer" / "BFCL_v4_multi_turn_base.json")
    }
    docs: dict[str, tuple[dict[str, Any], ...]] = {}
    sessions = []
    for entry in entries:
        sid = entry["id"]
        truth = answers.get(sid)
        if truth is None or len(truth) != len(entry["question"]):
            raise _unavailable(f"{sid}: ground truth missing or of a different turn count")
        tool_docs: list[dict[str, Any]] = []
        for cls in entry["involved_classes"]:
            if cls not in docs:
                file = _FUNC_DOC_FILES.get(cls)
                if file is None:
                    raise _unavailable(f"{sid}: unknown class {cls!r} in involved_classes")
                docs[cls] = tuple(_read_lines(data / "multi_turn_func_doc" / file))
            tool_docs.extend(docs[cls])
        sessions.append(
            BfclSession(
                id=sid,
                involved_classes=tuple(entry["involved_classes"]),
                tool_docs=tuple(tool_docs),
                turns=tuple(tuple(turn) for turn in entry["question"]),
                ground_truth=tuple(tuple(calls) for calls in truth),
                initial_config=entry.get("initial_config", {}),
                path=tuple(entry.get("path", ())),
                excluded_functions=tuple(entry.get("excluded_function", ())),
            )
        )
    return sessions
