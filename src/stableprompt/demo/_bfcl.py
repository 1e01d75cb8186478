"""Berkeley Function Calling Leaderboard (BFCL) v4 data: a real tool-calling workload.

The data (Apache-2.0) ships inside the PyPI wheel ``bfcl-eval==2026.3.23`` under
``bfcl_eval/data/``. :func:`bfcl_data_dir` fetches that wheel once with
``python -m pip download --no-deps`` (the only network use), checks its SHA-256, and extracts only
``bfcl_eval/data/**`` into the user cache::

    $STABLEPROMPT_CACHE_DIR     (else $XDG_CACHE_HOME/stableprompt, else ~/.cache/stableprompt)
    └── bfcl-eval-2026.3.23/
        ├── MANIFEST.sha256            "<sha256>  <path>" per extracted file (sha256sum format)
        ├── .complete                  marker: extraction finished (written last)
        └── bfcl_eval/data/            the returned directory
            ├── BFCL_v4_live_multiple.json          JSON lines: {"id", "question", "function"}
            ├── BFCL_v4_multi_turn_base.json        JSON lines: {"id", "question",
            │                                        "initial_config", "path", "involved_classes",
            │                                        "excluded_function"?}
            ├── possible_answer/BFCL_v4_multi_turn_base.json   {"id", "ground_truth"}
            └── multi_turn_func_doc/<file>.json      JSON lines: {"name", "description",
                                                      "parameters", "response"}

Every load re-checks the cached files against the manifest (about 12 MB of SHA-256, a few ms;
once per process while the files' sizes and mtimes are unchanged): a damaged cache is reported
with the fix (delete the directory, or set ``STABLEPROMPT_CACHE_DIR``), never used.

Offline machines: download the wheel elsewhere and point ``STABLEPROMPT_BFCL_WHEEL`` at it.

Source: https://pypi.org/project/bfcl-eval/2026.3.23/ and
https://github.com/ShishirPatil/gorilla/tree/main/berkeley-function-call-leaderboard
(``bfcl_eval/constants/executable_backend_config.py`` maps classes to doc files).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._cache import cache_root, pip_reason, sha256_file
from .._canonical import loads
from .._exceptions import WorkloadUnavailableError
from .._prompt._tools import ToolSet

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
_MANIFEST = "MANIFEST.sha256"
_DOWNLOAD_TIMEOUT_S = 120.0
_REASON_CHARS = 200
_FETCH_FIX = (
    "Fix: make PyPI reachable (pip honours PIP_INDEX_URL and proxy variables), or download "
    f"{_WHEEL_NAME} elsewhere (pip download --no-deps bfcl-eval=={BFCL_VERSION}) and set "
    "STABLEPROMPT_BFCL_WHEEL to its path."
)
_WRITE_FIX = "Fix: set STABLEPROMPT_CACHE_DIR to a writable directory."
_VERIFIED: dict[Path, tuple[tuple[str, int, int], ...]] = {}
"""Cache root -> (path, size, mtime_ns) of the manifest and each file when last verified."""

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


def _unavailable(what: str, fix: str = _FETCH_FIX) -> WorkloadUnavailableError:
    return WorkloadUnavailableError(f"BFCL v4 data unavailable: {what}. {fix}")


def _damaged(root: Path, what: str) -> WorkloadUnavailableError:
    """The cache at ``root`` cannot be trusted: say so and how to get a fresh one."""
    return WorkloadUnavailableError(
        f"BFCL v4 cache at {root} is damaged: {what}. Fix: delete {root} (the data is fetched "
        "again on the next run) or set STABLEPROMPT_CACHE_DIR to another directory.",
        code="workload-cache-damaged",
    )







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
        reason = pip_reason(f"{done.stdout}\n{done.stderr}", _REASON_CHARS)
        raise _unavailable(
            f"'pip download bfcl-eval=={BFCL_VERSION}' failed (exit {done.returncode}): {reason}"
        )
    return wheel


def _extract(wheel: Path, root: Path) -> None:
    """Extract ``bfcl_eval/data/**`` into a temp dir beside ``root``, then rename it into place."""
    actual = sha256_file(wheel)
    if actual != _WHEEL_SHA256:
        raise _unavailable(
            f"{wheel} has SHA-256 {actual}, expected {_WHEEL_SHA256} (bfcl-eval=={BFCL_VERSION})"
        )
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".bfcl-", dir=root.parent))
    except OSError as exc:
        raise _unavailable(f"cannot write the cache at {root.parent}: {exc}", _WRITE_FIX) from exc
    try:
        manifest: list[str] = []
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
                manifest.append(f"{sha256_file(target)}  {'/'.join(parts)}\n")
        staging.chmod(0o755)  # mkdtemp makes 0700; the data is public and read-only in use
        (staging / _MANIFEST).write_text("".join(sorted(manifest, key=lambda x: x[66:])))
        (staging / _MARKER).write_text(f"bfcl-eval=={BFCL_VERSION} sha256={_WHEEL_SHA256}\n")
        try:
            os.rename(staging, root)
        except OSError:
            if not (root / _MARKER).is_file():  # not a concurrent winner: a broken leftover
                raise
    except zipfile.BadZipFile as exc:
        raise _unavailable(f"{wheel} is not a valid wheel: {exc}") from exc
    except OSError as exc:
        raise _unavailable(f"cannot write the cache at {root.parent}: {exc}", _WRITE_FIX) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _verify(root: Path) -> None:
    """Check every file listed in ``root``'s manifest against its SHA-256 (skipped when the
    sizes and mtimes are those of the last successful check in this process).

    Raises:
        WorkloadUnavailableError: The manifest is missing or malformed, or a file is missing
            or differs (code ``workload-cache-damaged``).
    """
    manifest = root / _MANIFEST
    try:
        text = manifest.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _damaged(root, f"no {_MANIFEST} to check the files against (written by an "
                             "older stableprompt, or deleted)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _damaged(root, f"cannot read {_MANIFEST} ({exc})") from exc
    entries: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        digest, _, name = line.partition("  ")
        parts = Path(name).parts
        if (not re.fullmatch(r"[0-9a-f]{64}", digest) or not name.startswith(_DATA_PREFIX)
                or ".." in parts or Path(name).is_absolute()):
            raise _damaged(root, f"{_MANIFEST} line {number} is not '<sha256>  <data path>'")
        entries.append((digest, name))
    if not entries:
        raise _damaged(root, f"{_MANIFEST} lists no files")
    try:
        signature = tuple(
            (name, (st := (root / name).stat()).st_size, st.st_mtime_ns)
            for name in (_MANIFEST, *(name for _, name in entries))
        )
    except OSError as exc:
        raise _damaged(root, f"a listed file is missing ({exc.strerror}: {exc.filename})") from exc
    if _VERIFIED.get(root) == signature:
        return
    for digest, name in entries:
        try:
            actual = sha256_file(root / name)
        except OSError as exc:
            raise _damaged(root, f"cannot read {name} ({exc.strerror or exc})") from exc
        if actual != digest:
            raise _damaged(root, f"{name} does not match its SHA-256 in {_MANIFEST}")
    _VERIFIED[root] = signature


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
            cache directory is not writable (code ``workload-unavailable``); the cache exists
            but is incomplete or a file differs from the manifest (code
            ``workload-cache-damaged``). The message says how to fix it.
    """
    root = cache_root() / f"bfcl-eval-{BFCL_VERSION}"
    data = root / "bfcl_eval" / "data"
    if (root / _MARKER).is_file():
        _verify(root)
        return data
    if root.exists():  # left by an interrupted older layout or by hand: not ours to trust
        raise _damaged(root, f"it is incomplete (no {_MARKER})")
    given = os.environ.get("STABLEPROMPT_BFCL_WHEEL")
    if given:
        wheel = Path(given)
        if not wheel.is_file():
            raise _unavailable(f"STABLEPROMPT_BFCL_WHEEL={given} is not a file")
        _extract(wheel, root)
        return data
    if not download:
        raise _unavailable(
            f"not in the cache at {root} and download=False (the cache is "
            "$STABLEPROMPT_CACHE_DIR, else $XDG_CACHE_HOME/stableprompt, else "
            "~/.cache/stableprompt)"
        )
    with tempfile.TemporaryDirectory(prefix="stableprompt-bfcl-") as tmp:
        _extract(_download_wheel(Path(tmp)), root)
    return data


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Parse a BFCL JSON-lines file (one JSON object per non-empty line)."""
    root = path
    while root.parent != root and not (root / _MARKER).exists():
        root = root.parent
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _damaged(root, f"cannot read {path} ({exc.strerror or exc})") from exc
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(loads(line))
            except ValueError as exc:
                raise _damaged(root, f"{path}:{number} is not valid JSON ({exc})") from exc
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
