"""Tests for the BFCL v4 loader and for canonical rendering of every real BFCL tool schema.

The data comes from PyPI (``pip download bfcl-eval==2026.3.23``), once per test session, into a
session temp dir (or the cache named by ``STABLEPROMPT_CACHE_DIR`` / ``STABLEPROMPT_BFCL_WHEEL``
when set). Without PyPI the data tests skip with the loader's reason.
"""

from __future__ import annotations

import collections
import hashlib
import os
import random
import shutil
import socket
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from stableprompt import ToolSet, WorkloadUnavailableError
from stableprompt.demo._bfcl import (
    BfclSession,
    bfcl_data_dir,
    load_live_multiple,
    load_multi_turn_base,
)

# Measured on bfcl-eval==2026.3.23 (pinned: a change means the data or the repair rules changed).
LIVE_MULTIPLE_ENTRIES = 1053
LIVE_MULTIPLE_TOOLS = 4178
REPAIRED_TOOLS = 4178  # every BFCL schema has a top-level "type": "dict"
REPAIRS_PER_RULE = {
    "type-dict": 4241,
    "name-dot": 446,
    "type-float": 341,
    "type-any": 7,
    "type-tuple": 3,
}
TOOLS_PER_RULE = {"type-dict": 4178, "name-dot": 446, "type-float": 277, "type-any": 7,
                  "type-tuple": 3}  # fmt: skip
# sha256 over the concatenated ToolSet.canonical_bytes of all 1,053 entries, in file order.
# Moved by sp2 (issue 26 item 7): ``properties`` keep BFCL's authored order instead of sorted.
LIVE_MULTIPLE_DIGEST = "aa031d98fa2c096d37ce228d11149a3ca2cecf5c84cd02d7eb7f21c98d0edc12"


@dataclass(frozen=True)
class _Data:
    cache_env: dict[str, str]
    live_multiple: list[dict[str, Any]]
    sessions: list[BfclSession]


def _env_for(tmp: Path) -> dict[str, str]:
    keep = {k: os.environ[k] for k in ("STABLEPROMPT_CACHE_DIR", "STABLEPROMPT_BFCL_WHEEL")
            if os.environ.get(k)}  # fmt: skip
    return keep or {"STABLEPROMPT_CACHE_DIR": str(tmp)}


@pytest.fixture(scope="session")
def bfcl(tmp_path_factory: pytest.TempPathFactory) -> _Data:
    """Fetch BFCL v4 once per session (PyPI via pip) and load both workloads."""
    env = _env_for(tmp_path_factory.mktemp("bfcl-cache"))
    with pytest.MonkeyPatch.context() as mp:  # environment restored before other tests run
        for key, value in env.items():
            mp.setenv(key, value)
        try:
            bfcl_data_dir()
        except WorkloadUnavailableError as exc:
            pytest.skip(f"BFCL v4 data unavailable (PyPI unreachable?): {exc}")
        return _Data(env, load_live_multiple(download=False), load_multi_turn_base(download=False))


def _reorder(node: Any, rnd: random.Random, *, keep: bool = False) -> Any:
    """Shuffle every dict's key order (but a ``properties`` map's: its order is what a model
    writes, kept by the canonical form since sp2) and permute ``required`` lists; keep other
    lists."""
    if isinstance(node, list):
        return [_reorder(v, rnd) for v in node]
    if not isinstance(node, dict):
        return node
    items = [
        (k, rnd.sample(v, len(v)) if k == "required" and isinstance(v, list)
         else _reorder(v, rnd, keep=k == "properties"))
        for k, v in node.items()
    ]
    if not keep:
        rnd.shuffle(items)
    return dict(items)


