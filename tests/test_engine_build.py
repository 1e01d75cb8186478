"""Tests for fetching and building llama-server (``_engine._build``) with fakes: a fake sdist
in a temporary cache and fake ``cmake``/``ninja``/compilers on ``PATH``, so the real code path
(tool checks, hash checks, extraction, lock, logged build, atomic install) runs in seconds."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

from stableprompt import ConfigurationError, EngineError
from stableprompt._engine import _build

PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp"

# A fake cmake: logs each call to $FAKE_CALLS; ``--build DIR`` writes DIR/bin/llama-server
# unless $FAKE_FAIL is set (then prints compiler-like errors and exits 1).
FAKE_CMAKE = """#!/bin/sh
echo "$*" >> "$FAKE_CALLS"
if [ "$1" = "--build" ]; then
  if [ -n "$FAKE_FAIL" ]; then
    echo "[1/9] Building CXX object src/llama.cpp.o"
    echo "src/llama.cpp:1:1: error: boom from the fake compiler"
    exit 1
  fi
  sleep "${FAKE_SLEEP:-0}"
  mkdir -p "$2/bin"
  printf '#!/bin/sh\\necho fake llama-server\\n' > "$2/bin/llama-server"
  chmod +x "$2/bin/llama-server"
  echo "[9/9] Linking CXX executable bin/llama-server"
else
  echo "-- Configuring done"
fi
"""


def _sdist(path: Path, extra: dict[str, bytes] | None = None) -> str:
    """Write a fake sdist holding a vendored llama.cpp tree; return its SHA-256."""
    files = {
        f"{PREFIX}/CMakeLists.txt": b"project(llama.cpp)\n",
        f"{PREFIX}/gguf-py/gguf/__init__.py": b"",
        "llama_cpp_python-0.3.36/llama_cpp/__init__.py": b"# not extracted\n",
        **(extra or {}),
    }
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty stableprompt cache, with STABLEPROMPT_LLAMA_SDIST unset."""
    root = tmp_path / "cache"
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(root))
    monkeypatch.delenv("STABLEPROMPT_LLAMA_SDIST", raising=False)
    return root


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake cmake, ninja, c++ and cc first on PATH; returns the calls log."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name, text in {"cmake": FAKE_CMAKE, "ninja": "#!/bin/sh\n", "c++": "#!/bin/sh\n",
                       "cc": "#!/bin/sh\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_CALLS", str(calls))
    monkeypatch.delenv("FAKE_FAIL", raising=False)
    return calls


