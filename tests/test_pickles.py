"""Pickles of public objects name only ``stableprompt.<Name>`` and round-trip equal."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import types
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import stableprompt as sp

_PRIVATE = re.compile(rb"stableprompt\._\w*")


def _private_modules(data: bytes) -> list[bytes]:
    return sorted(set(_PRIVATE.findall(data)))


def _tool() -> sp.Tool:
    return sp.Tool("search", "Search the docs.",
                   {"type": "object", "properties": {"q": {"type": "string"}}})


def _conversation() -> sp.Conversation:
    head = (sp.PromptBuilder(tokenizer="bytes/4").system("Be brief.", cache_ttl="1h")
            .tools([_tool()]).tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("hi")
    conv.assistant("looking", tool_calls=[sp.ToolCall("c1", "search", {"q": "x"})])
    conv.tool_result("c1", "found it")
    return conv


def _objects() -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    """Public picklable objects, each made the way the SDK makes them internally, with the
    key that equality is judged on (``None``: the object's own ``==``)."""
    conv = _conversation()
    rendered = conv.render(tail={"now": "Tuesday"})
    request = rendered.to_anthropic(model="m", max_tokens=16)
    later = conv.fork()
    later.user("and now?")
    event = later.compact("They said hi.", start=0, end=3)
    repaired = sp.Tool.from_dict({"name": "f", "parameters": {"type": "object",
                                  "properties": {"x": {"type": "int"}}}}, repair=True)
    plan = sp.plan_compaction(history_tokens=9000, span_tokens=6000, summary_tokens=500,
                              surviving_tokens=2000, new_tokens_per_turn=300,
                              remaining_turns=10, read_multiplier=0.1, write_multiplier=1.25)
    record = sp.UsageRecord(ts_utc=datetime(2026, 1, 1, tzinfo=UTC),
                            wire_format="anthropic", provider="anthropic", model="m",
                            cache_read_tokens=5, verdict="hit")
    same: Callable[[Any], Any] = lambda value: value  # noqa: E731
    return {
        "Tool": (_tool(), same),
        "Tool(repaired)": (repaired, lambda t: (t, t.repairs)),
        "ToolSet": (conv.head.tools, same),
        "PinnedHead": (conv.head, same),
        "Conversation": (conv, lambda c: (c.head, c.export(), c.messages)),
        "Message": (conv.messages[1], same),
        "ToolCall": (conv.messages[1].tool_calls[0], same),
        "Segment": (rendered.segments[0], same),
        "RenderedPrompt": (rendered, lambda r: (r.head, r.messages, r.tail, r.segments, r.data,
                                                r.fingerprint)),
        "ProviderRequest": (request, lambda r: (r.wire_format, r.path, r.content)),
        "SegmentedRequest": (request.segmented, lambda s: (s.wire_format, s.segments, s.data)),
        "Divergence": (sp.diff(rendered, later.render(tail={"now": "x"})), same),
        "CacheEvent": (event, same),
        "CompactionPlan": (plan, same),
        "Repair": (repaired.repairs[0], same),
        "CacheUsage": (sp.CacheUsage(wire_format="anthropic", input_tokens_total=10,
                                     cache_read_tokens=5, raw={"input_tokens": 5}), same),
        "UsageRecord": (record, same),
        "CacheRules": (sp.cache_rules("anthropic", "claude-opus-4-5"), same),
        "PolicyTable": (sp.PolicyTable(), lambda t: t.policies),
        "VolatileSpan": (sp.scan_volatile("at 2026-11-30T10:00:00Z")[0], same),
        "LintFinding": (sp.LintFinding("no-breakpoints", "warning", "m", "f", (0,)), same),
        "ByteTokenizer": (sp.ByteTokenizer(), lambda t: (type(t), t.name)),
        "InputError": (sp.InputError("bad", code="input-invalid"),
                       lambda e: (type(e), str(e), e.code)),
        "ToolSchemaError": (sp.ToolSchemaError("bad", code="tool-schema-invalid", pointer="/x"),
                            lambda e: (type(e), str(e), e.code, e.pointer)),
    }


@pytest.mark.parametrize("name", sorted(_objects()))
def test_pickle_names_no_private_module_and_round_trips(name: str) -> None:
    """The pickle mentions no ``stableprompt._`` module and loads back equal."""
    value, key = _objects()[name]
    data = pickle.dumps(value)
    assert _private_modules(data) == []
    assert key(pickle.loads(data)) == key(value)


def test_public_classes_and_functions_are_named_stableprompt() -> None:
    """Every public class and function says ``__module__ == "stableprompt"`` and pickles by
    reference as ``stableprompt.<Name>``."""
    for name in sp.__all__:
        value = getattr(sp, name)
        if isinstance(value, (type, types.FunctionType)):
            assert value.__module__ == "stableprompt", name
            assert pickle.loads(pickle.dumps(value)) is value
            assert _private_modules(pickle.dumps(value)) == [], name


_INTERNAL = """
import pickle, sys
from stableprompt._prompt._builder import PromptBuilder
from stableprompt._prompt._tools import Tool
tool = Tool("search", None, {"type": "object"})
head = PromptBuilder(tokenizer=None).system("Hi.").tools([tool]).freeze()
conv = head.conversation()
conv.user("hello")
rendered = conv.render()
door = ("stableprompt._recording._recorder", "stableprompt._client")
loaded = [n for n in door if n in sys.modules]
data = pickle.dumps((tool, head, conv.messages[0], rendered.segments[0], rendered))
sys.stdout.write(repr((b"stableprompt._" in data, loaded)))
"""


def test_objects_made_internally_pickle_publicly() -> None:
    """Objects the SDK creates before anyone touched the door (a fresh interpreter importing
    private modules only) already pickle as ``stableprompt.<Name>``."""
    out = subprocess.run([sys.executable, "-c", _INTERNAL], capture_output=True, text=True,
                         check=True).stdout
    assert out == "(False, [])"


_DEFINED = """
import importlib, stableprompt
wrong = []
for name, module in sorted(stableprompt._EXPORTS.items()):
    value = vars(importlib.import_module("stableprompt." + module))[name]
    if callable(value) and value.__module__ != "stableprompt":
        wrong.append(name)
print(wrong)
"""


def test_public_names_are_renamed_where_they_are_defined() -> None:
    """Every public class and function is named ``stableprompt`` by its defining module (one
    rule, ``_public.public``), not by the door on first access: checked in a fresh
    interpreter that never touches a door attribute."""
    out = subprocess.run([sys.executable, "-c", _DEFINED], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
