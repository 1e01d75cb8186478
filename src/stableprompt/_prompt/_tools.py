"""Tool definitions with one canonical byte form, invariant to orders that carry no meaning.

A :class:`Tool` is validated and canonicalized once, at construction: name checked, input schema
checked as JSON Schema 2020-12, set-like arrays sorted, keys sorted (except ``properties``
names, below), serialized to canonical JSON. A :class:`ToolSet` orders tools by name. The
result: the same logical tools give the same bytes whatever the insertion order of tools, dict
keys or ``required`` entries; and a head, once frozen, keeps its bytes for the session.

Canonical form of an input schema (walked by schema structure, so a *property* literally named
``"required"`` or ``"type"`` is a name, never a keyword):

- object keys sorted by code point, **except the member names of a** ``properties`` **map,
  kept in the order written**: OpenAI Structured Outputs generate fields in the schema's key
  order, and Gemini's ``propertyOrdering`` exists to pin that order, so the order is what a
  model writes, not noise (sources in :mod:`._tool_schema`). Two schemas that differ only in
  ``properties`` order are two different schemas;
- set-like arrays sorted: ``required``, each ``dependentRequired`` value, array-valued
  ``dependencies`` entries, and ``type`` when it is a list of type names;
- order-bearing arrays kept as given: ``enum``, ``prefixItems``, ``anyOf``, ``oneOf``, ``allOf``,
  ``items`` as a list, ``examples``, ``default``, ``const`` and any unknown keyword.

Opt-in repair (``repair=True``) fixes non-standard schemas common in the wild (BFCL data,
hand-written tools) and records each fix as a :class:`Repair`; without it such a schema raises
:class:`~stableprompt.ToolSchemaError` (code ``tool-schema-nonstandard``) naming the pointer.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._canonical import canonical_json, escape_pointer, loads, show_value
from .._exceptions import (
    DuplicateToolError,
    ToolError,
    ToolNameError,
    ToolSchemaError,
)
from .._public import public
from .._wire import anthropic, openai_chat, openai_responses
from ._suggest import check_keywords
from ._tool_schema import EMPTY_OBJECT_SCHEMA, Repair, canonical_schema

__all__ = ["Repair", "Tool", "ToolSet"]

_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
def _check_name(name: Any, repair: bool, repairs: list[Repair]) -> str:
    if type(name) is not str:
        raise ToolNameError(f"tool name must be a str, got {type(name).__name__}")
    if _NAME_RE.fullmatch(name):
        return name
    fixed = name.replace(".", "_")
    dotted = fixed != name and _NAME_RE.fullmatch(fixed) is not None
    if dotted and repair:
        repairs.append(Repair(fixed, None, name, fixed, "name-dot"))
        return fixed
    hint = " (pass repair=True to replace '.' with '_')" if dotted else ""
    raise ToolNameError(f"tool name {show_value(name)} breaks ^[a-zA-Z0-9_-]{{1,64}}${hint}",
                        tool=name)


def _check_meta(name: str, description: Any, strict: Any) -> None:
    if description is not None and type(description) is not str:
        raise ToolError(
            f"description must be a str or None, got {type(description).__name__}",
            tool=name,
            code="tool-description-invalid",
        )
    if strict is not None and type(strict) is not bool:
        raise ToolError(
            f"strict must be a bool or None, got {type(strict).__name__}",
            tool=name,
            code="tool-strict-invalid",
        )


def _json_str(value: str) -> bytes:
    return canonical_json(value)


_SCHEMA_NAMES = ("input_schema", "parameters")
_TOOL_ALIASES = {k: _SCHEMA_NAMES for k in ("schema", "json_schema", "args_schema", "input",
                                            "arguments", "args", "params", "inputSchema")}
"""Other spellings of the schema argument (MCP's ``inputSchema``, first guesses)."""


class Tool:
    """One tool (function) definition, validated and canonicalized once, then immutable.

    Args:
        name: Tool name matching ``^[a-zA-Z0-9_-]{1,64}$`` (Anthropic and OpenAI rule; OpenAI SDK
            ``FunctionDefinition.name`` docstring).
        description: What the tool does, or ``None`` to omit the field everywhere.
        input_schema: JSON Schema 2020-12 object schema (``"type": "object"``) of the
            arguments. Copied; later changes to the caller's dict do not affect the tool.
        parameters: The same schema under OpenAI's name (give one of the two).
        strict: Provider strict-schema flag, or ``None`` (default) to omit it. When set it is
            part of the canonical bytes and sent as ``strict`` to every provider shape.
        repair: Fix common non-standard schemas, recording each fix in :attr:`repairs`.

    Raises:
        ToolNameError: Bad name (code ``tool-name-invalid``).
        ToolSchemaError: ``pointer`` names the place inside the schema; codes
            ``tool-schema-invalid`` (not valid 2020-12, or a duplicate in a set-like array),
            ``tool-schema-nonstandard`` (repairable; pass ``repair=True``),
            ``tool-schema-not-object`` (top level is not ``"type": "object"``),
            ``canonical-nan`` / ``canonical-key`` / ... (no canonical JSON form).
        ToolError: ``description`` or ``strict`` of the wrong type; neither or both of
            ``input_schema`` and ``parameters`` (code ``tool-schema-missing``).
        ArgumentNameError: an unknown keyword such as ``schema=`` (code ``argument-name``);
            the message names ``input_schema`` / ``parameters``.
    """

    __slots__ = ("_bytes", "_description", "_digest", "_name", "_repairs", "_schema_bytes",
                 "_strict")  # fmt: skip

    _name: str
    _description: str | None
    _strict: bool | None
    _schema_bytes: bytes
    _bytes: bytes
    _repairs: tuple[Repair, ...]
    _digest: str | None

    @check_keywords("Tool", aliases=_TOOL_ALIASES)
    def __init__(
        self,
        name: str,
        description: str | None,
        input_schema: Mapping[str, Any] | None = None,
        *,
        parameters: Mapping[str, Any] | None = None,
        strict: bool | None = None,
        repair: bool = False,
    ) -> None:
        if (input_schema is None) == (parameters is None):
            raise ToolError(
                "give the argument schema once: input_schema (Anthropic's name) or parameters "
                f"(OpenAI's name), got {'both' if parameters is not None else 'neither'}",
                tool=name if isinstance(name, str) else None, code="tool-schema-missing")
        schema = input_schema if input_schema is not None else parameters
        self._setup(name, description, schema, strict, repair, ())

    def _setup(
        self,
        name: Any,
        description: Any,
        input_schema: Any,
        strict: Any,
        repair: bool,
        prior: tuple[Repair, ...],
    ) -> None:
        repairs: list[Repair] = []
        name = _check_name(name, repair, repairs)
        _check_meta(name, description, strict)
        if isinstance(input_schema, Mapping):
            input_schema = _plain(input_schema, name, "input schema")
        schema_bytes = canonical_schema(input_schema, name, repair, repairs)
        parts = []
        if description is not None:
            parts.append(b'"description":' + _json_str(description))
        parts.append(b'"input_schema":' + schema_bytes)
        parts.append(b'"name":' + _json_str(name))
        if strict is not None:
            parts.append(b'"strict":' + (b"true" if strict else b"false"))
        setattr_ = object.__setattr__
        setattr_(self, "_name", name)
        setattr_(self, "_description", description)
        setattr_(self, "_strict", strict)
        setattr_(self, "_schema_bytes", schema_bytes)
        setattr_(self, "_bytes", b"{" + b",".join(parts) + b"}")
        named = tuple(r if r.tool == name else _renamed(r, name) for r in prior)
        setattr_(self, "_repairs", named + tuple(repairs))
        setattr_(self, "_digest", None)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Tool is immutable (cannot set {key!r}); build a new Tool")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Tool is immutable (cannot delete {key!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tool._from_parts, (self._name, self._description, self._schema_bytes,
                                   self._strict, self._repairs))  # fmt: skip

    @classmethod
    def _from_parts(cls, name: str, description: str | None, schema_bytes: bytes,
                    strict: bool | None, repairs: tuple[Repair, ...]) -> Tool:
        """Rebuild a pickled tool from its canonical parts, repairs kept."""
        tool = cls(name, description, loads(schema_bytes), strict=strict)
        object.__setattr__(tool, "_repairs", repairs)
        return tool

    # --- read-only views -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Tool name (after repair, if any)."""
        return self._name

    @property
    def description(self) -> str | None:
        """Description, or ``None`` when omitted."""
        return self._description

    @property
    def strict(self) -> bool | None:
        """Provider strict flag, or ``None`` when not set (then never sent)."""
        return self._strict

    @property
    def input_schema(self) -> dict[str, Any]:
        """A fresh deep copy of the canonical input schema (keys in sorted order, ``properties``
        in the order given)."""
        result: dict[str, Any] = loads(self._schema_bytes)
        return result

    @property
    def schema_bytes(self) -> bytes:
        """Canonical JSON bytes of the input schema alone (UTF-8, sorted keys except
        ``properties`` names, compact)."""
        return self._schema_bytes

    @property
    def canonical_bytes(self) -> bytes:
        """Canonical JSON of ``{"description", "input_schema", "name"}`` (plus ``"strict"``
        when set); computed once at construction: ``canonical_json(self.to_dict())`` with
        the schema's ``properties`` kept in their order."""
        return self._bytes

    @property
    def digest(self) -> str:
        """SHA-256 hex digest of :attr:`canonical_bytes` (64 characters)."""
        if self._digest is None:
            object.__setattr__(self, "_digest", hashlib.sha256(self._bytes).hexdigest())
        assert self._digest is not None
        return self._digest

    @property
    def repairs(self) -> tuple[Repair, ...]:
        """Fixes applied by ``repair=True``, in walk order; empty when none were needed."""
        return self._repairs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tool):
            return NotImplemented
        return self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"Tool(name={self._name!r}, canonical_bytes={len(self._bytes)} bytes)"

    # --- shapes ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return the canonical dict (a deep copy; keys sorted, ``properties`` in the order
        given): ``{"description",
        "input_schema", "name"}`` plus ``"strict"`` when set, ``"description"`` omitted when
        ``None``."""
        result: dict[str, Any] = loads(self._bytes)
        return result

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic Messages ``tools[]`` entry (see :func:`stableprompt._wire.anthropic.tool`):
        ``{"name", "description", "input_schema"}`` (plus ``"strict"`` when set)."""
        return anthropic.tool(self)

    def to_openai_chat(self) -> dict[str, Any]:
        """OpenAI Chat Completions ``tools[]`` entry (see
        :func:`stableprompt._wire.openai_chat.tool`): ``{"type": "function", "function":
        {"name", "description", "parameters"}}`` (plus ``"strict"`` in ``function`` when set)."""
        return openai_chat.tool(self)

    def to_openai_responses(self) -> dict[str, Any]:
        """OpenAI Responses ``tools[]`` entry (see
        :func:`stableprompt._wire.openai_responses.tool`): ``{"type": "function", "name",
        "description", "parameters"}`` (plus ``"strict"`` when set)."""
        return openai_responses.tool(self)

    # --- constructors ----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, repair: bool = False) -> Tool:
        """Build a tool from a provider-shaped dict.

        Accepted shapes (detected by keys):

        - Anthropic: ``{"name", "description"?, "input_schema", "strict"?, "type": "custom"?}``
        - OpenAI Chat: ``{"type": "function", "function": {"name", "description"?,
          "parameters"?, "strict"?}}``
        - OpenAI Responses: ``{"type": "function", "name", "description"?, "parameters"?,
          "strict"?}``
        - BFCL / bare function definition: ``{"name", "description"?, "parameters"}``
          (BFCL multi-turn docs add ``"response"``, dropped only with ``repair=True``).

        Args:
            d: The dict; not modified.
            repair: Fix non-standard schemas and names, recording each :class:`Repair`.

        Raises:
            ToolError: Unknown shape or unsupported key (code ``tool-shape-unknown``).
            ToolNameError, ToolSchemaError: As for :class:`Tool`. A missing ``parameters`` is a
                ToolSchemaError (code ``tool-schema-nonstandard``) unless ``repair=True``, which
                writes ``{"type": "object", "properties": {}}`` (rule ``parameters-missing``).
        """
        if not isinstance(d, Mapping):
            raise ToolError(
                f"tool must be a dict, got {type(d).__name__}", code="tool-shape-unknown"
            )
        d = _plain(d, None, "tool dict")
        if isinstance(d.get("function"), Mapping):
            d = {**d, "function": _plain(d["function"], None, "tool 'function'")}
        body: Mapping[str, Any]
        if "input_schema" in d:
            body, schema_key, allowed = d, "input_schema", _ANTHROPIC_KEYS
            if d.get("type", "custom") != "custom":
                _unknown_shape(d, "Anthropic tools have no 'type' other than 'custom'")
        elif d.get("type") == "function" and "function" in d:
            _only(d, frozenset(("type", "function")), d.get("name"))
            body = d["function"]
            if not isinstance(body, Mapping):
                _unknown_shape(d, "'function' must be a dict")
            schema_key, allowed = "parameters", _FUNCTION_KEYS
        elif d.get("type") == "function":
            body, schema_key, allowed = d, "parameters", _RESPONSES_KEYS
        elif "name" in d and "type" not in d:
            body, schema_key, allowed = d, "parameters", _BFCL_KEYS
        else:
            _unknown_shape(d, "expected an Anthropic, OpenAI Chat, OpenAI Responses or BFCL tool")
        name = body.get("name")
        if "name" not in body:
            _unknown_shape(d, "missing 'name'")
        label = name if type(name) is str else show_value(name)  # for messages before checks
        prior: list[Repair] = []
        extra = set(body) - allowed
        if extra == {"response"} and allowed is _BFCL_KEYS and repair:
            prior.append(
                Repair(label, None, copy.deepcopy(body["response"]), None, "response-dropped")
            )
        else:
            _only(body, allowed, name)
        schema = body.get(schema_key)
        if schema_key not in body:
            if not repair:
                raise ToolSchemaError(
                    f"no {schema_key!r}; give {{'type': 'object', 'properties': {{}}}} for a "
                    "tool without arguments, or pass repair=True",
                    tool=label,
                    pointer="",
                    code="tool-schema-nonstandard",
                )
            schema = EMPTY_OBJECT_SCHEMA
            prior.append(
                Repair(label, "", None, dict(EMPTY_OBJECT_SCHEMA), "parameters-missing")
            )
        tool = cls.__new__(cls)
        tool._setup(name, body.get("description"), schema, body.get("strict"), repair, tuple(prior))
        return tool

    @classmethod
    def from_pydantic(
        cls,
        model: type[Any],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool | None = None,
    ) -> Tool:
        """Build a tool from a pydantic model class (its fields are the tool arguments).

        The schema is ``model.model_json_schema()`` as pydantic emits it (deterministic; titles
        and ``$defs`` kept), without the top-level ``description`` pydantic copies from the
        class docstring when that text is the tool's description (never sent twice). ``name``
        defaults to the class name, ``description`` to the class docstring (cleaned; ``None``
        when there is none).

        Raises:
            ToolError: ``model`` is not a pydantic BaseModel subclass (code ``tool-invalid``).
            ToolSchemaError: pydantic cannot produce a JSON schema, or it is not valid.
        """
        from pydantic import BaseModel

        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ToolError(f"from_pydantic needs a pydantic BaseModel subclass, got {model!r}")
        tool_name = model.__name__ if name is None else name
        if description is None and model.__doc__:
            description = inspect.cleandoc(model.__doc__)
        try:
            schema = model.model_json_schema()
        except Exception as exc:  # pydantic raises several unrelated types here
            raise ToolSchemaError(
                f"pydantic cannot build a JSON schema for {model.__name__}: {exc}",
                tool=tool_name,
                pointer="",
            ) from exc
        ref = schema.get("$ref")
        defs = schema.get("$defs")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
            # Self-referencing models: pydantic puts the model itself in $defs and points at
            # it from the top. Inline it so the top level is an object schema; $defs stay for
            # the recursive references.
            target = defs.get(ref[len("#/$defs/"):])
            if isinstance(target, dict):
                rest = {k: v for k, v in schema.items() if k not in ("$ref", "$defs")}
                schema = {**target, **rest, "$defs": defs}
        if description is not None and schema.get("description") == description:
            # pydantic copies the class docstring into the schema: it is the tool's
            # description already, so sending it twice would only cost tokens.
            schema = {k: v for k, v in schema.items() if k != "description"}
        return cls(tool_name, description, schema, strict=strict)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool | None = None,
    ) -> Tool:
        """Build a tool from a typed Python function's signature and Google-style docstring.

        Parameters without defaults are required. The docstring's first paragraph is the
        description (lines joined with spaces); ``Args:`` entries become property descriptions.
        The schema comes from pydantic (``TypeAdapter`` over the signature), so it has
        ``"additionalProperties": false`` and pydantic's property titles.

        Raises:
            ToolSchemaError: ``pointer`` ``/properties/<param>``; codes ``tool-param-untyped``
                (no annotation), ``tool-param-unsupported`` (``*args``, ``**kwargs``,
                positional-only), ``tool-docstring-mismatch`` (``Args:`` names an unknown
                parameter), ``tool-schema-invalid`` (pydantic cannot describe a type).
        """
        tool_name = getattr(fn, "__name__", "") if name is None else name
        doc = inspect.getdoc(fn) or ""
        summary, arg_docs = _parse_docstring(doc)
        if description is None:
            description = summary
        schema = _function_schema(fn, str(tool_name), arg_docs)
        return cls(tool_name, description, schema, strict=strict)


