"""``_formats._is_converse`` (run by ``detect`` on every request lint reads) answers as the
block-by-block walk it replaced, on random bodies: Anthropic and Converse blocks, blocks
without a type, non-objects, ``dict`` subclasses and other mappings as messages and blocks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt._wire import _formats

_CONVERSE_BLOCKS = frozenset({"text", "toolUse", "toolResult", "cachePoint", "image",
                              "document", "reasoningContent", "guardContent"})


def _walked(body: Mapping[str, Any]) -> bool:
    """The walk ``_is_converse`` made before it read blocks with ``map`` (kept as the oracle)."""
    if any(key in body for key in ("toolConfig", "inferenceConfig",
                                   "additionalModelRequestFields", "guardrailConfig")):
        return True
    blocks: list[Any] = []
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, (dict, Mapping)) and \
                    isinstance(message.get("content"), list):
                blocks.extend(message["content"])
    for item in blocks:
        if (type(item) is dict and "type" in item) or not isinstance(item, Mapping):
            continue
        if "type" not in item and item.keys() & _CONVERSE_BLOCKS:
            return True
    return False


class _Sub(dict[str, Any]):
    """A dict subclass (its methods could differ from ``dict``'s)."""


class _Frozen(Mapping[str, Any]):
    """A mapping that is no dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _shaped(value: dict[str, Any], shape: str) -> Any:
    return _Sub(value) if shape == "sub" else _Frozen(value) if shape == "mapping" else value


keys = st.sampled_from(["type", "text", "toolUse", "cachePoint", "content", "other"])
plain = st.dictionaries(keys, st.sampled_from(["x", 1, None]), max_size=3)
shapes = st.sampled_from(["dict", "dict", "dict", "sub", "mapping"])
blocks: st.SearchStrategy[Any] = st.one_of(st.tuples(plain, shapes).map(lambda x: _shaped(*x)),
                   st.sampled_from(["text", 3, None, []]))
messages = st.one_of(
    st.tuples(st.fixed_dictionaries({"role": st.just("user")},
                                    optional={"content": st.one_of(st.lists(blocks, max_size=4),
                                                                   st.just("hi"))}),
              shapes).map(lambda x: _shaped(*x)),
    st.sampled_from(["x", 5, None]))
bodies = st.fixed_dictionaries(
    {}, optional={"system": st.one_of(st.lists(blocks, max_size=3), st.just("sys")),
                  "messages": st.one_of(st.lists(messages, max_size=6), st.just({})),
                  "toolConfig": st.just({}), "model": st.just("m")})


@settings(max_examples=400, deadline=None)
@given(body=bodies)
def test_is_converse_answers_as_the_block_walk(body: dict[str, Any]) -> None:
    assert _formats._is_converse(body) is _walked(body)


def test_typed_blocks_are_not_converse_and_one_key_unions_are() -> None:
    typed = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    union = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                       {"text": "hi"}]}]}
    assert _formats._is_converse(typed) is False
    assert _formats._is_converse(union) is True
    assert _formats._is_converse({"system": [{"text": "s"}], "messages": []}) is True
