"""Check a recorded run's misses against the independent ground truth (``ground_truth``).

Every miss the ledger explains by a change of the body (``client_mutation``; a
``header-change`` of an unchanged body is the headers tests') must be explained
where a plain JSON diff of the two bodies in cache order puts the first difference
(:func:`ground_truth.first_difference`, which imports nothing of stableprompt), with a cause
of its class; and the row must list every divergence, the first being the one it names. The
pair is the one the ledger compared (``predecessor_id``): pairing is checked elsewhere
(issue 26 items 2-3). Bodies come from the proxy's ``--capture`` lines and are matched to
rows by their request fingerprint (the segmenter names a body; the diff is not used).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ground_truth import first_difference
from stableprompt import UsageRecord, segment_request


def check_misses(records: Sequence[UsageRecord],
                 captured: Iterable[Mapping[str, Any]]) -> str:
    """Assert the checks above on every miss; a one-line summary for the test's output.

    Raises:
        AssertionError: a miss named elsewhere or with a cause of another class than the
            ground truth's, or a row without its list of divergences.
    """
    bodies: dict[str, tuple[str, dict[str, Any]]] = {}
    for line in captured:
        body = json.loads(line["request"])
        fingerprint = segment_request(line["wire_format"], body).fingerprint
        bodies[fingerprint] = (line["wire_format"], body)
    by_id = {row.record_id: row for row in records}
    misses = [row for row in records if row.verdict == "client_mutation"
              and isinstance(row.verdict_detail.get("path"), str)
              and row.verdict_detail.get("cause") != "header-change"]  # headers: not bodies
    shown = []
    for row in misses:
        detail: dict[str, Any] = dict(row.verdict_detail)
        assert row.predecessor_id is not None and row.request_fingerprint is not None
        wire, body = bodies[row.request_fingerprint]
        _, before = bodies[str(by_id[row.predecessor_id].request_fingerprint)]
        truth = first_difference(wire, before, body)
        where = f"{row.record_id}: {detail['cause']} at {detail['path']} vs {truth}"
        assert truth is not None, where
        assert truth.same_place(detail["path"]) and truth.admits(detail["cause"]), where
        listed = detail["divergences"]
        assert listed and detail["divergences_total"] >= len(listed), where
        assert (listed[0]["cause"], listed[0]["path"]) == (detail["cause"], detail["path"])
        assert listed[0]["lost_tokens"] == detail["lost_tokens"]
        shown.append(f"{detail['cause']} {detail['path']} (+{detail['divergences_total'] - 1})")
    return f"ground truth: {len(misses)}/{len(misses)} misses match: {shown}"
