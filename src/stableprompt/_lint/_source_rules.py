"""What the source pass looks for: rules, sources of per-call variation, and prompt sinks.

Data only, read by :mod:`stableprompt._lint._source_flow` (the taint walk) and
:mod:`stableprompt._lint._source` (the project pass). A *source* makes a value that differs
from call to call (a clock, an id), from process to process (set iteration order under hash
randomization, a directory listing) or from machine to machine (the working directory, the
environment). A *sink* is a prompt slot that a provider caches as a prefix: the system prompt,
the tool list and its schemas, the first messages. A *rule* joins the two and names the break
with the capture linter's vocabulary: each rule's ``cause`` is a slug of
:data:`stableprompt._diff.CAUSES` or a capture finding code of
:data:`stableprompt._lint._findings.FINDING_FIXES`, and its fix starts from the capture fix
(:data:`~stableprompt._lint._findings.CAUSE_FIXES`) rather than restating it.

Names are matched on the *resolved dotted name* of a call: the module an import alias stands
for replaces the alias (``from datetime import datetime as dt``; ``dt.now()`` is
``datetime.datetime.now``), attribute chains on local objects are kept as written
(``self.client.messages.create``). A pattern matches the whole name or a dot-separated suffix
of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._findings import CAUSE_FIXES, FINDING_FIXES

__all__ = [
    "BUILDER_METHODS",
    "BUILDER_SINK",
    "CACHE_DECORATORS",
    "FROZEN_KINDS",
    "KILL_ALL",
    "LLM_CALLS",
    "LLM_LAST",
    "ORDER_KINDS",
    "RULES",
    "RULE_BY_KIND",
    "SINKS",
    "SOURCE_ATTRIBUTES",
    "SOURCE_CALLS",
    "SOURCE_INDEX",
    "SOURCE_METHODS",
    "SUMMARY_WORDS",
    "SYSTEM_DECORATORS",
    "SYSTEM_ONLY_KINDS",
    "TOOLS_ONLY_KINDS",
    "Rule",
    "Sink",
    "last_name",
    "match",
    "rule_named",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """One source-lint rule.

    Attributes:
        id: Stable id, ``SP1xx`` (per-call values), ``SP2xx`` (ordering), ``SP3xx`` (prompt
            structure); suppressions and the config name rules by id or by ``name``.
        name: Slug, e.g. ``clock-in-prefix``.
        cause: The capture linter's slug for the break this causes (see the module docstring).
        severity: ``error`` (differs on every call), ``warning`` (differs across processes,
            machines or runtimes).
        summary: One line for the SARIF rule and ``--json``.
        fix: The fix, in the capture linter's words.
    """

    id: str
    name: str
    cause: str
    severity: str
    summary: str
    fix: str


def _cause_fix(cause: str) -> str:
    return CAUSE_FIXES[cause] if cause in CAUSE_FIXES else FINDING_FIXES[cause][1]


_TAIL = ("; in stableprompt's builder declare a tail slot (PromptBuilder(tail_slots=[...]) "
         "and render(tail={...})) or send it as a mid-conversation system message")

RULES: tuple[Rule, ...] = (
    Rule("SP101", "clock-in-prefix", "volatile-token", "error",
         "a clock reading (datetime/time now) reaches a cached prompt slot",
         _cause_fix("volatile-token") + _TAIL),
    Rule("SP102", "random-in-prefix", "volatile-token", "error",
         "a random value or id (uuid, random, secrets) reaches a cached prompt slot",
         _cause_fix("volatile-token") + _TAIL),
    Rule("SP103", "environment-in-prefix", "volatile-token", "warning",
         "machine or user state (cwd, environment, platform, hostname) reaches a cached "
         "prompt slot",
         _cause_fix("volatile-token") + "; environment text differs per user and machine"
         + _TAIL),
    Rule("SP104", "subprocess-in-prefix", "volatile-token", "error",
         "subprocess output (git status, branch, ...) reaches a cached prompt slot",
         _cause_fix("volatile-token") + _TAIL),
    Rule("SP201", "unordered-in-prefix", "tool-reorder", "warning",
         "a value iterated in arbitrary order (set, directory listing, dict from I/O) reaches "
         "a cached prompt slot",
         _cause_fix("tool-reorder") + "; wrap the value in sorted(...) before it is sent"),
    Rule("SP202", "unsorted-mcp-tools", "tool-reorder", "warning",
         "MCP list_tools() results reach the tool list in server order",
         _cause_fix("tool-reorder") + "; sorted(result.tools, key=lambda t: t.name), or "
         "stableprompt.ToolSet, which sorts"),
    Rule("SP203", "unsorted-json-keys", "key-order", "warning",
         "json.dumps without sort_keys=True reaches a cached prompt slot",
         _cause_fix("key-order") + "; json.dumps(..., sort_keys=True) or "
         "stableprompt.canonical_json"),
    Rule("SP301", "summary-in-system", "content-edit", "error",
         "a model's output (a compaction summary) is written into the system prompt",
         _cause_fix("content-edit") + "; append the summary as a message after the cached "
         "head (Conversation.compact does) instead of rewriting system"),
    Rule("SP302", "system-hoisted", "content-edit", "error",
         "mid-conversation role=system messages are hoisted into the top-level system",
         _cause_fix("content-edit") + "; hoist only the leading system messages and send "
         "later ones in place (as user-role text), so a new one never rewrites the head"),
    Rule("SP303", "summarizer-prefix-differs", "history-rewrite", "warning",
         "a summarizer call builds its prefix differently from the main call",
         _cause_fix("history-rewrite") + "; build the summarizer request from the main "
         "call's exact prefix (same system, tools, message conversion) and append the "
         "instruction as the last user message"),
    Rule("SP304", "cache-ttl-dropped", "breakpoint-ttl-order", "warning",
         "a cache_control without ttl (5 minutes) where the project caches for 1h",
         "add \"ttl\": \"1h\" to this cache_control; "
         + _cause_fix("breakpoint-ttl-order")),
)

_BY_KEY: dict[str, Rule] = {**{r.id.lower(): r for r in RULES},
                            **{r.name: r for r in RULES}}


def rule_named(name: str) -> Rule | None:
    """The rule with id (any case) or slug ``name``, or ``None``."""
    return _BY_KEY.get(name.strip().lower())


#: Taint kind -> rule id.
RULE_BY_KIND: Mapping[str, str] = {
    "clock": "SP101", "random": "SP102", "env": "SP103", "subprocess": "SP104",
    "unordered": "SP201", "io-order": "SP201", "mcp-tools": "SP202", "json-keys": "SP203",
    "model-output": "SP301", "hoisted-system": "SP302",
}
#: Kinds that are fixed by sorting (``sorted``, ``.sort()``) and meaningless after a compare.
ORDER_KINDS = frozenset({"unordered", "io-order", "mcp-tools"})
#: Kinds that stop varying once computed at import, in ``__init__`` or under a cache decorator
#: (a date frozen for the process or session is one value to the cache).
FROZEN_KINDS = frozenset({"clock", "random"})
#: Kinds only the system slot cares about (model output in messages is ordinary history).
SYSTEM_ONLY_KINDS = frozenset({"model-output", "hoisted-system"})
#: Kinds only the tool slot cares about (a dict from I/O is one stable file, elsewhere).
TOOLS_ONLY_KINDS = frozenset({"io-order"})
#: Kinds that a call to the model produces, and the call patterns that do.
LLM_CALLS = ("messages.create", "messages.stream", "chat.completions.create",
             "chat.completions.parse", "responses.create", "responses.parse",
             "models.generate_content", "converse", "invoke_model", "litellm.completion",
             "litellm.acompletion")

#: Calls whose result carries no variation of its arguments (sizes, truth values, types).
KILL_ALL = frozenset({"len", "bool", "isinstance", "issubclass", "type", "id", "hash",
                      "callable", "hasattr"})
#: Decorators under which a function computes its value once (per process or argument).
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache", "cache", "lru_cache",
                              "functools.cached_property", "cached_property"})
#: A function whose name holds one of these builds a summary (a compaction call).
SUMMARY_WORDS = ("summar", "compact", "condense")

#: Resolved dotted call name -> (kind, what). ``match`` semantics: whole name or suffix.
SOURCE_CALLS: Mapping[str, tuple[str, str]] = {
    **{f"datetime.datetime.{f}": ("clock", f"datetime.{f}()") for f in
       ("now", "utcnow", "today", "fromtimestamp")},
    "datetime.date.today": ("clock", "date.today()"),
    **{f"time.{f}": ("clock", f"time.{f}()") for f in
       ("time", "time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime",
        "monotonic", "perf_counter")},
    "pendulum.now": ("clock", "pendulum.now()"), "arrow.now": ("clock", "arrow.now()"),
    "arrow.utcnow": ("clock", "arrow.utcnow()"),
    **{f"uuid.{f}": ("random", f"uuid.{f}()") for f in ("uuid1", "uuid4")},
    **{f"random.{f}": ("random", f"random.{f}()") for f in
       ("random", "randint", "choice", "choices", "sample", "uniform", "randrange",
        "getrandbits", "gauss", "shuffle")},
    **{f"secrets.{f}": ("random", f"secrets.{f}()") for f in
       ("token_hex", "token_urlsafe", "token_bytes", "choice", "randbelow", "randbits")},
    "os.urandom": ("random", "os.urandom()"),
    "os.getcwd": ("env", "os.getcwd()"), "os.getcwdb": ("env", "os.getcwdb()"),
    "pathlib.Path.cwd": ("env", "Path.cwd()"), "pathlib.Path.home": ("env", "Path.home()"),
    "os.getenv": ("env", "os.getenv()"), "os.environ.get": ("env", "os.environ.get()"),
    "os.getpid": ("env", "os.getpid()"), "os.getlogin": ("env", "os.getlogin()"),
    "os.path.expanduser": ("env", "os.path.expanduser()"),
    "socket.gethostname": ("env", "socket.gethostname()"),
    "socket.getfqdn": ("env", "socket.getfqdn()"),
    "getpass.getuser": ("env", "getpass.getuser()"),
    **{f"platform.{f}": ("env", f"platform.{f}()") for f in
       ("platform", "system", "release", "version", "machine", "node", "uname",
        "python_version", "processor", "mac_ver")},
    **{f"subprocess.{f}": ("subprocess", f"subprocess.{f}()") for f in
       ("run", "check_output", "getoutput", "getstatusoutput", "Popen")},
    "os.popen": ("subprocess", "os.popen()"),
    "asyncio.create_subprocess_exec": ("subprocess", "asyncio.create_subprocess_exec()"),
    "asyncio.create_subprocess_shell": ("subprocess", "asyncio.create_subprocess_shell()"),
    "os.listdir": ("unordered", "os.listdir()"), "os.scandir": ("unordered", "os.scandir()"),
    "os.walk": ("unordered", "os.walk()"), "glob.glob": ("unordered", "glob.glob()"),
    "glob.iglob": ("unordered", "glob.iglob()"),
    "json.load": ("io-order", "json.load()"), "json.loads": ("io-order", "json.loads()"),
    "yaml.safe_load": ("io-order", "yaml.safe_load()"), "yaml.load": ("io-order", "yaml.load()"),
}
#: Method names (on any receiver) -> (kind, what): values whose type the walk cannot see.
SOURCE_METHODS: Mapping[str, tuple[str, str]] = {
    "list_tools": ("mcp-tools", "MCP list_tools()"),
    "iterdir": ("unordered", "Path.iterdir()"), "glob": ("unordered", "Path.glob()"),
    "rglob": ("unordered", "Path.rglob()"),
    "json": ("io-order", "an HTTP response's .json()"),
}
#: Attribute reads that are sources: resolved dotted name -> (kind, what).
SOURCE_ATTRIBUTES: Mapping[str, tuple[str, str]] = {
    "os.environ": ("env", "os.environ"),
}


@dataclass(frozen=True, slots=True)
class Sink:
    """A call whose arguments become cached prompt slots.

    Attributes:
        pattern: Dotted name or suffix (see :func:`match`).
        api: Human name, e.g. ``anthropic messages.create``.
        slots: Keyword (or ``"0"`` for the first positional argument) -> slot: ``system``,
            ``tools``, ``messages`` (only the first messages and system-role ones count),
            ``body`` (a whole serialized request: per-call values count, ordering does not),
            ``system-pairs`` (LangChain ``(role, text)`` tuples: the system ones count).
        canonical: The callee canonicalizes what it receives (stableprompt's ``ToolSet`` sorts
            tools, ``Tool`` writes canonical JSON): ordering and key-order findings do not
            apply.
    """

    pattern: str
    api: str
    slots: Mapping[str, str]
    canonical: bool = False


_ANTHROPIC = {"system": "system", "tools": "tools", "messages": "messages"}
_CHAT = {"messages": "messages", "tools": "tools", "functions": "tools"}
_RESPONSES = {"instructions": "system", "input": "messages", "tools": "tools"}
_GENAI_CONFIG = {"system_instruction": "system", "tools": "tools"}
_GENAI = {"contents": "messages"}
_CONVERSE = {"system": "system", "toolConfig": "tools", "messages": "messages"}
_AGENT = {"instructions": "system", "system_prompt": "system", "tools": "tools"}

SINKS: tuple[Sink, ...] = (
    Sink("messages.create", "anthropic messages.create", _ANTHROPIC),
    Sink("messages.stream", "anthropic messages.stream", _ANTHROPIC),
    Sink("chat.completions.create", "openai chat.completions.create", _CHAT),
    Sink("chat.completions.parse", "openai chat.completions.parse", _CHAT),
    Sink("chat.completions.stream", "openai chat.completions.stream", _CHAT),
    Sink("responses.create", "openai responses.create", _RESPONSES),
    Sink("responses.parse", "openai responses.parse", _RESPONSES),
    Sink("responses.stream", "openai responses.stream", _RESPONSES),
    Sink("models.generate_content", "google-genai generate_content", _GENAI),
    Sink("models.generate_content_stream", "google-genai generate_content_stream", _GENAI),
    Sink("GenerateContentConfig", "google-genai GenerateContentConfig", _GENAI_CONFIG),
    Sink("converse", "boto3 bedrock-runtime converse", _CONVERSE),
    Sink("converse_stream", "boto3 bedrock-runtime converse_stream", _CONVERSE),
    Sink("invoke_model", "boto3 bedrock-runtime invoke_model", {"body": "body"}),
    Sink("litellm.completion", "litellm completion", _CHAT),
    Sink("litellm.acompletion", "litellm acompletion", _CHAT),
    Sink("pydantic_ai.Agent", "pydantic-ai Agent", _AGENT),
    Sink("agents.Agent", "openai-agents Agent", _AGENT),
    *(Sink(p, "langchain SystemMessage", {"content": "system", "0": "system"})
      for p in ("langchain_core.messages.SystemMessage",
                "langchain_core.messages.system.SystemMessage",
                "langchain.schema.SystemMessage", "langchain.schema.messages.SystemMessage")),
    Sink("ChatPromptTemplate.from_messages", "langchain ChatPromptTemplate",
         {"messages": "system-pairs", "0": "system-pairs"}),
    Sink("bind_tools", "langchain bind_tools", {"tools": "tools", "0": "tools"}),
    Sink("stableprompt.PromptBuilder", "stableprompt PromptBuilder",
         {"system": "system", "tools": "tools"}, canonical=True),
    Sink("stableprompt.ToolSet", "stableprompt ToolSet", {"tools": "tools", "0": "tools"},
         canonical=True),
)
BUILDER_SINK = SINKS[-2]
#: Decorators whose function's return value is the system prompt: ``@agent.system_prompt``,
#: ``@agent.instructions`` (Pydantic AI), matched on the decorator's last name.
SYSTEM_DECORATORS = frozenset({"system_prompt", "instructions"})
#: Methods of a ``stableprompt.PromptBuilder`` value that take head content.
BUILDER_METHODS: Mapping[str, str] = {"system": "system", "tools": "tools", "tool": "tools"}


def last_name(pattern: str) -> str:
    """The last dotted component: the key of the pattern indexes (``match`` needs it equal)."""
    return pattern.rpartition(".")[2]


#: SOURCE_CALLS by last component: ``now`` -> ``[("datetime.datetime.now", kind, what)]``.
SOURCE_INDEX: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    key: tuple((p, k, w) for p, (k, w) in SOURCE_CALLS.items() if last_name(p) == key)
    for key in {last_name(p) for p in SOURCE_CALLS}}
#: Last components of LLM_CALLS.
LLM_LAST = frozenset(last_name(p) for p in LLM_CALLS)


def match(name: str, pattern: str) -> bool:
    """Whether dotted ``name`` ends with ``"." + pattern``, or is ``pattern`` when that is
    dotted itself: a bare ``converse(...)`` is some local function, ``x.converse(...)`` the
    client method."""
    return name.endswith("." + pattern) or (name == pattern and "." in pattern)
