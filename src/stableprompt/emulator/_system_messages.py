"""Anthropic mid-conversation system messages: where a ``{"role": "system"}`` message may stand
in ``messages`` and what it may hold, checked as the Messages API documents it.

An operator instruction "sent as ``{"role": "system"}`` appended to ``messages[]`` ... leaves
the cached prefix intact": the emulator renders it as one more message (its blocks are cached
like any other), so the prefix before it is unchanged. The rules (a 400 for each, naming the
message):

* only models whose :func:`stableprompt._policy.model_features` say ``system_messages``
  accept it; others answer ``role 'system' is not supported on this model``;
* it cannot be ``messages[0]`` and cannot directly follow another system message;
* it must follow a ``user`` turn, or an ``assistant`` turn ending in server-tool use;
* it must be the last message, or be followed by an ``assistant`` turn;
* its content is text only; with the ``mid-conversation-tool-changes-2026-07-01`` beta also
  ``tool_addition`` / ``tool_removal`` blocks, whose ``tool`` references a tool declared in
  ``tools[]`` (``tool_reference`` by name), an MCP server in ``mcp_servers``
  (``mcp_tool_reference``, ``mcp_toolset_reference``), or, with the
  ``inline-tools-2026-09-15`` beta, defines one by value (``tool_definition``, additions only;
  later references may name it);
* its other fields are ``clear_at`` (``"next_user_message"`` or ``"never"``) and
  ``output_config``.

Sources: https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages
(PROVIDERS.md section 15.1); ``anthropic`` SDK 2.17.0 ``types/system_message_param.py``,
``types/beta/beta_system_message_param.py``, ``beta_request_tool_addition_block_param.py``,
``beta_request_tool_removal_block_param.py``, ``beta_tool_change_*_param.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._policy import INLINE_TOOLS_BETA, TOOL_CHANGES_BETA, model_features
from ._answers import WireError
from ._checks import expect_object, expect_str

__all__ = ["check_system_message", "declared_tools"]

_FIELDS = frozenset({"role", "content", "clear_at", "output_config"})
_CLEAR_AT = (None, "next_user_message", "never")
_SERVER_TOOL_USE = frozenset({"server_tool_use", "mcp_tool_use"})
_REFERENCES = {"tool_reference": ("name",), "mcp_tool_reference": ("server_name", "name"),
               "mcp_toolset_reference": ("server_name",)}


def declared_tools(req: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Tool names in ``tools[]`` and server names in ``mcp_servers`` (for references)."""
    names = {t["name"] for t in req.get("tools") or () if isinstance(t, dict)
             and isinstance(t.get("name"), str)}
    servers = {s["name"] for s in req.get("mcp_servers") or () if isinstance(s, dict)
               and isinstance(s.get("name"), str)}
    return names, servers


def check_system_message(
    messages: Sequence[Any], i: int, *, model: str, betas: frozenset[str],
    tools: set[str], servers: set[str],
) -> None:
    """Check the system message ``messages[i]`` (see the module docstring). A
    ``tool_definition`` adds its tool's name to ``tools`` (later references may name it).

    Raises:
        WireError: The first rule it breaks (400).
    """
    where = f"messages.{i}"
    if not model_features("anthropic", model).system_messages:
        raise WireError("role 'system' is not supported on this model", param=f"{where}.role")
    message = messages[i]
    extra = sorted(set(message) - _FIELDS)
    if extra:
        raise WireError(f"{where}.{extra[0]}: Extra inputs are not permitted")
    if message.get("clear_at") not in _CLEAR_AT:
        raise WireError(f"{where}.clear_at: must be 'next_user_message' or 'never', got "
                        f"{message.get('clear_at')!r}")
    if i == 0:
        raise WireError(f"{where}.role: a system message cannot be the first message")
    before = messages[i - 1] if isinstance(messages[i - 1], dict) else {}
    if before.get("role") == "system":
        raise WireError(f"{where}.role: a system message cannot directly follow another "
                        "system message")
    if before.get("role") != "user" and not _ends_in_server_tool_use(before):
        raise WireError(f"{where}.role: a system message must follow a user turn, or an "
                        "assistant turn ending in server tool use")
    after = messages[i + 1] if i + 1 < len(messages) else None
    # A system message next is reported by its own check ("cannot directly follow").
    if after is not None and (not isinstance(after, dict)
                              or after.get("role") not in ("assistant", "system")):
        raise WireError(f"{where}.role: a system message must be the last message or be "
                        "followed by an assistant turn")
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            raise WireError(f"{where}.content: text content must be non-empty")
        return
    if not isinstance(content, list) or not content:
        raise WireError(f"{where}.content: a system message holds text (a string or a "
                        "non-empty array of text blocks)")
    for k, block in enumerate(content):
        _check_block(expect_object(block, f"{where}.content.{k}"), f"{where}.content.{k}",
                     betas=betas, tools=tools, servers=servers)


def _ends_in_server_tool_use(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (message.get("role") == "assistant" and isinstance(content, list) and bool(content)
            and isinstance(content[-1], dict) and content[-1].get("type") in _SERVER_TOOL_USE)


def _check_block(block: dict[str, Any], where: str, *, betas: frozenset[str], tools: set[str],
                 servers: set[str]) -> None:
    kind = block.get("type")
    if kind == "text":
        expect_str(block.get("text"), f"{where}.text", empty=False)
        return
    if kind not in ("tool_addition", "tool_removal"):
        raise WireError(f"{where}.type: system message content is text only, got {kind!r}")
    if TOOL_CHANGES_BETA not in betas:
        raise WireError(f"{where}.type: {kind!r} blocks need the anthropic-beta header "
                        f"{TOOL_CHANGES_BETA!r}")
    extra = sorted(set(block) - {"type", "tool", "cache_control"})
    if extra:
        raise WireError(f"{where}.{extra[0]}: Extra inputs are not permitted")
    tool = expect_object(block.get("tool"), f"{where}.tool")
    ref = tool.get("type")
    if ref == "tool_definition" and kind == "tool_addition":
        if INLINE_TOOLS_BETA not in betas:
            raise WireError(f"{where}.tool.type: 'tool_definition' needs the anthropic-beta "
                            f"header {INLINE_TOOLS_BETA!r}")
        definition = expect_object(tool.get("definition"), f"{where}.tool.definition")
        tools.add(expect_str(definition.get("name"), f"{where}.tool.definition.name",
                             empty=False))
        return
    if ref not in _REFERENCES:
        raise WireError(f"{where}.tool.type: must be one of {', '.join(sorted(_REFERENCES))}"
                        f"{' or tool_definition' if kind == 'tool_addition' else ''}, got "
                        f"{ref!r}")
    values = {name: expect_str(tool.get(name), f"{where}.tool.{name}", empty=False)
              for name in _REFERENCES[ref]}
    if ref == "tool_reference" and values["name"] not in tools:
        raise WireError(f"{where}.tool.name: no tool named {values['name']!r} is declared in "
                        "tools (or defined earlier in messages)")
    if ref != "tool_reference" and values["server_name"] not in servers:
        raise WireError(f"{where}.tool.server_name: no MCP server named "
                        f"{values['server_name']!r} in mcp_servers")
