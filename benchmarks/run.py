"""The one benchmark command: ``python benchmarks/run.py`` (see ``benchmarks/README.md``).

1. Creates the peers' virtualenvs (the pins in ``tests/peer_envs.py``, plus pyperf) under the
   stableprompt cache, once per machine (``peer_envs.peer_python``; the proxy tests marked
   ``peers`` use the same pins); a peer that cannot be installed is reported in RESULTS.md
   with pip's error, never replaced by anything else.
2. Writes the workload file (``benchmarks/.work/workload.json``, 1,000+ turns).
3. Runs the pyperf suite (``suite.py``) in this interpreter and ``peers.py`` in each peer's
   virtualenv, same pyperf settings, JSON results in ``benchmarks/.work/``.
4. Runs ``memory.py`` (tracemalloc) and ``paired.py`` (ours and the rebuilds interleaved
   turn by turn: the render under cache pressure), then writes the tables of
   ``benchmarks/RESULTS.md`` between its ``<!-- generated -->`` markers, with machine,
   versions and date. Every figure is a ratio against a baseline measured in the same run.
5. Writes the lint capture (``benchmarks/.work/lint-capture.jsonl``, ~110 MB), runs the
   pyperf lint benchmark ``lint.py`` on it (lint and an orjson-parse-only pass, same run) and
   writes its table between the ``<!-- generated lint -->`` markers.

Options: ``--fast`` (fewer values: a smoke run), ``--skip-peers``, ``--no-write``,
``--lint-only`` (step 5 alone).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyperf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"
RESULTS = HERE / "RESULTS.md"
PYPERF = "pyperf==2.11.0"
TURNS = (10, 100, 1000)
MARK_START, MARK_END = "<!-- generated: start -->", "<!-- generated: end -->"
LINT_START, LINT_END = "<!-- generated lint: start -->", "<!-- generated lint: end -->"
#: Values per process of the ``record-thread/*`` cells, whose p99 the tables report: 6 x 50
#: single calls make the p99 about the 4th largest (of 3 x 10 it was about the maximum).
THREAD_VALUES, THREAD_VALUES_FAST = 50, 10
#: One lint value is a whole pass over ~110 MB (seconds): fewer of them than the per-turn suite.
LINT_SETTINGS = ["--loops", "1", "--warmups", "1", "--processes", "2", "--values", "3"]
LINT_FAST = ["--loops", "1", "--warmups", "0", "--processes", "1", "--values", "2"]

sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
import workload  # noqa: E402

from peer_envs import PEERS, PeerEnvError, peer_python  # noqa: E402


def _pyperf(python: Path, script: str, out: Path, fast: bool, *extra: str,
            settings: list[str] | None = None) -> None:
    out.unlink(missing_ok=True)
    if settings is None:
        # 10 warmups: the first calls after a conversation's first (full) render pay one-time
        # costs: page faults of the first ~1.3 MB bodies (calls 2-3: 0.6-0.8 ms at turn
        # 1,000), then CPython 3.11 quickens a function only after 8 calls, and the per-turn
        # functions run once per render: calls 4-10 still cost 1.2-2x the steady state
        # (session 9, per call in fresh processes: 150, 160, 109, 102, 121, 92, 84, then
        # ~75 us). An agent loop renders every turn, so the values are its steady state.
        # Baselines are measured the same way. 6 worker processes x 5 values (30 values, as
        # 3 x 10 before): per-process medians of one cell differed by up to 1.5x (memory
        # layout, hash seeds), and more processes sample that spread (pyperf's default: 20).
        settings = ["--loops", "1", "--warmups", "10", "--processes", "2" if fast else "6",
                    "--values", "4" if fast else "5"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([str(python), str(HERE / script), *settings, "--quiet", "-o", str(out),
                    "--inherit-environ", "PYTHONPATH,LITELLM_LOCAL_MODEL_COST_MAP", *extra],
                   check=True, env=env, cwd=ROOT)


def _values(path: Path) -> dict[str, list[float]]:
    suite = pyperf.BenchmarkSuite.load(str(path))
    return {b.get_name(): list(b.get_values()) for b in suite.get_benchmarks()}


def _ms(value: float) -> str:
    return f"{value * 1e3:.3f}"


def _p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank) of single-call values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _count(values: dict[str, list[float]], name: str) -> str:
    """How many values ``name`` has, as text (``n/a`` when it did not run)."""
    return str(len(values[name])) if name in values else "n/a"


def _growth(values: dict[str, list[float]], name: str) -> str:
    """Median at turn 1,000 over median at turn 10."""
    first, last = values.get(f"{name}/10"), values.get(f"{name}/1000")
    if not first or not last:
        return "n/a"
    return f"{statistics.median(last) / statistics.median(first):.1f}x"


def _tables(values: dict[str, list[float]], errors: dict[str, str], memory: dict[str, Any],
            paired: dict[str, Any], meta: dict[str, Any]) -> str:
    med = {name: statistics.median(v) for name, v in values.items()}
    lines = [f"Generated by `python benchmarks/run.py` on {meta['date']}: {meta['machine']}, "
             f"CPython {meta['python']}, {meta['versions']}. pyperf, each value one call "
             f"(`--loops 1`), {meta['samples']}; medians. The machine was shared with other "
             "jobs on its 2 cores: absolute times are pessimistic and vary between runs; "
             "ratios are measured in the same run on the same data.", "",
             "### Render + body bytes + fingerprint per turn", "",
             "| turn | format | ours ms | json.dumps ms | orjson ms | x json.dumps | x orjson |",
             "|---|---|---|---|---|---|---|"]
    for n in TURNS:
        dumps, fast = med[f"naive-json/{n}"], med[f"naive-orjson/{n}"]
        for fmt in ("anthropic", "openai-chat", "openai-responses"):
            ours = med[f"render/{fmt}/{n}"]
            lines.append(f"| {n} | {fmt} | {_ms(ours)} | {_ms(dumps)} | {_ms(fast)} | "
                         f"{dumps / ours:.1f} | {fast / ours:.1f} |")
    first = next(iter(paired.values()))
    lines += ["", "### The same, under cache pressure: ours and the rebuilds interleaved turn by "
              "turn (`benchmarks/paired.py`)", "",
              "One process; each round appends a turn (not timed), then times ours, then the two "
              "rebuilds of that request's own body (parsed from its bytes, not timed) in "
              "alternating order, so each runs right after the others' allocations (a parse and "
              "two serializations of the body: ~16 MB of objects and buffers at turn 1,000), "
              "as an agent loop's other work between renders would. "
              f"{first['rounds']} rounds per row, in blocks of new conversations timed at the "
              f"suite's turns (row 1,000: turns {paired['anthropic/1000']['turns'][0]:,}-"
              f"{paired['anthropic/1000']['turns'][1]:,}); medians of the times and of the "
              "per-round ratios (p10: their 10th percentile, nearest rank).", "",
              "| turn | format | ours ms | json.dumps ms | orjson ms | x json.dumps | "
              "x orjson | x orjson p10 |", "|---|---|---|---|---|---|---|---|"]
    for n in TURNS:
        for fmt in ("anthropic", "openai-chat", "openai-responses"):
            row = paired[f"{fmt}/{n}"]
            lines.append(f"| {n} | {fmt} | {row['ours_ms']:.3f} | {row['json_ms']:.3f} | "
                         f"{row['orjson_ms']:.3f} | {row['x_json']:.1f} | "
                         f"{row['x_orjson']:.1f} | {row['x_orjson_p10']:.1f} |")
    lines += ["", "### With token counts, on real BFCL tool schemas", "",
              "39 BFCL v4 `live_multiple` tool schemas (repaired) + a system block, head "
              "tokenizer cl100k; the new turn is timed too (counting its tokens is part of "
              "the work). Ours = append the turn + `render()` + `to_anthropic()` + `content` + "
              "`fingerprint` + `tokens`; naive = append its dicts, rebuild the body, "
              "`json.dumps(sort_keys=True)` + SHA-256 + tokenize the whole body.", ""]
    if "bfcl-tokens/10" in med:
        lines += ["| turn | ours ms | naive ms | naive / ours |", "|---|---|---|---|"]
        for n in TURNS:
            ours, naive = med[f"bfcl-tokens/{n}"], med[f"naive-bfcl-tokens/{n}"]
            lines.append(f"| {n} | {_ms(ours)} | {_ms(naive)} | {naive / ours:.1f} |")
    else:
        lines.append(f"Not measured: {meta.get('bfcl', 'the BFCL data is unavailable')}")
    lines += ["", "### Against the libraries users pick instead (Anthropic request building)",
              "", "Peer = its request mapping of the whole conversation (what it redoes every "
              "turn) + `json.dumps` of the result; ours = `render()` + `to_anthropic()` + "
              "`content` + `fingerprint`. Same workload file, each peer in its own "
              "virtualenv.", "",
              "| turn | peer | peer ms | ours ms | peer / ours |", "|---|---|---|---|---|"]
    for n in TURNS:
        ours = med[f"render/anthropic/{n}"]
        for peer in PEERS:
            if peer in errors:
                continue
            value = med.get(f"peer-{peer}/{n}")
            if value is not None:
                lines.append(f"| {n} | {peer} {PEERS[peer][0]} | {_ms(value)} | {_ms(ours)} | "
                             f"{value / ours:.0f} |")
    for peer, error in errors.items():
        lines.append(f"\n{peer} ({PEERS[peer][0]}) could not be installed here: `{error}`")
    lines += ["", "Growth from turn 10 to turn 1,000 (median at 1,000 / median at 10): "
              + ", ".join(f"{name} {_growth(values, name)}" for name in (
                  "render/anthropic", "render/openai-chat", "render/openai-responses",
                  "naive-json", "naive-orjson", "bfcl-tokens", "naive-bfcl-tokens",
                  *(f"peer-{p}" for p in PEERS if p not in errors),
                  "record-client", "record-transport")) + ".", "",
              "### Recording overhead per call (Anthropic, `Recorder.start` + `finish`)", "",
              f"p99 (nearest rank) of {_count(values, 'record-client/1000')} single calls: "
              "about the largest (the caller-thread figures below have more values).", "",
              "| turn | client path median ms | client p99 ms | transport median ms | "
              "one orjson parse ms | transport / parse |", "|---|---|---|---|---|---|"]
    for n in TURNS:
        client = sorted(values[f"record-client/{n}"])
        p99 = _p99(client)
        transport, parse = med[f"record-transport/{n}"], med[f"parse/{n}"]
        lines.append(f"| {n} | {_ms(statistics.median(client))} | {_ms(p99)} | "
                     f"{_ms(transport)} | {_ms(parse)} | {transport / parse:.2f} |")
    lines += ["", "### Recording in thread (`record_in_thread=True`): caller's thread and "
              "recorder's thread", "", "Caller = what the recording transport still runs on "
              "the caller's thread (register + queue the analysis; once it ran, observe the "
              "response + queue the finishing; `journal`: with a ledger, the provisional row "
              "journaled too), the worker drained between calls; worker = the CPU the "
              "recorder's thread spends per call (analysis + finish). Inline client = "
              "`record-client` above. Caller medians and p99 (nearest rank) over "
              f"{_count(values, 'record-thread/client/1000')} single calls per cell "
              "(`--thread-values`); the worker and inline columns are medians. Wall time "
              "with a 20 ms upstream, GIL included: `benchmarks/thread_latency.py`.", "",
              "| turn | caller client median ms | p99 | caller transport median ms | p99 | "
              "caller client + journal median ms | p99 | worker client ms | "
              "worker transport ms | inline client ms |", "|---|---|---|---|---|---|---|---|"
              "---|---|"]
    for n in TURNS:
        cells = []
        for path in ("client", "transport", "client-journal"):
            got = values.get(f"record-thread/{path}/{n}")
            cells += [_ms(statistics.median(got)), _ms(_p99(got))] if got else ["n/a"] * 2
        cells += [_ms(med[f"record-worker/{path}/{n}"]) if f"record-worker/{path}/{n}" in med
                  else "n/a" for path in ("client", "transport")]
        cells.append(_ms(med[f"record-client/{n}"]))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    per = memory["messages"]
    lines += ["", "### Memory of a 1,000-turn conversation (tracemalloc, `benchmarks/memory.py`)",
              "", f"{per} messages. State (conversation, canonical messages, segments; no "
              f"render yet): {memory['state_bytes'] / 1e6:.2f} MB, "
              f"{memory['state_bytes'] / per:.0f} B per message.", "",
              "| format | added by its renders | per message | body bytes | added / body |",
              "|---|---|---|---|---|"]
    for fmt in ("anthropic", "openai-chat", "openai-responses"):
        entry = memory[fmt]
        lines.append(f"| {fmt} | {entry['added_bytes'] / 1e6:.2f} MB | "
                     f"{entry['added_bytes'] / per:.0f} B | {entry['body_bytes'] / 1e6:.2f} MB | "
                     f"{entry['added_bytes'] / entry['body_bytes']:.2f} |")
    lines += ["", "Largest allocation sites of the state: " + "; ".join(
        f"`{site}` {size / 1e6:.2f} MB ({count} blocks)"
        for site, size, count in memory["state_sites"][:4]) + ".", ""]
    for fmt in ("anthropic", "openai-chat", "openai-responses"):
        lines.append(f"- {fmt}: " + "; ".join(
            f"`{site}` {size / 1e6:.2f} MB ({count})" for site, size, count in
            memory[fmt]["sites"][:3]))
    kept = memory["recorder"]
    lines += ["", "What a warm `Recorder` keeps per call, recording that conversation turn after "
              "turn (Anthropic, 40 calls of warm-up, then 60): " + "; ".join(
                  f"{path} path {kept[path]['retained_per_call_bytes'] / 1e3:.1f} KB per call "
                  f"(body {kept[path]['body_bytes'] / 1e6:.2f} MB)"
                  for path in ("client", "transport")) + "."]
    return "\n".join(lines)


def _lint(fast: bool) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Write the lint capture, run ``lint.py`` on it: (what the capture holds, values)."""
    capture = WORK / "lint-capture.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    facts = json.loads(subprocess.run(
        [sys.executable, str(HERE / "lint.py"), "--write", str(capture)], capture_output=True,
        text=True, check=True, env=env).stdout)
    _pyperf(Path(sys.executable), "lint.py", WORK / "lint.json", fast, "--capture",
            str(capture), settings=LINT_FAST if fast else LINT_SETTINGS)
    return facts, _values(WORK / "lint.json")