def test_live_multiple_renders_identically_in_any_order(bfcl: _Data) -> None:
    """Every live_multiple tool set gives identical bytes when tools and keys are shuffled."""
    rnd = random.Random(20260323)
    entries = bfcl.live_multiple
    assert len(entries) == LIVE_MULTIPLE_ENTRIES
    digest = hashlib.sha256()
    tools = 0
    repaired = 0
    per_rule: collections.Counter[str] = collections.Counter()
    tools_per_rule: collections.Counter[str] = collections.Counter()
    for entry in entries:
        functions = entry["function"]
        original = ToolSet.from_dicts(functions, repair=True)
        shuffled = [_reorder(f, rnd) for f in rnd.sample(functions, len(functions))]
        again = ToolSet.from_dicts(shuffled, repair=True)
        assert again.canonical_bytes == original.canonical_bytes, entry["id"]
        digest.update(original.canonical_bytes)
        tools += len(original)
        for tool in original:
            repaired += bool(tool.repairs)
            per_rule.update(r.rule for r in tool.repairs)
            tools_per_rule.update({r.rule for r in tool.repairs})
            assert "." not in tool.to_openai_chat()["function"]["name"]
    print(
        f"\nBFCL live_multiple: {tools} tools, {repaired} needed repair; "
        f"repairs per rule {dict(per_rule)}; tools per rule {dict(tools_per_rule)}"
    )
    assert tools == LIVE_MULTIPLE_TOOLS
    assert 0 < repaired == REPAIRED_TOOLS
    assert dict(per_rule) == REPAIRS_PER_RULE
    assert dict(tools_per_rule) == TOOLS_PER_RULE
    assert digest.hexdigest() == LIVE_MULTIPLE_DIGEST


def test_repaired_bfcl_schemas_pass_full_jsonschema_check(bfcl: _Data) -> None:
    """A sample of repaired schemas also passes jsonschema's own 2020-12 meta-schema check."""
    rnd = random.Random(7)
    functions = [f for e in bfcl.live_multiple for f in e["function"]]
    for function in rnd.sample(functions, 150):
        schema = ToolSet.from_dicts([function], repair=True).to_dicts()[0]["input_schema"]
        Draft202012Validator.check_schema(schema)


def test_multi_turn_base_sessions(bfcl: _Data) -> None:
    """multi_turn_base loads 200 sessions joined with ground truth and their classes' tool docs."""
    sessions = bfcl.sessions
    assert len(sessions) == 200
    assert sum(len(s.turns) for s in sessions) == 734
    assert sum(len(calls) for s in sessions for calls in s.ground_truth) == 1142
    assert sum(len(s.tool_docs) for s in sessions) == 5550
    first = sessions[0]
    assert first.id == "multi_turn_base_0"
    assert first.involved_classes == ("TwitterAPI", "GorillaFileSystem")
    assert first.turns[0][0]["role"] == "user"
    assert first.turns[0][0]["content"].startswith("Move 'final_report.pdf' within document")
    assert first.ground_truth[0] == (
        "cd(folder='document')",
        "mkdir(dir_name='temp')",
        "mv(source='final_report.pdf', destination='temp')",
    )
    assert first.excluded_functions == ("cp",)
    assert "GorillaFileSystem" in first.initial_config
    tools = first.tool_set()
    assert len(tools) == len(first.tool_docs) == 32
    assert {"cd", "mkdir", "mv", "post_tweet"} <= set(tools.names)
    assert {r.rule for r in tools.repairs} == {"type-dict", "response-dropped"}
    for session in sessions:
        assert len(session.turns) == len(session.ground_truth)
        assert len(session.tool_set()) == len(session.tool_docs)


