"""The forms an answer takes when its endpoint shapes requests (:mod:`fairsets.fetch.chat.endpoint`):
thinking blocks to cut, a JSON answer to read back to its choice, and the log-probabilities of the
choices.

* :func:`strip_thinking`: the answer without its ``<think>…</think>`` blocks (``reasoning = true``);
* :func:`unwrap_json_answer`: ``{"answer": "A"}`` or ``"A"`` → ``A`` (``constrain = "json_schema"``);
* :func:`option_probs`: each choice's probability at the answer's position (``logprobs = true``).

Everything read here comes from the server and is untrusted: a log-probability that is no number
(a string, ``NaN``, a bool), positive (no probability), or a probability outside [0, 1] is dropped,
never raised; a body that holds no usable log-probabilities gives ``None``.

Log-probabilities, read in the OpenAI form that vLLM, SGLang, llama.cpp's server and Ollama also
answer — ``choices[0].logprobs.content[i]`` = ``{"token", "logprob", "top_logprobs": [{"token",
"logprob"}, …]}`` — and in llama.cpp's variants (``"prob"`` with ``"top_probs"`` when it is asked
for post-sampling probabilities; ``"tok_str"`` for the token in older builds; a top list given as
``{token: logprob}``). The *answer's position* is the first token (after the thinking, for a
reasoning endpoint) whose text, stripped of whitespace and quotes, is one of the choices; when no
token is, the first token with any text. At that position each alternative's probability
(``exp(logprob)``, or ``prob``) is added to the choice its stripped text names (``"A"`` and ``" A"``
are both the choice ``A``; a token listed twice counts once), each sum capped at 1; a choice absent
from the list gets 0.0.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["option_probs", "strip_thinking", "unwrap_json_answer"]

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_OPEN, _CLOSE = re.compile(r"<think>", re.I), re.compile(r"</think>", re.I)
#: An answer longer than this is not read as JSON (a constrained answer is a few characters).
_MAX_JSON = 4096
_QUOTES = "\"'`"


def strip_thinking(text: str) -> str:
    """``text`` without its thinking: every ``<think>…</think>`` block, what comes before a closing
    tag left without its opening (the chat template wrote ``<think>`` into the prompt), and an
    unclosed block with what follows it (the budget ran out while thinking); then trimmed."""
    text = _THINK.sub("", text)
    closes = list(_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


def unwrap_json_answer(text: str) -> str:
    """The answer a JSON-schema constraint wrapped: ``{"answer": "A"}`` or ``"A"`` → ``"A"``;
    any other text unchanged (a server that ignored the constraint answers free text)."""
    body = text.strip()
    if not body or len(body) > _MAX_JSON or body[0] not in '{"':
        return text
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return text
    if isinstance(data, dict) and len(data) == 1 and isinstance(data.get("answer"), str):
        return data["answer"]
    return data if isinstance(data, str) else text


def _plain(token: Any) -> str:
    """A token's text stripped of whitespace and quotes (``" A"`` → ``A``); ``""`` for no text."""
    return token.strip().strip(_QUOTES).strip() if isinstance(token, str) else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _probability(item: dict[str, Any]) -> float | None:
    """The probability an entry gives: ``exp(logprob)`` for a finite logprob ≤ 0 (``-inf`` is 0),
    else ``prob`` in [0, 1]; ``None`` for anything else."""
    if "logprob" in item:
        lp = _number(item["logprob"])
        if lp is None or math.isnan(lp) or lp > 0:
            return None
        return 0.0 if lp == -math.inf else math.exp(lp)
    p = _number(item.get("prob"))
    return p if p is not None and 0.0 <= p <= 1.0 else None


def _token(item: dict[str, Any]) -> Any:
    return item.get("token", item.get("tok_str"))


def _alternatives(entry: dict[str, Any]) -> list[tuple[str, float]]:
    """``(raw token, probability)`` of a position's top list, first listing of a token only."""
    top = entry.get("top_logprobs", entry.get("top_probs"))
    pairs: list[tuple[Any, float | None]] = []
    if isinstance(top, dict):  # {token: logprob}
        pairs = [(tok, _probability({"logprob": lp})) for tok, lp in top.items()]
    elif isinstance(top, list):
        pairs = [(_token(it), _probability(it)) for it in top if isinstance(it, dict)]
    seen: dict[str, float] = {}
    for tok, p in pairs:
        if isinstance(tok, str) and p is not None and tok not in seen:
            seen[tok] = p
    return list(seen.items())


def _answer_position(tokens: list[str], choices: tuple[str, ...], after_thinking: bool) -> int | None:
    start = 0
    if after_thinking:  # the first token after the last </think>; none while a block is open
        joined = "".join(tokens)
        closes = list(_CLOSE.finditer(joined))
        end = closes[-1].end() if closes else 0
        if _OPEN.search(joined, end):
            return None
        reached = 0
        while start < len(tokens) and reached < end:
            reached += len(tokens[start])
            start += 1
    allowed = set(choices)
    rest = range(start, len(tokens))
    first = next((i for i in rest if _plain(tokens[i]) in allowed), None)
    return first if first is not None else next((i for i in rest if _plain(tokens[i])), None)


def option_probs(
    logprobs: Any, choices: tuple[str, ...], *, after_thinking: bool = False
) -> dict[str, float] | None:
    """Each choice's probability at the answer's position (see the module docstring), read from
    ``choices[0].logprobs``; ``None`` when it holds no token at all (not asked, not supported,
    or not the form read here).

    Args:
        logprobs: ``choices[0]["logprobs"]`` of the completion, as decoded.
        choices: the request's allowed answers.
        after_thinking: the answer comes after a ``</think>`` (``reasoning = true``).
    """
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not choices:
        return None
    entries = [e if isinstance(e, dict) else {} for e in content]
    tokens = [t if isinstance(t := _token(e), str) else "" for e in entries]
    pos = _answer_position(tokens, choices, after_thinking)
    if pos is None:
        return None
    entry = entries[pos]
    alternatives = _alternatives(entry)
    chosen, own = tokens[pos], _probability(entry)
    if chosen and own is not None and chosen not in dict(alternatives):
        alternatives.append((chosen, own))  # the chosen token, when its top list leaves it out
    probs = dict.fromkeys(choices, 0.0)
    for tok, p in alternatives:
        name = _plain(tok)
        if name in probs:
            probs[name] = min(1.0, probs[name] + p)
    return probs