def _lint_table(facts: dict[str, Any], values: dict[str, list[float]],
                meta: dict[str, Any]) -> str:
    med = {name: statistics.median(v) for name, v in values.items()}
    parse = med["lint-parse"]
    mb = facts["size_bytes"] / 1e6
    causes = ", ".join(f"{n} {cause}" for cause, n in facts["causes"].items())
    lines = [f"Generated by `python benchmarks/run.py` (or `--lint-only`) on {meta['date']}: "
             f"{meta['machine']}, CPython {meta['python']}, {meta['versions']}. pyperf, each "
             f"value one whole pass over the file, {len(values['lint'])} values per pass; "
             "medians. The machine was shared with other jobs on its 2 cores: absolute times "
             "vary between runs; the ratios are measured in the same run on the same file.", "",
             f"Capture: {facts['requests']:,} Anthropic requests, {mb:.1f} MB JSONL "
             f"({facts['size_bytes'] / facts['requests'] / 1e3:.0f} KB mean), 10 interleaved "
             f"sessions without session ids; lint finds {facts['sessions']} sessions and "
             f"{facts['breaks']} breaks ({causes}).", "",
             "| pass | median s | MB/s | throughput / parse-only (target >= 0.50) |",
             "|---|---|---|---|"]
    for name, label in (("lint-parse", "orjson parse only (read through lint's 1 MiB buffer + "
                                       "`orjson.loads` per line)"),
                        ("lint", "`lint_capture` (segments reused across a conversation)"),
                        ("lint-noreuse", "`lint_capture(reuse=False)` (every request "
                                         "parsed and segmented whole)")):
        lines.append(f"| {label} | {med[name]:.2f} | {mb / med[name]:.0f} | "
                     f"{parse / med[name]:.2f} |")
    lines += ["", f"Lint with reuse is {med['lint-noreuse'] / med['lint']:.1f}x faster than "
              "without, in the same run."]
    return "\n".join(lines)


