"""JSON Schema canonicalization for tool input schemas: structure walk, opt-in repair, validation.

Walks a schema by its structure (``properties`` maps names to subschemas, ``items`` holds a
subschema, ...), so a *property* literally named ``"required"`` is a name, never a keyword.
Set-like arrays are sorted, order-bearing arrays kept; non-standard forms seen in the wild are
fixed only with ``repair=True`` and recorded as :class:`Repair`.

Which keys are sorted (:func:`canonical_schema`): every object's keys, by code point, except
the member names of a ``properties`` map, which keep the order they were written in. That
order is meaning: OpenAI Structured Outputs generate an object's fields in the schema's key
order ("outputs will be produced in the same order as the ordering of keys in the schema",
platform.openai.com/docs/guides/structured-outputs, "Key ordering"), and Gemini documents the
same for its ``propertyOrdering`` field, which exists to pin that order
(ai.google.dev/gemini-api/docs/structured-output, "Property ordering";
``shared/reference/PROVIDERS.md`` section 15). Sorting them would change what a model writes, so
two schemas that differ only in ``properties`` order are different schemas here (different
bytes, different fingerprints). Keyword order (``type`` before ``description``...), ``$defs``,
``patternProperties`` and ``dependentSchemas`` names, and keys inside ``enum`` / ``default`` /
``const`` / ``examples`` values carry no such meaning and are sorted; arrays keep their order
(``propertyOrdering``, ``enum``, ``prefixItems``...), except the set-like ones (``required``,
``type`` lists, ``dependentRequired`` values).

:func:`properties_orders` and :func:`with_properties_orders` read and set those orders on a
schema as sent (the stabilizer pins a harness's first-seen order with them, lint and
``diff`` tell a ``properties`` reorder from a harmless key reorder).
See :mod:`stableprompt._prompt._tools`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

from .._canonical import MAX_NESTING, show_value
from .._exceptions import CanonicalizationError, ToolSchemaError
from .._public import public
from .._wire._schema_order import (
    _SCHEMA_LISTS,
    _SCHEMA_MAPS,
    _SCHEMA_ONE,
    ORDERED_MAPS,
    _pointer,
    properties_orders,
    schema_json,
    with_properties_orders,
)

__all__ = ["EMPTY_OBJECT_SCHEMA", "ORDERED_MAPS", "Repair", "canonical_schema", "properties_orders",
           "schema_json", "with_properties_orders"]

_SIMPLE_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
# Python-style type names seen in the wild (BFCL "Gorilla" schemas) -> JSON Schema type.
_TYPE_ALIASES = {
    "dict": "object",
    "float": "number",
    "int": "integer",
    "tuple": "array",
    "list": "array",
    "bool": "boolean",
    "str": "string",
}
_REMOVED = object()  # sentinel: the repaired keyword is dropped

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

@dataclass(frozen=True, slots=True)
class Repair:
    """One fix applied by ``repair=True``; never silent, always recorded on the tool.

    Attributes:
        tool: Name of the tool (after any name repair).
        pointer: JSON pointer (RFC 6901) inside the tool's input schema, e.g.
            ``"/properties/unit/type"``; ``None`` when the fix concerns the tool itself
            (rules ``name-dot``, ``response-dropped``).
        before: The value as given (``None`` when the keyword was absent).
        after: The value written (``None`` when the keyword was removed).
        rule: Stable slug: ``type-dict``, ``type-float``, ``type-int``, ``type-tuple``,
            ``type-list``, ``type-bool``, ``type-str``, ``type-any`` (type removed: any value),
            ``type-spelling`` (case/whitespace, e.g. ``"integer "``, ``"String"``),
            ``required-bool`` (draft-3 ``"required": true`` on a property, lifted into the parent's
            ``required`` list), ``optional-removed``, ``type-missing`` (top-level ``"object"``
            added), ``parameters-missing`` (empty object schema added), ``name-dot`` (``.`` ->
            ``_``, as BFCL does for every provider), ``response-dropped`` (BFCL ``response``
            output schema, not part of a tool definition).
    """

    tool: str
    pointer: str | None
    before: Any
    after: Any
    rule: str


class _Ctx:
    """Per-tool walk state: tool name, repair mode and the repairs recorded so far."""

    __slots__ = ("repair", "repairs", "tool")

    def __init__(self, tool: str, repair: bool) -> None:
        self.tool = tool
        self.repair = repair
        self.repairs: list[Repair] = []

    def fix(self, path: tuple[str | int, ...], before: Any, after: Any, rule: str) -> Any:
        """Record a repair (repair mode) or raise naming the pointer and the fix."""
        pointer = _pointer(path)
        if not self.repair:
            what = "remove it" if after is _REMOVED else f"use {show_value(after)}"
            raise ToolSchemaError(
                f"non-standard JSON Schema {path[-1]!r}: {show_value(before)} ({rule}); {what}, "
                "or pass "
                "repair=True to Tool.from_dict / ToolSet.from_dicts to fix it with a recorded "
                "Repair",
                tool=self.tool,
                pointer=pointer,
                code="tool-schema-nonstandard",
            )
        self.repairs.append(
            Repair(self.tool, pointer, before, None if after is _REMOVED else after, rule)
        )
        return after


def _fix_type_name(value: str, path: tuple[str | int, ...], ctx: _Ctx) -> Any:
    if value in _SIMPLE_TYPES:
        return value
    key = value.strip().lower()
    if key in _SIMPLE_TYPES:
        return ctx.fix(path, value, key, "type-spelling")
    if key in _TYPE_ALIASES:
        return ctx.fix(path, value, _TYPE_ALIASES[key], f"type-{key}")
    if key == "any":
        return ctx.fix(path, value, _REMOVED, "type-any")
    return value  # unknown: left for the validator to report


def _norm_type(value: Any, path: tuple[str | int, ...], ctx: _Ctx) -> Any:
    if type(value) is str:
        return _fix_type_name(value, path, ctx)
    if type(value) is not list or not value:
        return value  # not a list, or an empty one: left for the validator to report
    fixed = []
    for index, item in enumerate(value):
        item = _fix_type_name(item, (*path, index), ctx) if type(item) is str else item
        if item is not _REMOVED:
            fixed.append(item)
    if not fixed:
        return _REMOVED
    if all(type(t) is str and t in _SIMPLE_TYPES for t in fixed) and len(set(fixed)) == len(fixed):
        fixed.sort()  # a set of type names; anything else is left for the validator to report
    return fixed


def _set_like(value: Any, path: tuple[str | int, ...], ctx: _Ctx) -> Any:
    """Sort a list of strings (a set); duplicates raise. Other values go to the validator."""
    if type(value) is not list or not all(type(item) is str for item in value):
        return value
    if len(set(value)) != len(value):
        seen: set[str] = set()
        for index, item in enumerate(value):
            if item in seen:
                raise ToolSchemaError(
                    f"duplicate entry {show_value(item)} in {path[-1]!r} (a set: list each name "
                    "once)",
                    tool=ctx.tool,
                    pointer=_pointer((*path, index)),
                )
            seen.add(item)
    return sorted(value)


def _norm(node: Any, path: tuple[str | int, ...], ctx: _Ctx, in_properties: bool = False) -> Any:
    """Return the canonical (and, in repair mode, repaired) copy of one schema node.

    New containers are built for schema nodes only; non-schema values (``enum``, ``default``,
    ...) are shared with the input and copied later by the serialize/parse round trip.
    """
    if type(node) is not dict:
        return node  # boolean schema, or garbage the validator reports
    if len(path) >= MAX_NESTING:
        raise ToolSchemaError(
            f"input schema nests deeper than {MAX_NESTING} levels here (or is circular)",
            tool=ctx.tool, pointer=_pointer(path[:MAX_NESTING]), code="tool-schema-depth")
    out: dict[str, Any] = {}
    lifted: list[str] = []
    for key, value in node.items():
        if key == "type":
            if type(value) is not str or value not in _SIMPLE_TYPES:  # common case: no work
                value = _norm_type(value, (*path, key), ctx)
                if value is _REMOVED:
                    continue
        elif key in _SCHEMA_MAPS:
            if type(value) is dict:
                sub_path = (*path, key)
                is_props = key == "properties"
                mapped = {}
                for name, sub in value.items():
                    if is_props and type(sub) is dict and sub.get("required") is True:
                        lifted.append(name)
                    mapped[name] = _norm(sub, (*sub_path, name), ctx, is_props)
                value = mapped
        elif key == "required":
            if in_properties and type(value) is bool:
                ctx.fix((*path, key), value, _REMOVED, "required-bool")
                continue
            value = _set_like(value, (*path, key), ctx)
        elif key == "items":
            if type(value) is list:
                value = [_norm(sub, (*path, key, i), ctx) for i, sub in enumerate(value)]
            else:
                value = _norm(value, (*path, key), ctx)
        elif key in _SCHEMA_ONE:
            value = _norm(value, (*path, key), ctx)
        elif key in _SCHEMA_LISTS:
            if type(value) is list:
                value = [_norm(sub, (*path, key, i), ctx) for i, sub in enumerate(value)]
        elif key == "dependentRequired":
            if type(value) is dict:
                value = {n: _set_like(v, (*path, key, n), ctx) for n, v in value.items()}
        elif key == "dependencies":
            if type(value) is dict:
                value = {
                    n: _set_like(v, (*path, key, n), ctx)
                    if type(v) is list
                    else _norm(v, (*path, key, n), ctx)
                    for n, v in value.items()
                }
        elif key == "optional":
            ctx.fix((*path, key), value, _REMOVED, "optional-removed")
            continue
        out[key] = value
    if lifted:
        required = out.get("required")
        if required is None:
            out["required"] = sorted(lifted)
        elif type(required) is list and all(type(r) is str for r in required):
            out["required"] = sorted(set(required).union(lifted))
    return out


# --- fast, sound JSON Schema 2020-12 meta-validation ---------------------------------------------
# True means "certainly valid against the 2020-12 meta-schema"; False means "not sure": the caller
# then runs jsonschema's Draft202012Validator.check_schema, which decides and names the pointer.
# About 100x faster than check_schema on the common keyword subset (BFCL: 4,178 schemas).

_VOCABULARY = frozenset(
    (
        "$anchor", "$comment", "$defs", "$dynamicAnchor", "$dynamicRef", "$id", "$ref", "$schema",
        "$vocabulary", "default", "deprecated", "description", "examples", "readOnly", "title",
        "writeOnly", "format", "const", "dependentRequired", "enum", "exclusiveMaximum",
        "exclusiveMinimum", "maxContains", "maxItems", "maxLength", "maxProperties", "maximum",
        "minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf",
        "pattern", "required", "type", "uniqueItems", "additionalProperties", "allOf", "anyOf",
        "contains", "dependentSchemas", "else", "if", "items", "not", "oneOf",
        "patternProperties", "prefixItems", "properties", "propertyNames", "then",
        "contentEncoding", "contentMediaType", "contentSchema", "unevaluatedItems",
        "unevaluatedProperties", "$recursiveAnchor", "$recursiveRef", "definitions",
        "dependencies",
    )
)  # fmt: skip
_ANY = frozenset(("default", "const"))
_STRINGS = frozenset(
    ("description", "title", "format", "$comment", "contentEncoding", "contentMediaType")
)
_BOOLS = frozenset(("deprecated", "readOnly", "writeOnly", "uniqueItems"))
_NUMBERS = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
_COUNTS = frozenset(
    (
        "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
        "minContains", "maxContains",
    )
)  # fmt: skip
_ONE_SCHEMA = frozenset(
    (
        "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
        "unevaluatedItems", "unevaluatedProperties",
    )
)  # fmt: skip
_SCHEMA_ARRAYS = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))
_MAPS_OF_SCHEMAS = frozenset(("properties", "dependentSchemas", "$defs"))


def _unique_strings(value: Any) -> bool:
    return (
        type(value) is list
        and all(type(item) is str for item in value)
        and len(set(value)) == len(value)
    )


def _fast_valid(node: Any) -> bool:
    if node is True or node is False:
        return True
    if type(node) is not dict:
        return False
    for key, value in node.items():
        kind = type(value)
        if key in _STRINGS:
            ok = kind is str
        elif key in _ANY:
            ok = True
        elif key == "type":
            if kind is str:
                ok = value in _SIMPLE_TYPES
            else:
                ok = (
                    _unique_strings(value)
                    and len(value) > 0
                    and all(t in _SIMPLE_TYPES for t in value)
                )
        elif key == "required":
            ok = _unique_strings(value)
        elif key in _MAPS_OF_SCHEMAS:
            ok = kind is dict and all(_fast_valid(sub) for sub in value.values())
        elif key in _ONE_SCHEMA:
            ok = _fast_valid(value)
        elif key == "enum" or key == "examples":
            ok = kind is list
        elif key in _SCHEMA_ARRAYS:
            ok = kind is list and len(value) > 0 and all(_fast_valid(sub) for sub in value)
        elif key in _BOOLS:
            ok = kind is bool
        elif key in _NUMBERS:
            ok = kind is int or kind is float
        elif key in _COUNTS:
            ok = kind is int and value >= 0
        elif key == "multipleOf":
            ok = (kind is int or kind is float) and value > 0
        elif key == "dependentRequired":
            ok = kind is dict and all(_unique_strings(v) for v in value.values())
        else:
            ok = key not in _VOCABULARY  # unknown keywords are annotations: any value
        if not ok:
            return False
    return True


def _validate(schema: dict[str, Any], tool: str) -> None:
    """Raise ToolSchemaError unless ``schema`` is valid JSON Schema 2020-12."""
    if _fast_valid(schema):
        return
    try:
        Draft202012Validator.check_schema(schema)
    except RecursionError as exc:  # within MAX_NESTING, but deeper than the validator recurses
        raise ToolSchemaError(
            "input schema nests too deeply for JSON Schema validation",
            tool=tool, pointer="", code="tool-schema-depth") from exc
    except SchemaError as exc:
        raise ToolSchemaError(
            f"input schema is not valid JSON Schema 2020-12: {exc.message}",
            tool=tool,
            pointer=_pointer(tuple(exc.absolute_path)),
        ) from exc


def canonical_schema(schema: Any, tool: str, repair: bool, repairs: list[Repair]) -> bytes:
    """Repair (opt-in), canonicalize and validate one input schema; return its canonical bytes
    (:func:`schema_json`: keys sorted, ``properties`` in the order given)."""
    if type(schema) is not dict:
        raise ToolSchemaError(
            f"input schema must be a dict (a JSON object schema), got {type(schema).__name__}",
            tool=tool,
            pointer="",
        )
    ctx = _Ctx(tool, repair)
    out = _norm(schema, (), ctx)
    if "type" not in out:
        if "type" in schema:  # e.g. "type": "any" removed at the top level
            raise ToolSchemaError(
                'top-level input schema must have "type": "object"',
                tool=tool,
                pointer="/type",
                code="tool-schema-not-object",
            )
        out = {"type": ctx.fix(("type",), None, "object", "type-missing"), **out}
    if out["type"] != "object":
        raise ToolSchemaError(
            'top-level input schema must have "type": "object", got '
            f'{show_value(out["type"])}',
            tool=tool,
            pointer="/type",
            code="tool-schema-not-object",
        )
    try:
        data = schema_json(out)
    except CanonicalizationError as exc:
        raise ToolSchemaError(
            f"input schema has no canonical JSON form: {exc.message}",
            tool=tool,
            pointer=exc.pointer,
            code=exc.code,
        ) from exc
    _validate(out, tool)
    repairs.extend(ctx.repairs)
    return data


public(Repair)
