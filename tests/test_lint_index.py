"""The lint pairing index keeps prefix digests in runs held by the same requests
(``_requests.RequestIndex``): it answers exactly what a list of holders per digest answers,
for requests that extend, fork from, retry or cut earlier ones, or share nothing; and the
candidate search with the same opening that stops at the index's bound picks the request the
full scan picks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt._diff import first_divergent_index
from stableprompt._lint._linter import _Linter
from stableprompt._lint._requests import Req, RequestIndex
from stableprompt._segment import SegmentBytes, SegmentSpec, build_segments

plans = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12),
                           st.lists(st.sampled_from([b"a", b"b", b"cc"]), max_size=4)),
                 min_size=1, max_size=30)


def _req(pos: int, datas: list[bytes]) -> Req:
    segments, _, _ = build_segments(
        [SegmentSpec("message", f"m{i}", d) for i, d in enumerate(datas)])
    return Req(pos=pos, index=pos, source=f"r{pos}", wire_format="anthropic", group=None,
               scope=None, session=None, hinted=False, model="m", segments=segments,
               data=SegmentBytes(datas), has_assistant=False, breakpoints=(),
               first_message_digest=None)


@settings(max_examples=300, deadline=None)
@given(plans=plans)
def test_holders_equal_a_list_per_digest(plans: list[tuple[int, int, list[bytes]]]) -> None:
    """After each request: the same digests are known, each held by the same requests in the
    same order, and the shared-prefix search gives the same depth as scanning the lists."""
    index = RequestIndex()
    naive: dict[str, list[int]] = {}
    chains: list[list[bytes]] = []
    for pos, (base, cut, fresh) in enumerate(plans):
        prefix = chains[base % len(chains)][:cut] if chains and base % 4 else []
        chains.append([*prefix, *fresh])
        req = _req(pos, chains[-1])
        depth = 0
        while depth < len(req.segments) and req.segments[depth].prefix_digest in naive:
            depth += 1
        assert index.shared(req.segments) == depth
        index.add(req)
        for s in req.segments:
            naive.setdefault(s.prefix_digest, []).append(pos)
        assert set(index.runs) == set(naive)
        assert all(index.holders(d) == positions for d, positions in naive.items())
        assert index.all == list(range(pos + 1))


def _most_shared_reference(reqs: list[Req], b: Req, index: RequestIndex) -> Req | None:
    """``_Linter._same_opening`` as it was: every one of the 64 latest candidates with ``b``'s
    opening compared, the most shared segments kept (latest on ties)."""
    best_k, best = -1, None
    for pos in reversed(index.by_first.get(b.first_message_digest or "", [])[-64:]):
        shared = first_divergent_index(reqs[pos].segments, b.segments)
        if shared > best_k:
            best_k, best = shared, reqs[pos]
    return best


@settings(max_examples=300, deadline=None)
@given(plans=plans, openings=st.lists(st.sampled_from(["o1", "o2", None]), min_size=30,
                                      max_size=30))
def test_same_opening_stops_at_the_bound(plans: list[tuple[int, int, list[bytes]]],
                                         openings: list[str | None]) -> None:
    """``_same_opening`` stops at the first candidate sharing as many segments as any
    request of the index (``RequestIndex.shared``): the same request as comparing all 64."""
    linter = _Linter(wire_format=None, policies=None)
    index = RequestIndex()
    chains: list[list[bytes]] = []
    for pos, (base, cut, fresh) in enumerate(plans):
        prefix = chains[base % len(chains)][:cut] if chains and base % 4 else []
        chains.append([*prefix, *fresh])
        req = _req(pos, chains[-1])
        req.first_message_digest = openings[pos]
        found = linter._same_opening(req, index)
        assert found is _most_shared_reference(linter.reqs, req, index)
        linter.reqs.append(req)
        index.add(req)
