"""Tests against the real engine: llama.cpp's llama-server, built once from the llama.cpp sdist
into the user cache, serving the tiny model (``real_engine``). Prompts are tiny, so each test
takes well under a second once the server is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from stableprompt import parse_usage
from stableprompt._engine._server import LlamaServer, _cmdline
from stableprompt.testing import llama_server

pytestmark = pytest.mark.real_engine

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CHAT: dict[str, Any] = {
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Weather in Paris?"}],
    "tools": [WEATHER], "max_tokens": 4, "temperature": 0,
}


def _post(server: LlamaServer, path: str, body: dict[str, Any]) -> Any:
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        response = client.post(f"{server.base_url}{path}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _gone(pid: int) -> bool:
    """No such process any more (a zombie awaiting its reaper counts as gone)."""
    return _cmdline(pid) is None


def test_chat_with_tools_reports_cached_tokens_and_timings(llama_engine: LlamaServer) -> None:
    """A tool request is answered with usage.prompt_tokens_details.cached_tokens and timings
    (cache_n, prompt_n, prompt_ms); stableprompt's own parser reads the same numbers."""
    body = _post(llama_engine, "/v1/chat/completions", CHAT)
    usage, timings = body["usage"], body["timings"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert isinstance(cached, int) and 0 <= cached < usage["prompt_tokens"]
    assert timings["cache_n"] == cached
    assert timings["cache_n"] + timings["prompt_n"] == usage["prompt_tokens"]
    assert timings["prompt_ms"] >= 0
    parsed = parse_usage("openai-chat", usage)
    assert (parsed.input_tokens_total, parsed.cache_read_tokens) == (usage["prompt_tokens"],
                                                                     cached)


def test_an_exact_repeat_reads_all_but_the_last_token(llama_engine: LlamaServer) -> None:
    """The second of two identical requests reports cached = prompt_tokens - 1."""
    body = {**CHAT, "messages": [*CHAT["messages"],
                                 {"role": "user", "content": "And in Rome, tomorrow?"}]}
    _post(llama_engine, "/v1/chat/completions", body)
    usage = _post(llama_engine, "/v1/chat/completions", body)["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - 1


def test_apply_template_and_tokenize_count_the_reported_prompt(
        llama_engine: LlamaServer) -> None:
    """/apply-template then /tokenize (add_special, parse_special) give exactly the
    prompt_tokens the chat endpoint reports, tools included."""
    prompt = _post(llama_engine, "/apply-template", CHAT)["prompt"]
    assert "get_weather" in prompt and prompt.startswith("<|im_start|>system\nBe brief.")
    tokens = _post(llama_engine, "/tokenize", {"content": prompt, "add_special": True,
                                               "parse_special": True})["tokens"]
    usage = _post(llama_engine, "/v1/chat/completions", CHAT)["usage"]
    assert len(tokens) == usage["prompt_tokens"]


def test_the_context_manager_stops_the_server_even_when_the_body_fails() -> None:
    """llama_server() stops its process when the with-block raises (here with the Hermes-3
    template, which the server loads and renders tools with)."""
    pid = None
    with pytest.raises(RuntimeError, match="body failed"), \
            llama_server(template="hermes-3") as server:
        pid = server.pid
        assert server.template == "hermes-3" and server.model_path.name.startswith("hermes-3-")
        assert "get_weather" in _post(server, "/apply-template", CHAT)["prompt"]
        raise RuntimeError("body failed")
    assert pid is not None and _gone(pid)
    with llama_server() as again:
        pid = again.pid
    assert _gone(pid)


def _isolated_cache(tmp_path: Path, real: LlamaServer) -> Path:
    """A cache sharing the real one's binary, source and models (symlinks) but with its own
    server.json, so the CLI test never touches a server the user started."""
    version = real.model_path.parent.parent
    mine = tmp_path / "cache" / "llama" / version.name
    mine.mkdir(parents=True)
    for name in ("bin", "src", "models"):
        (mine / name).symlink_to(version / name)
    return tmp_path / "cache"


def _cli(cache: Path, *args: str, status: int = 0) -> Any:
    env = {**os.environ, "STABLEPROMPT_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-m", "stableprompt", "engine", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == status, done.stderr
    return json.loads(done.stdout)


def test_cli_serve_status_stop_round_trip_leaves_no_process(
        llama_engine: LlamaServer, tmp_path: Path) -> None:
    """``engine serve`` starts a detached server and records it, ``status`` sees it healthy,
    ``stop`` ends it and removes the record; afterwards the pid is gone and ``stop`` and
    ``status`` say there is none."""
    cache = _isolated_cache(tmp_path, llama_engine)
    record = _cli(cache, "serve", "--ctx-size", "2048")
    pid = record["pid"]
    try:
        assert record["base_url"] == f"http://127.0.0.1:{record['port']}"
        assert json.loads((cache / "llama" / "server.json").read_text()) == record
        status = _cli(cache, "status")
        assert status == {"running": True, "healthy": True, "server": record}
        stopped = _cli(cache, "stop")
        assert stopped == {"stopped": True, "server": record}
        assert _gone(pid)
        assert not (cache / "llama" / "server.json").exists()
        assert _cli(cache, "stop") == {"stopped": False, "server": None}
        assert _cli(cache, "status", status=3) == {"running": False, "server": None}
    finally:
        if not _gone(pid):
            os.kill(pid, 9)
