"""Fetch the llama.cpp source from PyPI and build ``llama-server`` once into the user cache.

The source is the llama.cpp tree vendored in the PyPI sdist ``llama-cpp-python==0.3.36``
(llama.cpp ``0c1e570``, 77 MB), fetched with
``python -m pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36`` (the only
network use) and checked against its pinned SHA-256. Only ``vendor/llama.cpp/`` is extracted
(``tarfile``'s ``data`` filter), and only the ``llama-server`` target is built (CMake + Ninja,
Release, static, no tests, no examples, no web UI: both UI options off, or the build reaches
for npm or a model hub). Everything lives under the user cache
(:func:`stableprompt._cache.cache_root`)::

    <cache>/llama/
    ├── llama_cpp_python-0.3.36.tar.gz      the sdist (SHA-256 checked before extraction)
    ├── server.json                         the detached server of ``stableprompt engine serve``
    └── 0.3.36/
        ├── .lock                           fcntl lock: one fetch, extraction or build at a time
        ├── src/                            the sdist's vendor/llama.cpp (renamed in when whole)
        ├── build/                          the CMake tree (kept: a rebuild is incremental)
        ├── build.log                       configure + build output of the last build
        ├── bin/llama-server                the installed binary, reused while it exists
        └── models/<name>-<digest>.gguf     tiny models (:mod:`._model`)

Timings on a 2-core machine (ENGINES.md): about 5 minutes to build on a quiet machine, 12 with
other load; extraction about 10 s. ``GGML_NATIVE`` keeps llama.cpp's default (on), which ties
the binary to the CPU it was built on: delete ``bin/`` and ``build/`` to rebuild elsewhere.

Offline machines: download the sdist elsewhere and point ``STABLEPROMPT_LLAMA_SDIST`` at it.

Sources: https://pypi.org/project/llama-cpp-python/0.3.36/; the CMake options are llama.cpp's
``CMakeLists.txt`` (``LLAMA_BUILD_UI``, ``LLAMA_USE_PREBUILT_UI``, ``LLAMA_OPENSSL``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .._cache import cache_root, pip_reason, sha256_file
from .._exceptions import EngineError

__all__ = [
    "BUILD_COMMANDS",
    "LLAMA_CPP_PYTHON_VERSION",
    "SDIST_NAME",
    "SDIST_SHA256",
    "build_server",
    "check_build_tools",
    "engine_dir",
    "server_binary",
    "source_dir",
    "version_dir",
]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
#: SHA-256 of the PyPI sdist, as published (checked on download and for STABLEPROMPT_LLAMA_SDIST).
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_VENDOR_PREFIX = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp"
_CMAKE_OPTIONS = (
    "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
)
#: Human-readable form of what :func:`build_server` runs (SRC, BUILD and N filled in).
BUILD_COMMANDS = (
    f"cmake -S SRC -B BUILD {' '.join(_CMAKE_OPTIONS)}",
    "cmake --build BUILD --target llama-server -j N",
)
_DEBIAN_PACKAGES = "cmake ninja-build g++"
_TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cmake", ("cmake",)),
    ("ninja", ("ninja",)),
    ("a C++ compiler", ("c++", "g++", "clang++")),
    ("a C compiler", ("cc", "gcc", "clang")),
)
_DOWNLOAD_TIMEOUT_S = 600.0
_CONFIGURE_TIMEOUT_S = 600.0
_BUILD_TIMEOUT_S = 7200.0
_LOG_TAIL_LINES = 25
_REASON_CHARS = 300
_FETCH_FIX = (
    "Fix: make PyPI reachable (pip honours PIP_INDEX_URL and proxy variables), or download "
    f"{SDIST_NAME} elsewhere (pip download --no-deps --no-binary :all: "
    f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}) and set STABLEPROMPT_LLAMA_SDIST to its path."
)
_WRITE_FIX = "Fix: set STABLEPROMPT_CACHE_DIR to a writable directory."


def engine_dir() -> Path:
    """``<cache>/llama``: the sdist, ``server.json`` and one directory per version."""
    return cache_root() / "llama"


def version_dir() -> Path:
    """``<cache>/llama/0.3.36``: source, build tree, log, binary and models of this version."""
    return engine_dir() / LLAMA_CPP_PYTHON_VERSION


def server_binary() -> Path:
    """Where the built ``llama-server`` is installed (it may not exist yet)."""
    return version_dir() / "bin" / "llama-server"



def _error(code: str, message: str) -> EngineError:
    return EngineError(message, code=code)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Hold the version directory's exclusive fcntl lock (blocks while another process
    fetches, extracts or builds; released when the process dies, so never stale)."""
    directory = version_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = (directory / ".lock").open("a")
    except OSError as exc:
        raise _error("engine-build-failed",
                     f"cannot write the engine cache at {directory}: {exc}. {_WRITE_FIX}"
                     ) from exc
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _which(name: str) -> str | None:
    """``name`` on ``PATH``, else in the running interpreter's scripts directory."""
    return shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts"))


