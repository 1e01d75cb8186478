"""A tiny random-weight llama model for the real engine, written once into the user cache.

:func:`write_model` writes a deterministic GGUF (llama architecture, 64-dim embeddings,
2 layers, 4 attention heads, 2 KV heads, 128-wide FFN, f16 matrices and f32 norms, tied output
embedding: about 4.2 MB) with llama.cpp's own vendored ``gguf-py``. The tokenizer is copied,
field for field (every ``tokenizer.ggml.*`` key), from the vocab-only
``models/ggml-vocab-llama-spm.gguf`` (Llama-2's 32,000-token SentencePiece vocabulary), and a
chat template is embedded as ``tokenizer.chat_template``. The text the model generates is
noise; its KV reuse, tokenizer, template and usage reporting are the real engine's
(ENGINES.md).

gguf-py needs numpy and pyyaml (``pip install 'stableprompt[engine]'``). The writer runs in a
subprocess (``sys.executable`` with ``PYTHONPATH=<src>/gguf-py``), so numpy is never imported
into the calling process. Writing takes about a second.

Models are cached as ``<cache>/llama/0.3.36/models/<name>-<digest>.gguf``, where ``name`` is
the template's short name (or the .jinja file's stem) and ``digest`` the first 12 hex digits of
the SHA-256 over the writer script, the model shape and the template text: a changed template
file gives a new model, an unchanged one is reused. Files are written to a temporary name and
renamed into place.

Sources: llama.cpp ``src/models/llama.cpp`` (the tensors the llama architecture loads; the
output matrix falls back to ``token_embd``), ``gguf-py/gguf/gguf_writer.py``,
``models/templates/`` (the chat templates).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from .._exceptions import EngineError
from ._build import source_dir, version_dir

__all__ = ["MAX_TEMPLATE_BYTES", "MODEL_SHAPE", "TEMPLATES", "check_template",
           "resolve_template", "write_model"]

#: Short template name -> file under ``<src>/models/templates/``.
TEMPLATES: dict[str, str] = {
    "qwen2.5": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "mistral-nemo": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "hermes-3": "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
}
#: The model's hyperparameters (``n_ctx`` is the trained context length the GGUF declares).
MODEL_SHAPE: dict[str, int] = {
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_head_kv": 2, "n_ff": 128, "n_ctx": 32768,
    "seed": 0,
}
#: The largest chat template file read: 1 MiB (llama.cpp 0.3.36's largest, gpt-oss's, is
#: 16.7 KB), so a wrong file is refused, not read whole.
MAX_TEMPLATE_BYTES = 1 << 20
_VOCAB = "models/ggml-vocab-llama-spm.gguf"
_WRITE_TIMEOUT_S = 300.0
_EXTRA_FIX = "Fix: pip install 'stableprompt[engine]' (numpy>=2, pyyaml>=6)."

# Run as ``python -c _WRITER CONFIG_JSON`` with gguf-py on PYTHONPATH (never imported here).
_WRITER = r'''
import json, sys
import numpy as np
import gguf

cfg = json.loads(sys.argv[1])
vocab = gguf.GGUFReader(cfg["vocab"])
with open(cfg["template"], encoding="utf-8") as handle:
    template = handle.read()
e, layers, heads, kv_heads, ff = (cfg[k] for k in ("n_embd", "n_layer", "n_head", "n_head_kv",
                                                   "n_ff"))
hd = e // heads
n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)
w = gguf.GGUFWriter(cfg["out"], "llama")
w.add_name(cfg["name"])
w.add_context_length(cfg["n_ctx"])
w.add_embedding_length(e)
w.add_block_count(layers)
w.add_feed_forward_length(ff)
w.add_head_count(heads)
w.add_head_count_kv(kv_heads)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_dimension_count(hd)
w.add_vocab_size(n_vocab)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
for key, field in vocab.fields.items():
    if key.startswith("tokenizer.ggml."):
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), kind, sub_type=sub)
w.add_chat_template(template)
rng = np.random.default_rng(cfg["seed"])

def mat(rows, cols):
    return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

def ones(n):
    return np.ones(n, dtype=np.float32)

w.add_tensor("token_embd.weight", mat(n_vocab, e))
w.add_tensor("output_norm.weight", ones(e))
for i in range(layers):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", ones(e))
    w.add_tensor(p + "attn_q.weight", mat(heads * hd, e))
    w.add_tensor(p + "attn_k.weight", mat(kv_heads * hd, e))
    w.add_tensor(p + "attn_v.weight", mat(kv_heads * hd, e))
    w.add_tensor(p + "attn_output.weight", mat(e, heads * hd))
    w.add_tensor(p + "ffn_norm.weight", ones(e))
    w.add_tensor(p + "ffn_gate.weight", mat(ff, e))
    w.add_tensor(p + "ffn_up.weight", mat(ff, e))
    w.add_tensor(p + "ffn_down.weight", mat(e, ff))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
'''


def resolve_template(template: str | os.PathLike[str], src: Path) -> tuple[str, Path]:
    """``(name, path)`` of a chat template: a short name of :data:`TEMPLATES` or a path.

    Raises:
        EngineError: Neither a known short name nor an existing file (code
            ``engine-template-unknown``).
    """
    if isinstance(template, str) and template in TEMPLATES:
        return template, src / "models" / "templates" / TEMPLATES[template]
    return check_template(template)


def check_template(template: str | os.PathLike[str]) -> tuple[str, Path]:
    """``(name, path)`` of a template given as a file, checked before anything is built or
    fetched: it exists and is a chat template (:func:`_check_template_text`). A short name of
    :data:`TEMPLATES` is returned as ``(name, Path(name))`` unchecked (its file comes with
    the llama.cpp source).

    Raises:
        EngineError: ``engine-template-unknown`` (no such short name or file),
            ``engine-template-invalid`` (the file is no chat template, not a regular file, or
            over :data:`MAX_TEMPLATE_BYTES`).
    """
    if isinstance(template, str) and template in TEMPLATES:
        return template, Path(template)
    path = Path(template)
    if isinstance(template, os.PathLike) or path.suffix == ".jinja" or os.sep in str(template):
        _check_template_text(path, _read_template(path))
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-.") or "template"
        return name, path
    raise EngineError(f"unknown chat template {template!r}: use one of "
                      f"{', '.join(sorted(TEMPLATES))} or a path to a .jinja file",
                      code="engine-template-unknown")


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def _check_regular(path: Path, info: os.stat_result) -> None:
    """Refuse a template path that is no regular file, or one over MAX_TEMPLATE_BYTES."""
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "special")
        raise EngineError(f"chat template {str(path)!r} is not a regular file ({kind}). Fix: "
                          "give a .jinja file", code="engine-template-invalid")
    if info.st_size > MAX_TEMPLATE_BYTES:
        raise EngineError(f"chat template {str(path)!r} is {info.st_size:,} bytes; a chat "
                          f"template is at most {MAX_TEMPLATE_BYTES:,}",
                          code="engine-template-invalid")


def _read_template(path: Path) -> bytes:
    """The bytes of the chat template file ``path``: a regular file of at most
    :data:`MAX_TEMPLATE_BYTES`, checked with ``os.stat`` before it is opened (opening a FIFO
    blocks until a writer comes, ``/dev/zero`` never ends), opened non-blocking (a file
    replaced by a FIFO after the check does not block either) and checked again once open.

    Raises:
        EngineError: ``engine-template-unknown`` (no such file, or unreadable),
            ``engine-template-invalid`` (not a regular file, or too large).
    """
    try:
        _check_regular(path, os.stat(path))
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)
                  ) as handle:
            _check_regular(path, os.fstat(handle.fileno()))
            text = handle.read(MAX_TEMPLATE_BYTES + 1)
    except FileNotFoundError as exc:
        raise EngineError(f"chat template file {str(path)!r} does not exist",
                          code="engine-template-unknown") from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise EngineError(f"cannot read chat template {str(path)!r}: {exc}",
                          code="engine-template-unknown") from exc
    if len(text) > MAX_TEMPLATE_BYTES:  # it grew since the check
        raise EngineError(f"chat template {str(path)!r} is over {MAX_TEMPLATE_BYTES:,} bytes",
                          code="engine-template-invalid")
    return text


def _check_template_text(path: Path, text: bytes) -> None:
    """Refuse a file that cannot be a chat template: not UTF-8, no Jinja tag, or never reading
    ``messages`` (every chat template renders the conversation from it). Any plain text is a
    valid Jinja template that renders itself, so without this check a wrong file (say
    ``/etc/passwd``) would give every request the same prompt and a cache that always hits."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EngineError(f"chat template {str(path)!r} is not UTF-8 text (byte {exc.start})",
                          code="engine-template-invalid") from exc
    if ("{%" not in decoded and "{{" not in decoded) or "messages" not in decoded:
        raise EngineError(f"{str(path)!r} is not a chat template: a Jinja chat template has "
                          "'{%' or '{{' tags and renders the 'messages' list. Fix: give a "
                          "model's .jinja chat template (e.g. llama.cpp's models/templates/) "
                          f"or one of {', '.join(sorted(TEMPLATES))}",
                          code="engine-template-invalid")


