"""Captures -> pairs -> findings -> report: the prefix-stability linter.

- ``_capture``: reading request bodies (JSONL, HAR, directories of JSON files).
- ``_divergence``: where a pair of requests first differs (segment, JSON path, cause).
- ``_findings``: capture-wide findings with a fix each.
- ``_results``: LintFinding, LintPair, LintReport.
- ``_requests``: a linted request (segments, session, opening digest) and the digest indexes.
- ``_events``: which deliberate CacheEvent (compaction, rebase) explains a break.
- ``_linter``: pairing requests into lineages; lint_capture / lint_requests.
- ``_command``: ``stableprompt lint`` (arguments, text output, exit codes).
"""
