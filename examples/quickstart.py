"""stableprompt quickstart: build a cache-friendly prompt, render it, and catch a cache break.

Runs offline. Prints a rendered Anthropic request body, its fingerprints, and the diff that
catches a timestamp added to the system prompt (the most common way harnesses break the
prefix cache).
"""

from __future__ import annotations

import json
import warnings

from stableprompt import PromptBuilder, Tool, VolatileContentWarning, diff


def get_weather(city: str, unit: str = "C") -> str:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: "C" or "F".
    """
    return f"18{unit} in {city}"


SYSTEM = "You are a concise travel assistant. Use tools when they help."
search = Tool("search", "Search the web.",
              {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})


def build(system: str) -> object:
    head = (
        PromptBuilder()
        .system(system)
        .tools([search, Tool.from_function(get_weather)])  # any order: the head sorts them
        .tail_slot("now")  # volatile: rendered last, never cached, never persisted
        .freeze()
    )
    conv = head.conversation()
    conv.user("What's the weather in Paris?")
    conv.assistant(tool_calls=[{"id": "toolu_1", "name": "get_weather",
                                "arguments": {"city": "Paris"}}])
    conv.tool_result("toolu_1", get_weather("Paris"))
    return conv


def main() -> None:
    conv = build(SYSTEM)
    rendered = conv.render(tail={"now": "2026-11-30T10:00:00Z"})  # type: ignore[attr-defined]
    request = rendered.to_anthropic(model="claude-sonnet-5", max_tokens=512)
    print("== Anthropic request body ==")
    print(json.dumps(request.body, indent=2, ensure_ascii=False))
    print("\n== Fingerprints ==")
    print("head (lineage):", rendered.head_fingerprint)
    print("prefix        :", rendered.prefix_fingerprint)
    print("request       :", request.fingerprint)

    print("\n== The clock in the system prompt: a cache break caught before sending ==")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VolatileContentWarning)
        clocked = [build(f"Current time: 2026-11-30T10:0{m}:00Z. {SYSTEM}") for m in (0, 5)]
    for warning in caught[:1]:
        print("freeze warning:", warning.message)
    first, second = (
        conv.render(tail={"now": "2026-11-30T10:05:00Z"}).to_anthropic(  # type: ignore[attr-defined]
            model="claude-sonnet-5", max_tokens=512)
        for conv in clocked
    )
    print("\ntimestamp added to the system prompt:")
    print(diff(request, first))
    print("\nthe next call five minutes later:")
    print(diff(first, second))

if __name__ == "__main__":
    main()