def test_cached_data_needs_no_download(bfcl: _Data, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once extracted, bfcl_data_dir(download=False) returns the cached directory."""
    for key, value in bfcl.cache_env.items():
        monkeypatch.setenv(key, value)
    data = bfcl_data_dir(download=False)
    assert data.name == "data" and data.parent.name == "bfcl_eval"
    assert (data / "BFCL_v4_live_multiple.json").is_file()
    assert (data.parent.parent / ".complete").is_file()
    assert not any(p.suffix == ".py" for p in data.parent.parent.rglob("*"))  # data only


def test_empty_cache_without_download_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty cache with download=False raises WorkloadUnavailableError explaining the fix."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STABLEPROMPT_BFCL_WHEEL", raising=False)
    with pytest.raises(WorkloadUnavailableError) as info:
        bfcl_data_dir(download=False)
    assert info.value.code == "workload-unavailable"
    assert "STABLEPROMPT_BFCL_WHEEL" in str(info.value)
    assert "STABLEPROMPT_CACHE_DIR" in str(info.value)


def test_bad_local_wheel_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing or tampered STABLEPROMPT_BFCL_WHEEL raises and leaves no partial cache."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(tmp_path / "missing.whl"))
    with pytest.raises(WorkloadUnavailableError, match="is not a file"):
        bfcl_data_dir()
    fake = tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("bfcl_eval/data/BFCL_v4_live_multiple.json", "{}\n")
    monkeypatch.setenv("STABLEPROMPT_BFCL_WHEEL", str(fake))
    with pytest.raises(WorkloadUnavailableError, match="SHA-256") as info:
        bfcl_data_dir()
    assert info.value.code == "workload-unavailable"
    assert not (tmp_path / "cache" / "bfcl-eval-2026.3.23").exists()


# --------------------------------------------------------------------------- cache integrity


def test_extraction_writes_a_manifest_of_every_file(bfcl: _Data,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache holds MANIFEST.sha256 listing every extracted data file with its SHA-256."""
    for key, value in bfcl.cache_env.items():
        monkeypatch.setenv(key, value)
    root = bfcl_data_dir(download=False).parent.parent
    listed = {}
    for line in (root / "MANIFEST.sha256").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    on_disk = {p.relative_to(root).as_posix() for p in (root / "bfcl_eval").rglob("*")
               if p.is_file()}
    assert set(listed) == on_disk and len(on_disk) == 71
    for name, digest in listed.items():
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name


def test_garbage_in_the_real_cache_names_the_cache_fix(
        bfcl: _Data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached BFCL file overwritten with garbage is caught on load: the error names the
    cache directory and STABLEPROMPT_CACHE_DIR, not PyPI."""
    for key, value in bfcl.cache_env.items():
        monkeypatch.setenv(key, value)
    source = bfcl_data_dir(download=False).parent.parent
    copy = tmp_path / "cache" / source.name
    shutil.copytree(source, copy)
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STABLEPROMPT_BFCL_WHEEL", raising=False)
    assert len(load_multi_turn_base(download=False)) == 200  # verified once...
    (copy / "bfcl_eval/data/BFCL_v4_multi_turn_base.json").write_bytes(b"\x00garbage{")
    with pytest.raises(WorkloadUnavailableError) as info:  # ...and checked again
        load_multi_turn_base(download=False)
    message = str(info.value)
    assert info.value.code == "workload-cache-damaged"
    assert f"delete {copy}" in message and "STABLEPROMPT_CACHE_DIR" in message
    assert "BFCL_v4_multi_turn_base.json does not match its SHA-256" in message
    assert "PyPI" not in message and "\n" not in message


def _handmade_cache(root: Path) -> Path:
    """A cache laid out as extraction leaves it: two data files, manifest, marker."""
    data = root / "bfcl_eval" / "data"
    (data / "sub").mkdir(parents=True)
    files = {"bfcl_eval/data/a.json": b'{"id": "a"}\n', "bfcl_eval/data/sub/b.json": b"{}\n"}
    lines = []
    for name, content in files.items():
        (root / name).write_bytes(content)
        lines.append(f"{hashlib.sha256(content).hexdigest()}  {name}\n")
    (root / "MANIFEST.sha256").write_text("".join(lines))
    (root / ".complete").write_text("bfcl-eval==2026.3.23\n")
    return data


@pytest.mark.parametrize(("damage", "words"), [
    ("garbage", "bfcl_eval/data/a.json does not match its SHA-256"),
    ("same-size", "bfcl_eval/data/a.json does not match its SHA-256"),
    ("missing-file", "a listed file is missing"),
    ("no-manifest", "no MANIFEST.sha256"),
    ("bad-manifest", "MANIFEST.sha256 line 1 is not"),
    ("escaping-manifest", "MANIFEST.sha256 line 1 is not"),
    ("incomplete", "it is incomplete (no .complete)"),
])  # fmt: skip
def test_damaged_cache_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     damage: str, words: str) -> None:
    """Every kind of cache damage (changed or missing file, missing or malformed manifest, no
    completion marker) raises WorkloadUnavailableError telling the user to delete the named
    cache directory or set STABLEPROMPT_CACHE_DIR; an intact cache loads."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STABLEPROMPT_BFCL_WHEEL", raising=False)
    root = tmp_path / "bfcl-eval-2026.3.23"
    data = _handmade_cache(root)
    assert bfcl_data_dir(download=False) == data
    if damage == "garbage":
        (data / "a.json").write_bytes(b"garbage")
    elif damage == "same-size":
        (data / "a.json").write_bytes(b'{"id": "b"}\n')
    elif damage == "missing-file":
        (data / "sub" / "b.json").unlink()
    elif damage == "no-manifest":
        (root / "MANIFEST.sha256").unlink()
    elif damage == "bad-manifest":
        (root / "MANIFEST.sha256").write_text("not a manifest\n")
    elif damage == "escaping-manifest":
        (root / "MANIFEST.sha256").write_text(f"{'0' * 64}  bfcl_eval/data/../../x\n")
    elif damage == "incomplete":
        (root / ".complete").unlink()
    with pytest.raises(WorkloadUnavailableError) as info:
        bfcl_data_dir(download=False)
    message = str(info.value)
    assert info.value.code == "workload-cache-damaged"
    assert words in message and f"delete {root}" in message
    assert "STABLEPROMPT_CACHE_DIR" in message and "PyPI" not in message


# --------------------------------------------------------------------------- download errors


def test_pip_reason_is_the_first_error_line_clipped() -> None:
    """pip's output is reduced to its first ERROR line (at most 200 characters) plus the
    network error it retried on."""
    from stableprompt._cache import pip_reason as _pip_reason

    retry = ("WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, "
             "status=None)) after connection broken by 'NewConnectionError('<pip._vendor."
             "urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new "
             "connection: [Errno -3] Temporary failure in name resolution')': /simple/x/\n")
    output = (retry * 5 + "ERROR: Could not find a version that satisfies the requirement "
              "bfcl-eval==2026.3.23 (from versions: none)\n"
              "ERROR: No matching distribution found for bfcl-eval==2026.3.23\n")
    assert _pip_reason(output) == (
        "Could not find a version that satisfies the requirement bfcl-eval==2026.3.23 (from "
        "versions: none) (network error: [Errno -3] Temporary failure in name resolution)")
    long = _pip_reason("ERROR: " + "x" * 500)
    assert len(long) == 200 and long.endswith("…")
    assert _pip_reason("") == "no output"


def test_unreachable_index_gives_one_short_line(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With the package index unreachable (a closed loopback port), the real `pip download`
    fails and the error is one short line: what failed, pip's reason and the fixes."""
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        for key in [k for k in os.environ if k.startswith("PIP_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
        monkeypatch.setenv("PIP_RETRIES", "1")
        monkeypatch.setenv("PIP_TIMEOUT", "5")
        monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.delenv("STABLEPROMPT_BFCL_WHEEL", raising=False)
        with pytest.raises(WorkloadUnavailableError) as info:
            bfcl_data_dir()
    message = str(info.value)
    assert message.startswith("BFCL v4 data unavailable: 'pip download bfcl-eval==2026.3.23' "
                              "failed (exit 1): ")
    assert "Connection refused" in message and "STABLEPROMPT_BFCL_WHEEL" in message
    assert "\n" not in message and "WARNING" not in message and len(message) < 700
    assert not (tmp_path / "cache" / "bfcl-eval-2026.3.23").exists()