def _replace(text: str, start_mark: str, end_mark: str, table: str) -> str:
    start, end = text.index(start_mark) + len(start_mark), text.index(end_mark)
    return text[:start] + "\n" + table + "\n" + text[end:]


def _versions() -> str:
    import orjson
    import tiktoken

    return f"orjson {orjson.__version__}, tiktoken {tiktoken.__version__}, pyperf " \
           f"{pyperf.__version__}"


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} vCPU {cpu} ({platform.machine()}), {platform.system()} " \
           f"{platform.release()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="fewer values (a smoke run)")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print, keep RESULTS.md")
    parser.add_argument("--lint-only", action="store_true", help="only the lint benchmark")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    lint_facts, lint_values = _lint(args.fast)
    lint_table = _lint_table(lint_facts, lint_values, _meta(len(lint_values["lint"])))
    if args.lint_only:
        if args.no_write:
            print(lint_table)
        else:
            RESULTS.write_text(_replace(RESULTS.read_text(), LINT_START, LINT_END, lint_table))
            print(f"wrote {RESULTS}")
        return
    path = WORK / "workload.json"
    workload.write(path, max(TURNS) + 100)
    _pyperf(Path(sys.executable), "suite.py", WORK / "suite.json", args.fast,
            "--thread-values", str(THREAD_VALUES_FAST if args.fast else THREAD_VALUES))
    values = _values(WORK / "suite.json")
    bfcl = pyperf.BenchmarkSuite.load(str(WORK / "suite.json")).get_metadata().get("bfcl")
    errors: dict[str, str] = {}
    for peer in () if args.skip_peers else PEERS:
        try:
            python = peer_python(peer, (PYPERF,))
        except PeerEnvError as exc:
            errors[peer] = exc.reason
            continue
        out = WORK / f"peer-{peer}.json"
        _pyperf(python, "peers.py", out, args.fast, "--peer", peer, "--workload",
                str(path))
        values.update(_values(out))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    memory = json.loads(subprocess.run(
        [sys.executable, str(HERE / "memory.py")], capture_output=True, text=True, check=True,
        env=env).stdout)
    paired = json.loads(subprocess.run(
        [sys.executable, str(HERE / "paired.py"), *(["--rounds", "10"] if args.fast else [])],
        capture_output=True, text=True, check=True, env=env).stdout)
    tables = _tables(values, errors, memory, paired,
                     {**_meta(len(values["render/anthropic/10"])), "bfcl": bfcl})
    if args.no_write:
        print(tables + "\n\n" + lint_table)
        return
    text = _replace(RESULTS.read_text(), MARK_START, MARK_END, tables)
    RESULTS.write_text(_replace(text, LINT_START, LINT_END, lint_table))
    print(f"wrote {RESULTS}")


def _meta(samples: int) -> dict[str, Any]:
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": _machine(), "python": platform.python_version(),
            "versions": _versions(), "samples": f"{samples} values per benchmark"}


if __name__ == "__main__":
    main()