def check_build_tools() -> dict[str, str]:
    """Find the build tools on ``PATH`` (``shutil.which``), then in this interpreter's scripts
    directory (a virtualenv's ``bin``, where the PyPI ``ninja`` and ``cmake`` wheels of the
    ``engine`` extra put them, even when the virtualenv is not activated).

    Returns:
        ``{"cmake": path, "ninja": path, "a C++ compiler": path, "a C compiler": path}``; the
        compilers are the first found of ``c++``/``g++``/``clang++`` and ``cc``/``gcc``/
        ``clang``.

    Raises:
        EngineError: Any is missing (code ``engine-tool-missing``); the message names all
            missing ones and the Debian packages (``apt-get install cmake ninja-build g++``).
    """
    found: dict[str, str] = {}
    missing: list[str] = []
    for what, names in _TOOLS:
        path = next((p for p in map(_which, names) if p), None)
        if path is None:
            missing.append(what if len(names) == 1 else f"{what} ({'/'.join(names)})")
        else:
            found[what] = path
    if missing:
        raise _error("engine-tool-missing",
                     f"cannot build llama-server: {', '.join(missing)} not found on PATH. "
                     f"Fix: install the Debian packages {_DEBIAN_PACKAGES} (apt-get install "
                     f"{_DEBIAN_PACKAGES}) or your system's equivalents (ninja also comes "
                     "with pip install 'stableprompt[engine]').")
    return found



def _check_sdist(path: Path, *, cached: bool) -> None:
    actual = sha256_file(path)
    if actual == SDIST_SHA256:
        return
    fix = (f"Fix: delete {path} (it is fetched again on the next run)." if cached else
           f"Fix: point STABLEPROMPT_LLAMA_SDIST at the PyPI file {SDIST_NAME}.")
    raise _error("engine-hash-mismatch",
                 f"{path} has SHA-256 {actual}, expected {SDIST_SHA256} "
                 f"(llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}). {fix}")