_ANTHROPIC_KEYS = frozenset(("name", "description", "input_schema", "strict", "type"))
_FUNCTION_KEYS = frozenset(("name", "description", "parameters", "strict"))
_RESPONSES_KEYS = frozenset(("type", "name", "description", "parameters", "strict"))
_BFCL_KEYS = frozenset(("name", "description", "parameters"))


def _plain(value: Mapping[str, Any], tool: str | None, what: str) -> dict[str, Any]:
    """``value`` as a plain dict: a user ``Mapping`` is copied once here, so none of its
    methods runs later; one that raises is a typed error (code ``tool-input-unreadable``)."""
    if type(value) is dict:
        return value
    try:
        return dict(value.items())
    except Exception as exc:
        raise ToolError(f"{what} cannot be read as a JSON object ({type(exc).__name__})",
                        tool=tool, code="tool-input-unreadable") from exc


def _unknown_shape(d: Mapping[str, Any], why: str) -> typing.NoReturn:
    name = d.get("name")
    raise ToolError(
        f"unknown tool dict shape ({why}); keys: {sorted(map(str, d))}",
        tool=name if type(name) is str else None,
        code="tool-shape-unknown",
    )


def _only(d: Mapping[str, Any], allowed: frozenset[str], name: Any) -> None:
    extra = sorted(map(str, set(d) - allowed))
    if extra:
        hint = " ('response' is dropped with repair=True)" if "response" in extra else ""
        raise ToolError(
            f"unsupported key(s) {extra} in tool dict; supported: {sorted(allowed)}{hint}",
            tool=name if type(name) is str else None,
            code="tool-shape-unknown",
        )


