"""Tests for the public surface: one door, sorted __all__."""

from __future__ import annotations

import types

import stableprompt

ISSUE_NAMES = {
    "canonical_json", "Tool", "ToolSet", "PromptBuilder", "PinnedHead", "Conversation",
    "RenderedPrompt", "diff", "Divergence", "parse_usage", "parse_stream", "CacheUsage", "Ledger",
    "AnthropicClient", "OpenAIClient", "RecordingTransport", "AsyncRecordingTransport",
    "summarize", "Summary", "OTelSink",
}


def test_all_is_sorted_and_complete() -> None:
    """__all__ is sorted and equals the public (non-module, non-underscore) namespace, as the
    lazy door lists it (``dir``) and resolves it (``getattr``)."""
    assert stableprompt.__all__ == sorted(stableprompt.__all__)
    public = {
        name for name in dir(stableprompt)
        if not name.startswith("_")
        and not isinstance(getattr(stableprompt, name), types.ModuleType)
    }
    assert public | {"__version__"} == set(stableprompt.__all__)
    assert len(stableprompt.__all__) == 105
    loaded = {name for name, value in vars(stableprompt).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert loaded <= set(stableprompt.__all__)  # what the door has resolved so far


def test_issue_names_exported() -> None:
    """Every name the issues promise is importable from stableprompt."""
    missing = sorted(n for n in ISSUE_NAMES if not hasattr(stableprompt, n))
    assert missing == []


def test_errors_have_codes_and_builtin_bases() -> None:
    """Input errors are ValueErrors; every error class has a stable code slug."""
    assert issubclass(stableprompt.InputError, ValueError)
    assert issubclass(stableprompt.TailSlotError, LookupError)
    for name in stableprompt.__all__:
        value = getattr(stableprompt, name)
        if isinstance(value, type) and issubclass(value, stableprompt.StablePromptError):
            assert value.code and value.code == value.code.lower()
