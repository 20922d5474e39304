"""inline_system (SPARK_INLINE_SYSTEM_IN_PLACE): mid-conversation system notes stay where they are.

Target sglang.srt.entrypoints.anthropic.serving (SGLang 0.5.23). Patches
``AnthropicServing._convert_to_chat_completion_request``. Stock SGLang moves a system message from
the middle of a conversation to the system prompt at the top in one of two ways: itself, when it
decides the template cannot render one inline (``_merge_inline_system``: every native encoder but
Kimi K3's, DeepSeek-V4's included), or through the template, when its probe passed because the
sentinel showed up somewhere in the output (a DeepSeek-style Jinja template collects every system
message into the top and passes that probe). Either way one new note near the top changes every
later token and the prefix cache misses the whole conversation on each turn. Here the notes are
folded into the neighbouring user message before either can happen, so the rendered prompt only
grows at its end, whatever the template.

Where a note goes:
- followed by a user message: prepended to it (after any tool results, so the assistant's tool
  calls and their results stay adjacent);
- followed by an assistant message or by nothing: appended to the user message just before it, so
  the note is in the same place whether or not the next turn has arrived yet;
- no user message next to it: it becomes a user message of its own at its position.
System messages before the first user or assistant message are at the top already: stock code keeps
merging them into the system prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from . import mark

HOOK = "inline_system"


def _has_tool_result(blocks: Sequence[Any]) -> bool:
    return any(getattr(block, "type", None) == "tool_result" for block in blocks)


def _joined(note: str, text: str, *, at_start: bool) -> str:
    return "\n\n".join(part for part in ((note, text) if at_start else (text, note)) if part)


def _with_note(message: Any, note: str, *, at_start: bool, text_block: Callable[..., Any]) -> Any:
    content = message.content
    if isinstance(content, str):
        return message.model_copy(update={"content": _joined(note, content, at_start=at_start)})
    blocks = list(content)
    if not at_start:
        index = len(blocks)
    elif _has_tool_result(blocks):
        index = 1 + max(i for i, b in enumerate(blocks) if getattr(b, "type", None) == "tool_result")
    else:
        index = 0
    # Joined to the neighbouring text block when there is one, so the note reads the same as in a
    # plain-text message (SGLang joins separate text parts with a space).
    neighbour = index if at_start else index - 1
    if 0 <= neighbour < len(blocks) and getattr(blocks[neighbour], "type", None) == "text":
        merged = _joined(note, blocks[neighbour].text or "", at_start=at_start)
        blocks[neighbour] = blocks[neighbour].model_copy(update={"text": merged})
    else:
        blocks.insert(index, text_block(type="text", text=note))
    return message.model_copy(update={"content": blocks})


def fold_system_notes(
    messages: Sequence[Any], extract_text: Callable[[Any], str | None], text_block: Callable[..., Any]
) -> list[Any] | None:
    """The messages with every mid-conversation system note folded into a user message.

    None when there is nothing to fold (the request is then passed on untouched).
    """
    first_turn = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    if not any(m.role == "system" for m in messages[first_turn:]):
        return None
    result: list[Any] = list(messages[:first_turn])
    index = first_turn
    while index < len(messages):
        message = messages[index]
        if message.role != "system":
            result.append(message)
            index += 1
            continue
        run_end = index
        while run_end < len(messages) and messages[run_end].role == "system":
            run_end += 1
        texts = [extract_text(m.content) for m in messages[index:run_end]]
        note = "\n".join(text for text in texts if text)
        following = messages[run_end] if run_end < len(messages) else None
        if not note:
            pass
        elif following is not None and following.role == "user":
            result.append(_with_note(following, note, at_start=True, text_block=text_block))
            run_end += 1
        elif result and result[-1].role == "user":
            result[-1] = _with_note(result[-1], note, at_start=False, text_block=text_block)
        else:
            result.append(messages[index].model_copy(update={"role": "user", "content": note}))
        index = run_end
    return result


def apply(module: ModuleType, flags: Mapping[str, object]) -> None:
    cls = module.AnthropicServing
    original = cls._convert_to_chat_completion_request
    extract_text = module._extract_system_text
    text_block = module.TextBlock

    @functools.wraps(original)
    def _convert_to_chat_completion_request(self: Any, anthropic_request: Any) -> Any:
        folded = fold_system_notes(anthropic_request.messages, extract_text, text_block)
        if folded is not None:
            anthropic_request = anthropic_request.model_copy(update={"messages": folded})
        return original(self, anthropic_request)

    cls._convert_to_chat_completion_request = mark(_convert_to_chat_completion_request, HOOK)