def _renamed(r: Repair, name: str) -> Repair:
    return Repair(name, r.pointer, r.before, r.after, r.rule)


_SECTION_RE = re.compile(r"^(Args|Arguments|Parameters)\s*:\s*$")
_ENTRY_RE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str | None, dict[str, str]]:
    """Split a cleaned Google-style docstring into (summary, {arg name: description})."""
    lines = doc.splitlines()
    first: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION_RE.match(line.strip()):
            break
        first.append(line.strip())
    summary = " ".join(first) or None
    args: dict[str, str] = {}
    start = next((i for i, ln in enumerate(lines) if _SECTION_RE.match(ln.strip())), None)
    if start is None:
        return summary, args
    base = len(lines[start]) - len(lines[start].lstrip())
    entry_indent: int | None = None
    current: str | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base:
            break
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY_RE.match(line.strip())
        if indent == entry_indent and match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return summary, args


def _function_schema(fn: Callable[..., Any], tool: str, arg_docs: dict[str, str]) -> dict[str, Any]:
    from pydantic import Field, TypeAdapter

    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolSchemaError(
            f"cannot read the signature of {fn!r}: {exc}", tool=tool, pointer=""
        ) from exc
    params = []
    for pname, param in signature.parameters.items():
        pointer = "/properties/" + escape_pointer(pname)
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolSchemaError(
                f"parameter {pname!r} is {param.kind.description}; tool arguments are keyword "
                "arguments",
                tool=tool,
                pointer=pointer,
                code="tool-param-unsupported",
            )
        if pname not in hints:
            raise ToolSchemaError(
                f"parameter {pname!r} has no type annotation; annotate it (e.g. {pname}: str)",
                tool=tool,
                pointer=pointer,
                code="tool-param-untyped",
            )
        annotation: Any = hints[pname]
        doc = arg_docs.get(pname)
        if doc is not None:
            annotation = typing.Annotated[annotation, Field(description=doc)]
        params.append(param.replace(annotation=annotation))
    unknown = sorted(set(arg_docs) - set(signature.parameters))
    if unknown:
        raise ToolSchemaError(
            f"docstring Args: documents {unknown}, which are not parameters",
            tool=tool,
            pointer="/properties/" + escape_pointer(unknown[0]),
            code="tool-docstring-mismatch",
        )

    def shim(*args: Any, **kwargs: Any) -> None:  # carries the annotated signature only
        return None

    shim.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    shim.__annotations__ = {p.name: p.annotation for p in params}
    shim.__name__ = shim.__qualname__ = tool
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(typing.cast(Any, shim))
        schema: dict[str, Any] = adapter.json_schema()
    except Exception as exc:  # pydantic raises several unrelated types here
        raise ToolSchemaError(
            f"pydantic cannot describe the parameters of {tool!r}: {exc}", tool=tool, pointer=""
        ) from exc
    return schema