def _check_extra() -> None:
    missing = [name for name in ("numpy", "yaml") if importlib.util.find_spec(name) is None]
    if missing:
        shown = ", ".join("pyyaml" if name == "yaml" else name for name in missing)
        raise EngineError(f"writing the tiny llama model needs {shown}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not installed in "
                          f"{sys.executable}. {_EXTRA_FIX}", code="engine-numpy-missing")


def write_model(template: str | os.PathLike[str] = "qwen2.5", *, download: bool = True) -> Path:
    """Return the tiny model with ``template`` as its chat template, writing it once.

    Args:
        template: ``"qwen2.5"`` (Qwen2.5-7B-Instruct's, tool-capable; the default),
            ``"mistral-nemo"``, ``"hermes-3"`` (see :data:`TEMPLATES`), or a path to a
            ``.jinja`` file.
        download: See :func:`._build.source_dir` (the vocab and templates come from the
            llama.cpp source).

    Returns:
        ``<cache>/llama/0.3.36/models/<name>-<digest>.gguf`` (see the module docstring),
        about 4.2 MB; the same inputs give the same path and the same bytes.

    Raises:
        EngineError: Unknown template (code ``engine-template-unknown``); a file that is
            not a chat template (``engine-template-invalid``); numpy or pyyaml
            missing (``engine-numpy-missing``, saying ``pip install 'stableprompt[engine]'``);
            the writer failed (``engine-model-failed``, with its last output lines); see
            :func:`._build.source_dir` for fetching the source.
    """
    src = source_dir(download=download)
    name, template_path = resolve_template(template, src)
    template_text = _read_template(template_path)
    _check_template_text(template_path, template_text)
    digest = hashlib.sha256()
    for part in (_WRITER.encode(), json.dumps(MODEL_SHAPE, sort_keys=True).encode(),
                 template_text):
        digest.update(hashlib.sha256(part).digest())
    models = version_dir() / "models"
    target = models / f"{name}-{digest.hexdigest()[:12]}.gguf"
    if target.is_file():
        return target
    _check_extra()
    try:
        models.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{name}-", suffix=".gguf", dir=models)
        os.close(fd)
    except OSError as exc:
        raise EngineError(f"cannot write models into {models}: {exc}. Fix: set "
                          "STABLEPROMPT_CACHE_DIR to a writable directory.",
                          code="engine-model-failed") from exc
    config = {**MODEL_SHAPE, "vocab": str(src / _VOCAB), "template": str(template_path),
              "out": temp, "name": f"stableprompt-tiny-{name}"}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(src / "gguf-py"), *filter(None, [env.get("PYTHONPATH")])])
    try:
        try:
            done = subprocess.run([sys.executable, "-c", _WRITER, json.dumps(config)], env=env,
                                  capture_output=True, text=True, timeout=_WRITE_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"the GGUF writer could not run: {exc}",
                              code="engine-model-failed") from exc
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            if "No module named 'numpy'" in tail or "No module named 'yaml'" in tail:
                raise EngineError(f"the GGUF writer lacks numpy/pyyaml. {_EXTRA_FIX}",
                                  code="engine-numpy-missing")
            raise EngineError(f"the GGUF writer failed (exit {done.returncode}):\n{tail}",
                              code="engine-model-failed")
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target
