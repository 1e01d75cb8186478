"""Human think time for the ``think-time`` demo scenario: minutes between user turns.

A person reads the answer, thinks and types: the gap before each user turn after the first
is drawn uniformly from :data:`THINK_TIME_S` (1 to 15 minutes), so about 71% of the gaps
outlive the default 5-minute TTL (Anthropic, Bedrock, OpenAI before GPT-5.5) and none
outlives a 1-hour one. Calls within a turn (tool call, result, next call) keep the driver's
seconds (``_driver.CALL_STEP_S``), so those never expire.

Determinism: the gaps come from ``random.Random`` seeded with the session id, rounded to the
millisecond, so every run of a session, and every re-run of it under another
:class:`~stableprompt.CachePolicy`, sees the same gaps.
"""

from __future__ import annotations

import random

__all__ = ["THINK_TIME_S", "think_times"]

THINK_TIME_S = (60.0, 900.0)
"""Range of one think-time gap (seconds): 1 to 15 minutes, uniform."""


def think_times(session_id: str, turns: int) -> tuple[float, ...]:
    """The think time before each user turn after the first of session ``session_id``
    (seconds, ``turns - 1`` values; empty for a one-turn session)."""
    rng = random.Random(f"think-time:{session_id}")
    low, high = THINK_TIME_S
    return tuple(round(rng.uniform(low, high), 3) for _ in range(max(turns - 1, 0)))