@pytest.fixture
def sdist(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake sdist in the cache's download location, its hash pinned for the test."""
    path = cache / "llama" / _build.SDIST_NAME
    path.parent.mkdir(parents=True)
    monkeypatch.setattr(_build, "SDIST_SHA256", _sdist(path))
    return path


def test_missing_tools_name_the_debian_packages(cache: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cmake, ninja or a compiler, building fails before any download with
    engine-tool-missing, naming each missing tool and ``cmake ninja-build g++``."""
    monkeypatch.setattr("shutil.which", lambda name, path=None: None)
    with pytest.raises(EngineError) as info:
        _build.build_server()
    assert info.value.code == "engine-tool-missing"
    assert isinstance(info.value, ConfigurationError)
    text = str(info.value)
    for word in ("cmake", "ninja", "a C++ compiler (c++/g++/clang++)",
                 "apt-get install cmake ninja-build g++"):
        assert word in text
    assert not (cache / "llama" / _build.SDIST_NAME).exists()


def test_one_missing_compiler_is_named_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what is missing is named; any of c++/g++/clang++ counts as the C++ compiler."""
    present = {"cmake", "ninja", "clang++", "gcc"}
    monkeypatch.setattr("shutil.which",
                        lambda name, path=None: f"/usr/bin/{name}" if name in present else None)
    assert _build.check_build_tools()["a C++ compiler"] == "/usr/bin/clang++"
    present.discard("clang++")
    with pytest.raises(EngineError, match=r"a C\+\+ compiler \(c\+\+/g\+\+/clang\+\+\) not "
                       "found") as info:
        _build.check_build_tools()
    assert "cmake," not in str(info.value)


def test_build_extracts_only_the_vendored_tree_logs_and_installs(sdist: Path, tools: Path,
                                                                 cache: Path) -> None:
    """A build from an empty cache extracts vendor/llama.cpp only, runs configure then the
    llama-server target (with the pinned CMake options and -j N) into build.log, installs
    the binary executable, and a second call reuses it without running cmake."""
    binary = _build.build_server(jobs=3)
    version = cache / "llama" / "0.3.36"
    assert binary == version / "bin" / "llama-server"
    assert binary.stat().st_mode & 0o111
    assert (version / "src" / "CMakeLists.txt").is_file()
    assert not (version / "src" / "llama_cpp").exists()
    assert not list(version.glob(".src-*")) and not list(binary.parent.glob(".llama-*"))
    configure, build = tools.read_text().splitlines()
    for option in ("-G Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
                   "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                   "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF",
                   "-DLLAMA_USE_PREBUILT_UI=OFF"):
        assert option in configure
    assert configure.startswith(f"-S {version / 'src'} -B {version / 'build'}")
    assert build == f"--build {version / 'build'} --target llama-server -j 3"
    log = (version / "build.log").read_text()
    assert "-- Configuring done" in log and "Linking CXX executable" in log
    assert _build.build_server() == binary
    assert len(tools.read_text().splitlines()) == 2


def test_build_failure_reports_the_log_tail_and_path(sdist: Path, tools: Path, cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing build raises engine-build-failed with the log's last lines and its path, and
    installs nothing."""
    monkeypatch.setenv("FAKE_FAIL", "1")
    with pytest.raises(EngineError) as info:
        _build.build_server()
    assert info.value.code == "engine-build-failed"
    text = str(info.value)
    assert "the llama-server build failed (exit 1)" in text
    assert "error: boom from the fake compiler" in text
    assert str(cache / "llama" / "0.3.36" / "build.log") in text
    assert not _build.server_binary().exists()


def test_two_concurrent_builds_run_cmake_once(sdist: Path, tools: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The file lock makes a second builder wait and reuse the first one's binary."""
    monkeypatch.setenv("FAKE_SLEEP", "0.5")
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(_build.build_server()))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1]
    assert [line.split()[0] for line in tools.read_text().splitlines()] == ["-S", "--build"]


def test_a_cached_sdist_with_the_wrong_hash_is_refused(cache: Path, tools: Path) -> None:
    """A damaged sdist in the cache raises engine-hash-mismatch naming both hashes and the
    fix (delete it); nothing is extracted."""
    path = cache / "llama" / _build.SDIST_NAME
    path.parent.mkdir(parents=True)
    actual = _sdist(path)
    with pytest.raises(EngineError) as info:
        _build.source_dir()
    assert info.value.code == "engine-hash-mismatch"
    assert actual in str(info.value) and _build.SDIST_SHA256 in str(info.value)
    assert f"delete {path}" in str(info.value)
    assert not (cache / "llama" / "0.3.36" / "src").exists()


def test_a_given_sdist_is_hash_checked_and_a_missing_one_named(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STABLEPROMPT_LLAMA_SDIST is used instead of a download, hash-checked like one; a
    missing file is engine-download-failed naming the variable."""
    given = tmp_path / "mine.tar.gz"
    monkeypatch.setenv("STABLEPROMPT_LLAMA_SDIST", str(given))
    with pytest.raises(EngineError, match=r"STABLEPROMPT_LLAMA_SDIST=.* is not a file") as info:
        _build.source_dir()
    assert info.value.code == "engine-download-failed"
    digest = _sdist(given)
    with pytest.raises(EngineError) as mismatch:
        _build.source_dir()
    assert mismatch.value.code == "engine-hash-mismatch"
    monkeypatch.setattr(_build, "SDIST_SHA256", digest)
    assert (_build.source_dir() / "CMakeLists.txt").is_file()
    assert not (cache / "llama" / _build.SDIST_NAME).exists()


def test_a_failed_download_is_typed_with_pips_reason(cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """When ``pip download`` fails, the error is engine-download-failed with pip's ERROR line
    and the network error it retried on, and the fix; no partial file is left."""
    seen: list[list[str]] = []

    def fake_run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append(command)
        return subprocess.CompletedProcess(command, 1, "", (
            "WARNING: Retrying after connection broken by 'NewConnectionError(\"Failed to "
            "establish a new connection: [Errno -3] Temporary failure in name resolution\")'\n"
            "ERROR: Could not find a version that satisfies the requirement "
            "llama-cpp-python==0.3.36\n"))

    monkeypatch.setattr("subprocess.run", fake_run)
    with pytest.raises(EngineError) as info:
        _build.source_dir()
    assert info.value.code == "engine-download-failed"
    text = str(info.value)
    assert "Could not find a version" in text and "[Errno -3]" in text
    assert "STABLEPROMPT_LLAMA_SDIST" in text
    assert seen[0][1:5] == ["-m", "pip", "download", "--no-deps"]
    assert seen[0][5:7] == ["--no-binary", ":all:"]
    assert seen[0][-1] == "llama-cpp-python==0.3.36"
    assert [p.name for p in (cache / "llama").iterdir()] == ["0.3.36"]  # only the lock's dir


def test_download_false_never_runs_pip(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With download=False and nothing cached, source_dir raises at once."""
    monkeypatch.setattr("subprocess.run", lambda *a, **k: pytest.fail("ran pip"))
    with pytest.raises(EngineError, match="download=False") as info:
        _build.source_dir(download=False)
    assert info.value.code == "engine-download-failed"


def test_unsafe_members_are_refused(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member escaping the tree (``..``) fails extraction with engine-build-failed and
    writes nothing outside the cache."""
    path = cache / "llama" / _build.SDIST_NAME
    path.parent.mkdir(parents=True)
    digest = _sdist(path, {f"{PREFIX}/../../../../evil.txt": b"x"})
    monkeypatch.setattr(_build, "SDIST_SHA256", digest)
    with pytest.raises(EngineError, match="unsafe members") as info:
        _build.source_dir()
    assert info.value.code == "engine-build-failed"
    assert not (cache / "evil.txt").exists() and not (cache / "llama" / "0.3.36" / "src").exists()


def test_tools_in_the_interpreters_scripts_directory_are_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The PyPI ninja of the engine extra sits in the virtualenv's bin, not always on PATH."""
    import sysconfig

    scripts = sysconfig.get_path("scripts")

    def which(name: str, path: str | None = None) -> str | None:
        if name == "ninja":
            return f"{scripts}/ninja" if path == scripts else None
        return f"/usr/bin/{name}"

    monkeypatch.setattr("shutil.which", which)
    assert _build.check_build_tools()["ninja"] == f"{scripts}/ninja"
