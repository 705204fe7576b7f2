"""The chat requests the annotate commands send, built in one place so their answers are shared.

``annotate caption`` and ``annotate compare-captioners`` ask a captioner the same request for the
same box (the same red-box JPEG, prompt and sampling settings), so a caption written by one is a
cache hit for the other: both build it with :func:`caption_request` from a view rendered with
:data:`CAPTION_VIEW`. Every command of an annotation folder caches answers in
:func:`chat_cache_dir` (``ANN/.fairsets/chat-cache``): an interrupted run resumes, and a re-run
sends no request.

Each request says what answer it can use (``ChatRequest.accept``): a vote must read as one option
letter or a refusal, a caption must hold text, a verdict must name a caption or a tie. An answer
that does not is returned (and recorded as ``invalid`` / ``failed`` / ``invalid``) but never cached,
so a re-run asks it again rather than replaying an answer no run can use.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.fetch.chat import ChatRequest, user

from . import layout
from .views import DEFAULT_CAPTION_PROMPT

if TYPE_CHECKING:
    from .judge import JudgePrompt
    from .vote_prompts import Question

__all__ = [
    "CAPTION_MAX_TOKENS",
    "CAPTION_VIEW",
    "JUDGE_MAX_TOKENS",
    "VOTE_MAX_TOKENS",
    "VOTE_VIEW",
    "caption_request",
    "chat_cache_dir",
    "judge_request",
    "usable_caption",
    "vote_request",
]

#: How a captioner (and a judge) is shown a box: the whole image, the box framed in red, the
#: longest side at most 1024 px (keyword arguments of :func:`fairsets.annotate.items.views`).
CAPTION_VIEW: dict[str, Any] = {"view": "redbox", "max_side": 1024, "width": 3}
#: How a voter is shown a box by default: the crop, at most 512 px (``--view redbox`` shows the
#: whole image framed, at most 1024 px, as captions do).
VOTE_VIEW: dict[str, Any] = {"view": "crop", "max_side": 512}
#: Answer lengths: a letter (room for a short preamble), a paragraph, a judgement with reasons.
VOTE_MAX_TOKENS = 16
CAPTION_MAX_TOKENS = 512
JUDGE_MAX_TOKENS = 512


def chat_cache_dir(ann: str | os.PathLike[str]) -> Path:
    """``ANN/.fairsets/chat-cache``: the answer cache of every chat request made for ``ann``."""
    return Path(ann) / layout.WORKDIR / "chat-cache"


def vote_request(
    question: Question, jpeg: bytes | dict[str, Any], *, max_tokens: int = VOTE_MAX_TOKENS
) -> ChatRequest:
    """One multiple-choice question about one box view (temperature 0); ``jpeg`` is the view, or an image
    part standing for it (:func:`fairsets.fetch.chat.image_digest_part`, for a cache look-up). An
    ``invalid`` reply (:func:`~fairsets.annotate.vote_prompts.parse_answer`) is not cached."""
    from .vote_prompts import INVALID, parse_answer

    def accept(text: str) -> bool:
        return parse_answer(text, question)[1] != INVALID

    return ChatRequest(
        [user(question.text, images=[jpeg])], temperature=0.0, max_tokens=max_tokens, accept=accept
    )


def usable_caption(text: str) -> bool:
    """Whether an answer holds a caption: a character that is neither space nor a control character."""
    return any(not c.isspace() and unicodedata.category(c) != "Cc" for c in text)


def caption_request(
    jpeg: bytes, prompt: str = DEFAULT_CAPTION_PROMPT, *, max_tokens: int = CAPTION_MAX_TOKENS
) -> ChatRequest:
    """Describe the person framed in red in ``jpeg`` (a :data:`CAPTION_VIEW` view; temperature 0).
    An answer without text (:func:`usable_caption`) is not cached."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the caption prompt is empty; give the text to send with each red-box image")
    return ChatRequest(
        [user(prompt, images=[jpeg])], temperature=0.0, max_tokens=max_tokens, accept=usable_caption
    )


def judge_request(prompt: JudgePrompt, jpeg: bytes, *, max_tokens: int = JUDGE_MAX_TOKENS) -> ChatRequest:
    """Ask a judge which of two captions of the box framed in ``jpeg`` is better (temperature 0). An
    ``invalid`` verdict (:meth:`~fairsets.annotate.judge.JudgePrompt.verdict`) is not cached."""

    def accept(text: str) -> bool:
        return prompt.verdict(text) != "invalid"

    return ChatRequest(
        [user(prompt.text, images=[jpeg])], temperature=0.0, max_tokens=max_tokens, accept=accept
    )
