"""Tests for the tiny GGUF model (``_engine._model``): template names, the numpy/pyyaml extra,
and (with the llama.cpp source, fetched once) a deterministic file carrying the template."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from stableprompt import EngineError
from stableprompt._engine import _model


@pytest.fixture
def fake_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary cache and a fake source tree holding one known template."""
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "src"
    (src / "models" / "templates").mkdir(parents=True)
    (src / "models" / "templates" / _model.TEMPLATES["qwen2.5"]).write_text(
        "{% for m in messages %}{{ m.content }}{% endfor %}")
    monkeypatch.setattr(_model, "source_dir", lambda download=True: src)
    return src


def test_short_names_and_paths_resolve(fake_source: Path, tmp_path: Path) -> None:
    """Short names map to the vendored files; a .jinja path names the model by its stem."""
    name, path = _model.resolve_template("qwen2.5", fake_source)
    assert (name, path.name) == ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja")
    assert _model.TEMPLATES["mistral-nemo"] == "mistralai-Mistral-Nemo-Instruct-2407.jinja"
    assert _model.TEMPLATES["hermes-3"] == "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"
    mine = tmp_path / "My Template!.jinja"
    mine.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert _model.resolve_template(mine, fake_source) == ("My-Template", mine)
    assert _model.resolve_template(str(mine), fake_source) == ("My-Template", mine)


def test_unknown_templates_say_what_is_known(fake_source: Path, tmp_path: Path) -> None:
    """An unknown short name lists the known ones; a missing file is named."""
    with pytest.raises(EngineError, match=r"hermes-3, mistral-nemo, qwen2\.5") as info:
        _model.write_model("llama-9")
    assert info.value.code == "engine-template-unknown"
    with pytest.raises(EngineError, match="does not exist") as missing:
        _model.write_model(tmp_path / "none.jinja")
    assert missing.value.code == "engine-template-unknown"


@pytest.mark.parametrize(("text", "why"), [
    (b"root:x:0:0:root:/root:/bin/bash\n", "is not a chat template"),
    (b"{{ bos_token }}", "is not a chat template"),  # a tag, but never reads messages
    (b"\xff\xfe{% for m in messages %}", "is not UTF-8 text"),
])
def test_a_file_that_is_no_chat_template_is_refused(fake_source: Path, tmp_path: Path,
                                                    text: bytes, why: str) -> None:
    """Any text is a valid Jinja template that renders itself (every prompt the same, a cache
    that always hits): a file without Jinja tags or without ``messages`` is refused, named."""
    path = tmp_path / "passwd"
    path.write_bytes(text)
    with pytest.raises(EngineError, match=why) as info:
        _model.write_model(str(path))
    assert info.value.code == "engine-template-invalid"
    assert str(path) in str(info.value)
    assert not list((fake_source.parent / "cache").rglob("*.gguf"))


def test_missing_numpy_names_the_extra(fake_source: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without numpy (or pyyaml) the error is engine-numpy-missing and says
    ``pip install 'stableprompt[engine]'``; nothing is written."""
    real = importlib.util.find_spec
    monkeypatch.setattr("importlib.util.find_spec",
                        lambda name: None if name == "numpy" else real(name))
    with pytest.raises(EngineError) as info:
        _model.write_model()
    assert info.value.code == "engine-numpy-missing"
    assert "pip install 'stableprompt[engine]'" in str(info.value)
    assert "numpy" in str(info.value)
    assert not list((fake_source.parent / "cache").rglob("*.gguf"))


def test_numpy_is_never_imported_here() -> None:
    """Importing the engine modules and resolving a model path loads no numpy."""
    code = ("import sys; import stableprompt._engine._model, stableprompt._engine._server, "
            "stableprompt.testing; print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_the_model_is_deterministic_and_carries_the_template(
        llama_source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh write into an empty cache gives the same bytes (a few MB of GGUF), under the
    same digest name, as the user cache's copy, holding the template text and the SPM
    vocabulary, and leaves no temporary file."""
    cached = _model.write_model("qwen2.5")  # the user cache's (written once, then reused)
    monkeypatch.setenv("STABLEPROMPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_model, "source_dir", lambda download=True: llama_source)
    fresh = _model.write_model("qwen2.5")
    assert fresh != cached and fresh.name == cached.name and fresh.name.startswith("qwen2.5-")
    data = fresh.read_bytes()
    assert data == cached.read_bytes()
    assert data[:4] == b"GGUF" and 3_000_000 < len(data) < 8_000_000
    template = (llama_source / "models" / "templates" / _model.TEMPLATES["qwen2.5"]).read_bytes()
    assert template in data
    assert b"tokenizer.ggml.tokens" in data and b"tokenizer.chat_template" in data
    assert [p.name for p in fresh.parent.iterdir()] == [fresh.name]
