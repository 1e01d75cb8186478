"""Memory of a 1,000-turn conversation (tracemalloc): what the state holds per message against
the wire bytes of its messages, and what each wire format's render adds.

Prints one JSON object: ``messages``, ``state_bytes`` (the conversation with its canonical
messages, before any render), and per format ``added_bytes`` (what rendering it the first
time and then every turn keeps: per-message fragments in ``Message.wire_memo`` plus the
history memo's joined prefix) next to ``history_wire_bytes`` (the bytes of the history in
that format's body). Documented: each message's wire bytes are held once per format in its
memo, plus once in the format's joined prefix buffer (``_wire._parts``), so ``added_bytes /
history_wire_bytes`` near 2 means no duplication beyond that; a third copy would show as 3.

``recorder``: what a :class:`~stableprompt.Recorder` keeps per call once warm, recording the
same 1,000-turn conversation turn after turn (``client``: bodies it was handed segmented, as
``AnthropicClient`` does; ``transport``: body bytes parsed anew each call, as under an
official SDK): ``retained_per_call_bytes`` is the traced growth over :data:`RECORDED` calls
divided by their number, next to the body size. It holds its predecessor candidates
(``LINEAGE_DEPTH`` calls per lineage); each shares its history items and segment bytes with
the others, so what a call adds is its new items and its segment and token tuples.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from suite import FORMATS, _conversation, _grow

from stableprompt._recording._observer import Observation

TURNS = 1000
RECORDED = 60


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _sites(before: tracemalloc.Snapshot, limit: int = 6) -> list[list[object]]:
    """The allocation sites that grew most since ``before``: ``[file:line, bytes, count]``."""
    after = tracemalloc.take_snapshot()
    root = str(Path(__file__).resolve().parents[1] / "src") + "/"
    return [[f"{d.traceback[0].filename.replace(root, '')}:{d.traceback[0].lineno}",
             d.size_diff, d.count_diff] for d in after.compare_to(before, "lineno")[:limit]]


def main() -> None:
    tracemalloc.start()
    base = _traced()
    empty = tracemalloc.take_snapshot()
    conv, done = _conversation(TURNS)
    state = _traced() - base
    out: dict[str, object] = {"turns": TURNS, "messages": len(conv.messages),
                              "state_bytes": state, "state_sites": _sites(empty)}
    for name, render in FORMATS.items():
        before = _traced()
        snapshot = tracemalloc.take_snapshot()
        for step in range(3):  # a few turns, as a loop renders: memos grow with history only
            _grow(conv, done[0])
            done[0] += 1
            req = render(conv.render(tail={"now": str(step)}))
            size = len(req.content)
            req.fingerprint  # noqa: B018 (what a client or recorder asks for)
            del req
        body_history = size
        out[name] = {"added_bytes": _traced() - before, "body_bytes": body_history,
                     "sites": _sites(snapshot, 4)}
    out["recorder"] = {path: _recorder(client=path == "client") for path in ("client",
                                                                              "transport")}
    total_wire = len(FORMATS["anthropic"](conv.render(tail={"now": "x"})).content)
    out["anthropic_body_bytes_now"] = total_wire
    out["messages_now"] = len(conv.messages)
    print(json.dumps(out))


def _recorder(*, client: bool) -> dict[str, int]:
    """Bytes a warm recorder keeps per call (see the module docstring)."""
    from suite import _response, _stepper

    from stableprompt import Recorder

    recorder = Recorder(tokenizer="cl100k_base", keep_records=0)
    step = _stepper(TURNS)

    def record() -> int:
        content = step().content
        if client:
            found = recorder.segment_rendered("anthropic", content)
            pending = recorder.start("/v1/messages", {}, content, resegmented=found,
                                     decoded=None if found is None else found.segmented._body_view)
        else:
            pending = recorder.start("/v1/messages", {}, content)
        assert pending is not None
        recorder.finish(pending, Observation(status_code=200, body=_response(content)))
        return len(content)

    for _ in range(40):  # warm: the lineage holds its full depth of candidates
        record()
    before = _traced()
    size = max(record() for _ in range(RECORDED))
    return {"retained_per_call_bytes": (_traced() - before) // RECORDED, "body_bytes": size}


if __name__ == "__main__":
    main()