def _download_sdist(target: Path) -> None:
    """``pip download`` the sdist into a temp dir beside ``target``, then rename it there."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".sdist-", dir=target.parent))
    except OSError as exc:
        raise _error("engine-download-failed",
                     f"cannot write the engine cache at {target.parent}: {exc}. {_WRITE_FIX}"
                     ) from exc
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "--no-input", "--quiet", "-d", str(staging),
        f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
    ]  # fmt: skip
    try:
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=_DOWNLOAD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            raise _error("engine-download-failed",
                         f"'pip download llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}' timed out "
                         f"after {_DOWNLOAD_TIMEOUT_S:.0f} s (PyPI unreachable?). {_FETCH_FIX}"
                         ) from exc
        except OSError as exc:
            raise _error("engine-download-failed",
                         f"cannot run {sys.executable} -m pip: {exc}. {_FETCH_FIX}") from exc
        fetched = staging / SDIST_NAME
        if done.returncode != 0 or not fetched.is_file():
            raise _error("engine-download-failed",
                         f"'pip download llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}' failed "
                         f"(exit {done.returncode}): "
                         f"{pip_reason(done.stdout + done.stderr, _REASON_CHARS)}. "
                         f"{_FETCH_FIX}")
        _check_sdist(fetched, cached=False)
        os.replace(fetched, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _sdist() -> tuple[Path, bool]:
    """The verified sdist and whether it sits in the cache (else ``STABLEPROMPT_LLAMA_SDIST``)."""
    given = os.environ.get("STABLEPROMPT_LLAMA_SDIST")
    if given:
        path = Path(given)
        if not path.is_file():
            raise _error("engine-download-failed",
                         f"STABLEPROMPT_LLAMA_SDIST={given} is not a file. {_FETCH_FIX}")
        _check_sdist(path, cached=False)
        return path, False
    path = engine_dir() / SDIST_NAME
    if path.is_file():
        _check_sdist(path, cached=True)
    else:
        _download_sdist(path)
    return path, True


def _extract(sdist: Path, target: Path) -> None:
    """Extract ``vendor/llama.cpp/**`` of ``sdist`` beside ``target``, then rename it in."""
    prefix = _VENDOR_PREFIX + "/"
    try:
        staging = Path(tempfile.mkdtemp(prefix=".src-", dir=target.parent))
    except OSError as exc:
        raise _error("engine-build-failed",
                     f"cannot write the engine cache at {target.parent}: {exc}. {_WRITE_FIX}"
                     ) from exc
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
            if not members:
                raise _error("engine-build-failed", f"{sdist} holds no {_VENDOR_PREFIX}/")
            unsafe = [m.name for m in members if not (m.isfile() or m.isdir())
                      or ".." in Path(m.name).parts or Path(m.name).is_absolute()]
            if unsafe:  # the data filter refuses these too; checked here on older Pythons
                raise _error("engine-build-failed",
                             f"{sdist} holds unsafe members such as {unsafe[0]!r}")
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
                archive.extractall(staging, members=members, filter="data")
            else:  # pragma: no cover - old patch releases
                archive.extractall(staging, members=members)
        os.rename(staging / _VENDOR_PREFIX, target)
    except (tarfile.TarError, EOFError) as exc:
        raise _error("engine-build-failed",
                     f"cannot extract {sdist}: {exc}. Fix: delete it (it is fetched again)."
                     ) from exc
    except OSError as exc:
        raise _error("engine-build-failed",
                     f"cannot extract {sdist} into {target}: {exc}. {_WRITE_FIX}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _ensure_source() -> Path:
    """The extracted llama.cpp tree, fetching and extracting it first (caller holds the lock)."""
    target = version_dir() / "src"
    if not target.is_dir():
        sdist, _ = _sdist()
        _extract(sdist, target)
    return target


def source_dir(*, download: bool = True) -> Path:
    """Return the llama.cpp source tree (``<cache>/llama/0.3.36/src``), fetching it once.

    Args:
        download: When neither the tree, the cached sdist nor ``STABLEPROMPT_LLAMA_SDIST`` is
            there, run ``pip download`` (timeout 600 s). With ``False`` that raises instead.

    Returns:
        The directory holding llama.cpp's ``CMakeLists.txt``, ``gguf-py/``, ``models/``
        (vocab-only GGUFs, ``templates/*.jinja``) and ``common/arg.cpp``.

    Raises:
        EngineError: Download failed (code ``engine-download-failed``), the sdist's SHA-256
            differs (``engine-hash-mismatch``), extraction failed (``engine-build-failed``).
    """
    target = version_dir() / "src"
    if target.is_dir():
        return target
    if not download and not os.environ.get("STABLEPROMPT_LLAMA_SDIST") and not (
            engine_dir() / SDIST_NAME).is_file():
        raise _error("engine-download-failed",
                     f"the llama.cpp source is not in the cache at {target} and download=False. "
                     f"{_FETCH_FIX}")
    with _locked():
        return _ensure_source()


def _tail(log: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _run_logged(command: Sequence[str], log: Path, timeout_s: float) -> int:
    """Run ``command`` with its output appended to ``log``, in its own process group (killed
    whole on timeout or Ctrl-C); return the exit status (-1 on timeout)."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out.write(f"stableprompt: timed out after {timeout_s:.0f} s\n")
            return -1
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _install(built: Path, target: Path) -> None:
    """Copy ``built`` to ``target`` atomically (temp file in the same directory, then rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".llama-server-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, built.open("rb") as src:
            shutil.copyfileobj(src, out)
        os.chmod(name, 0o755)
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def build_server(*, jobs: int | None = None, download: bool = True) -> Path:
    """Return the ``llama-server`` binary, building it once into the user cache.

    An installed binary (``<cache>/llama/0.3.36/bin/llama-server``) is reused as is; it is
    built only when missing. Otherwise: the tools are checked, the source is fetched and
    extracted (:func:`source_dir`), then, under an exclusive file lock (a second process waits
    and then reuses the first one's binary), :data:`BUILD_COMMANDS` run with their output in
    ``<cache>/llama/0.3.36/build.log``, and the binary is installed atomically.

    Args:
        jobs: Parallel compile jobs; default ``os.cpu_count()``.
        download: See :func:`source_dir`.

    Returns:
        The absolute path of the installed binary.

    Raises:
        EngineError: A tool is missing (code ``engine-tool-missing``, naming the Debian
            packages ``cmake ninja-build g++``); see :func:`source_dir` for fetch errors;
            configure or build failed or timed out (``engine-build-failed``; the message holds
            the log's last 25 lines and its path).
    """
    binary = server_binary()
    if binary.is_file():
        return binary
    tools = check_build_tools()
    if not download:
        source_dir(download=False)  # raises when nothing is there to build from
    with _locked():
        if binary.is_file():  # another process built it while this one waited
            return binary
        src = _ensure_source()
        build = version_dir() / "build"
        log = version_dir() / "build.log"
        n = jobs if jobs is not None else (os.cpu_count() or 1)
        steps = (
            ([tools["cmake"], "-S", str(src), "-B", str(build), *_CMAKE_OPTIONS,
              f"-DCMAKE_MAKE_PROGRAM={tools['ninja']}"],
             _CONFIGURE_TIMEOUT_S, "CMake configure"),
            ([tools["cmake"], "--build", str(build), "--target", "llama-server", "-j", str(n)],
             _BUILD_TIMEOUT_S, "the llama-server build"),
        )
        try:
            log.write_text(f"stableprompt: building llama-server from {src} "
                           f"({time.strftime('%Y-%m-%d %H:%M:%S')})\n", encoding="utf-8")
            for command, timeout_s, what in steps:
                status = _run_logged(command, log, timeout_s)
                if status != 0:
                    detail = "timed out" if status == -1 else f"exit {status}"
                    raise _error("engine-build-failed",
                                 f"{what} failed ({detail}); full log: {log}\n"
                                 f"--- last lines of the log ---\n{_tail(log)}")
            built = build / "bin" / "llama-server"
            if not built.is_file():
                raise _error("engine-build-failed",
                             f"the build finished but {built} does not exist; full log: {log}")
            _install(built, binary)
        except OSError as exc:
            raise _error("engine-build-failed",
                         f"cannot build in {version_dir()}: {exc}. {_WRITE_FIX}") from exc
    return binary
