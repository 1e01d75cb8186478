"""Captures -> pairs -> findings -> report: the prefix-stability linter.

- ``_capture``: reading request bodies (JSONL, HAR, directories of JSON files).
- ``_divergence``: where a pair of requests first differs (segment, JSON path, cause).
- ``_findings``: capture-wide findings with a fix each.
- ``_results``: LintFinding, LintPair, LintReport.
- ``_requests``: a linted request (segments, session, opening digest) and the digest indexes.
- ``_events``: which deliberate CacheEvent (compaction, rebase) explains a break.
- ``_linter``: pairing requests into lineages; lint_capture / lint_requests.
- ``_command``: ``stableprompt lint`` (arguments, text output, exit codes; ``--source`` too).
- ``_source_rules``: source lint rules, sources of per-call variation, prompt sinks (data).
- ``_source_flow``: the taint walk of one function; its summary for callers.
- ``_source_checks``: structure checks without data flow (summarizer prefix, cache TTL).
- ``_source``: files -> modules -> rounds of walks -> findings; config, suppressions;
  lint_source.
- ``_source_report``: SourceFinding, SourceLintReport, the text output.
- ``_sarif``: a source report as SARIF 2.1.0.
"""