class ToolSet:
    """An immutable set of tools in canonical order (by name, code-point order).

    Args:
        tools: Any iterable of :class:`Tool`; order does not matter.

    Raises:
        DuplicateToolError: Two tools share a name (code ``tool-duplicate``; ``tool`` names it).
        ToolError: An element is not a Tool (code ``tool-invalid``).
    """

    __slots__ = ("_by_name", "_bytes", "_digest", "_tools")

    _tools: tuple[Tool, ...]
    _by_name: dict[str, Tool]
    _bytes: bytes
    _digest: str

    def __init__(self, tools: Iterable[Tool]) -> None:
        by_name: dict[str, Tool] = {}
        if not isinstance(tools, Iterable) or isinstance(tools, (str, bytes, Mapping)):
            raise ToolError(f"ToolSet takes an iterable of Tool objects, got "
                            f"{type(tools).__name__}", code="tool-shape-unknown")
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ToolError(f"ToolSet takes Tool objects, got {type(tool).__name__}")
            if tool.name in by_name:
                raise DuplicateToolError(
                    f"two tools are named {tool.name!r}; tool names must be unique",
                    tool=tool.name,
                )
            by_name[tool.name] = tool
        ordered = tuple(by_name[n] for n in sorted(by_name))
        data = b"[" + b",".join(t.canonical_bytes for t in ordered) + b"]"
        setattr_ = object.__setattr__
        setattr_(self, "_tools", ordered)
        setattr_(self, "_by_name", {t.name: t for t in ordered})
        setattr_(self, "_bytes", data)
        setattr_(self, "_digest", hashlib.sha256(data).hexdigest())

    @classmethod
    def from_dicts(cls, dicts: Iterable[Mapping[str, Any]], *, repair: bool = False) -> ToolSet:
        """Build from provider-shaped dicts (see :meth:`Tool.from_dict`).

        Raises:
            ToolError: ``dicts`` is not an iterable of dicts (code ``tool-shape-unknown``), and
                as :meth:`Tool.from_dict` for each.
        """
        if not isinstance(dicts, Iterable) or isinstance(dicts, (str, bytes, Mapping)):
            raise ToolError(f"from_dicts takes an iterable of tool dicts, got "
                            f"{type(dicts).__name__}", code="tool-shape-unknown")
        return cls(Tool.from_dict(d, repair=repair) for d in dicts)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"ToolSet is immutable (cannot set {key!r}); build a new ToolSet")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"ToolSet is immutable (cannot delete {key!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolSet, (self._tools,))

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        """Return the tool named ``name``; raises ``KeyError`` when there is none."""
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolSet):
            return NotImplemented
        return self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"ToolSet({len(self._tools)} tools, digest={self._digest[:12]})"

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in canonical order."""
        return tuple(self._by_name)

    @property
    def canonical_bytes(self) -> bytes:
        """Canonical JSON array of the tools' canonical dicts in name order. Identical for any
        permutation of the input and any key order inside schemas."""
        return self._bytes

    @property
    def digest(self) -> str:
        """SHA-256 hex digest of :attr:`canonical_bytes` (64 characters)."""
        return self._digest

    @property
    def repairs(self) -> tuple[Repair, ...]:
        """All tools' repairs, in canonical tool order."""
        return tuple(r for t in self._tools for r in t.repairs)

    def to_dicts(self) -> list[dict[str, Any]]:
        """Canonical dicts (see :meth:`Tool.to_dict`) in canonical order."""
        return [t.to_dict() for t in self._tools]

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Anthropic ``tools`` list in canonical order (see :meth:`Tool.to_anthropic`)."""
        return [t.to_anthropic() for t in self._tools]

    def to_openai_chat(self) -> list[dict[str, Any]]:
        """OpenAI Chat ``tools`` list in canonical order (see :meth:`Tool.to_openai_chat`)."""
        return [t.to_openai_chat() for t in self._tools]

    def to_openai_responses(self) -> list[dict[str, Any]]:
        """OpenAI Responses ``tools`` list in canonical order."""
        return [t.to_openai_responses() for t in self._tools]


public(Tool, ToolSet)
