"""Canonical JSON of a JSON Schema that keeps ``properties`` in the order written.

Every object's keys are sorted, except the member names of a ``properties`` map: their order
is what a model writes (OpenAI Structured Outputs: "outputs will be produced in the same order
as the ordering of keys in the schema", platform.openai.com/docs/guides/structured-outputs,
"Key ordering"; Gemini pins it with ``propertyOrdering``,
ai.google.dev/gemini-api/docs/structured-output, "Property ordering"). The schema is walked
by its structure (``properties`` maps names to subschemas, ``items`` holds one, ...), so a
property literally named ``"properties"`` is a name, never a keyword.

One rule for every schema stableprompt serializes: a tool's input schema
(``_prompt._tool_schema``, which adds repair and validation) and the response schema a
request sends as a cache-key parameter (:func:`param_json`: ``response_format``,
``text.format``, ``output_format`` / ``output_config.format``, Gemini
``generationConfig.responseSchema``); this module sits below both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._canonical import MAX_NESTING, canonical_json, escape_pointer, raw_json
from .._exceptions import CanonicalizationError

__all__ = ["ORDERED_MAPS", "param_json", "param_schemas", "properties_orders", "schema_json",
           "with_properties_orders"]

# Schema structure (JSON Schema 2020-12 plus the draft-7 names still met in the wild).
_SCHEMA_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
)
_SCHEMA_ONE = frozenset(
    (
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "additionalItems",
        "contentSchema",
    )
)
_SCHEMA_LISTS = frozenset(("prefixItems", "anyOf", "oneOf", "allOf"))

ORDERED_MAPS = frozenset(("properties",))
"""Schema keywords whose object value keeps its member order in canonical form (the order in
which a model writes the fields; see the module docstring)."""


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join("/" + escape_pointer(token) for token in path)


def _rebuilt(node: Any, path: tuple[str | int, ...],
             on_map: Callable[[tuple[str | int, ...], dict[str, Any]], Any]) -> Any:
    """A copy of schema ``node`` with every ``properties`` map (at a schema position, found
    by structure as :func:`_norm` finds it) replaced by ``on_map(pointer path, map)``, its
    subschemas rebuilt first. Values that are not schemas are shared; nesting beyond
    :data:`MAX_NESTING` is left as it is."""
    if type(node) is not dict or len(path) >= MAX_NESTING:
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        kind = type(value)
        if key in _SCHEMA_MAPS and kind is dict:
            mapped = {n: _rebuilt(s, (*path, key, n), on_map) for n, s in value.items()}
            value = on_map((*path, key), mapped) if key in ORDERED_MAPS else mapped
        elif (key in _SCHEMA_LISTS or key == "items") and kind is list:
            value = [_rebuilt(s, (*path, key, i), on_map) for i, s in enumerate(value)]
        elif key in _SCHEMA_ONE or key == "items":
            value = _rebuilt(value, (*path, key), on_map)
        elif key == "dependencies" and kind is dict:
            value = {n: v if type(v) is list else _rebuilt(v, (*path, key, n), on_map)
                     for n, v in value.items()}
        out[key] = value
    return out


def _in_order(_: tuple[str | int, ...], mapped: dict[str, Any]) -> Any:
    """A ``properties`` map as raw JSON in its member order (each subschema canonical)."""
    return raw_json(b"{" + b",".join(canonical_json(name) + b":" + canonical_json(sub)
                                     for name, sub in mapped.items()) + b"}")


def schema_json(schema: Any) -> bytes:
    """Canonical JSON of a JSON Schema: keys sorted, except ``properties`` member names, which
    keep their order (see the module docstring). The same value rules and errors as
    :func:`~stableprompt._canonical.canonical_json` (a bad value's pointer is the one a full
    serialization names)."""
    try:
        return canonical_json(_rebuilt(schema, (), _in_order))
    except CanonicalizationError:
        canonical_json(schema)  # raises again, with the pointer from the schema's root
        raise


def properties_orders(schema: Any) -> dict[str, tuple[str, ...]]:
    """Every ``properties`` map of ``schema`` with more than one member: JSON pointer (from
    the schema's root) -> its member names in order."""
    found: dict[str, tuple[str, ...]] = {}

    def note(path: tuple[str | int, ...], mapped: dict[str, Any]) -> dict[str, Any]:
        if len(mapped) > 1:
            found[_pointer(path)] = tuple(mapped)
        return mapped

    _rebuilt(schema, (), note)
    return found


def with_properties_orders(schema: Any, orders: Mapping[str, tuple[str, ...]]) -> Any:
    """``schema`` with each ``properties`` map named in ``orders`` (pointer -> names) put in
    that order, where it holds exactly those names (else as it is); a copy of the schema's
    structure, values shared."""

    def put(path: tuple[str | int, ...], mapped: dict[str, Any]) -> dict[str, Any]:
        order = orders.get(_pointer(path))
        if order is None or len(order) != len(mapped) or set(order) != set(mapped):
            return mapped
        return {name: mapped[name] for name in order}

    return _rebuilt(schema, (), put)


#: Where each cache-key parameter holds a response JSON Schema: the keys leading to it.
#: Sources: openai-python ``ResponseFormatJSONSchema`` (``json_schema.schema``) and
#: ``ResponseFormatTextJSONSchemaConfigParam`` (``text.format.schema``); anthropic-python
#: ``output_format`` / ``output_config.format`` (``schema``); google-genai
#: ``GenerationConfig.response_schema`` / ``response_json_schema``.
_PARAM_SCHEMAS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "response_format": (("json_schema", "schema"),),
    "text": (("format", "schema"),),
    "output_format": (("schema",),),
    "output_config": (("format", "schema"),),
    "generationConfig": (("responseSchema",), ("responseJsonSchema",),
                         ("response_schema",), ("response_json_schema",)),
}


def param_schemas(name: str, value: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The response schemas cache-key parameter ``name`` holds: ``(keys to it, schema)``."""
    for keys in _PARAM_SCHEMAS.get(name, ()):
        node = value
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            yield keys, node


def _with_schemas(value: Any, keys: tuple[str, ...], schema: Any) -> Any:
    if not keys:
        return schema
    return {**value, keys[0]: _with_schemas(value[keys[0]], keys[1:], schema)}


def param_json(name: str, value: Any) -> bytes:
    """Canonical JSON of cache-key parameter ``name``: keys sorted, except the ``properties``
    of a response schema it holds, which keep their order (:func:`schema_json`). Same value
    rules and errors as :func:`~stableprompt._canonical.canonical_json`."""
    whole = value
    try:
        for keys, schema in list(param_schemas(name, value)):
            value = _with_schemas(value, keys, raw_json(schema_json(schema)))
    except CanonicalizationError:
        canonical_json(whole)  # raises again, with the pointer from the parameter's root
        raise
    return canonical_json(value)
