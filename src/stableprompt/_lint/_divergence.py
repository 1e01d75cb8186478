"""A divergence in user terms: the one message lint and ``assert_prefix_stable`` print.

:func:`stableprompt._diff.diff` locates the first divergence in *segment data* (the request
re-serialized as compact JSON in cache order, breakpoint markers removed, each message block
wrapped as ``{"role": ..., "block": ...}``): its ``offset`` is a byte offset into that buffer
(equal to the common prefix length in bytes), not into the body the harness sent.
:func:`describe_divergence` adds what a user can act on, from :func:`~stableprompt._diff.
value_snippet` (the differing JSON value and the character offset inside it) and
:func:`~stableprompt._diff.is_expected_divergence` (is it the predecessor's volatile tail);
both live in ``_diff`` (re-exported here) because the recorder applies the same rules.
"""

from __future__ import annotations

from .._diff import (
    SNIPPET_CHARS,
    Divergence,
    ValueSnippet,
    is_expected_divergence,
    value_snippet,
)

__all__ = ["SNIPPET_CHARS", "ValueSnippet", "describe_divergence", "is_expected_divergence",
           "value_snippet"]


def describe_divergence(
    divergence: Divergence, snippet: ValueSnippet, *, expected: bool = False
) -> str:
    """The message for one divergence (the same in ``stableprompt lint`` and
    ``assert_prefix_stable``)::

        prefix diverges at /system/0/text (segment system[0], character 42 of the value;
        common prefix 310 bytes of segment data): volatile-token (timestamp)
          before: '... 10:00:00Z ...'
          after:  '... 10:05:00Z ...'
    """
    d = divergence
    detail = f" ({d.detail})" if d.detail else ""
    tail = " [expected: the predecessor's volatile tail]" if expected else ""
    return (
        f"prefix diverges at {d.path or '/'} (segment {d.segment}, character "
        f"{snippet.value_offset} of the value; common prefix {d.offset} bytes of segment "
        f"data): {d.cause}{detail}{tail}\n"
        f"  before: {snippet.snippet_a!r}\n  after:  {snippet.snippet_b!r}"
    )
