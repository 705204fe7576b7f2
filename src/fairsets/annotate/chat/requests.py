"""The chat requests more than one annotate command sends, built in one place so their answers are shared.

``annotate caption`` and ``annotate compare-captioners`` ask a captioner the same request for the
same box (the same red-box JPEG, prompt and sampling settings), so a caption written by one is a
cache hit for the other: both build it with :func:`caption_request` from a view rendered with
:data:`CAPTION_VIEW`. Every command of an annotation folder caches answers in
:func:`chat_cache_dir` (``ANN/.fairsets/chat-cache``): an interrupted run resumes, and a re-run
sends no request.

Each request says what answer it can use (``ChatRequest.accept``): a vote must read as one option
letter or a refusal, a caption must hold text, a verdict must name a caption or a tie. An answer
that does not is returned (and recorded as ``invalid`` / ``failed`` / ``invalid``) but never cached,
so a re-run asks it again rather than replaying an answer no run can use. The vote's request is
built where the vote asks (:func:`fairsets.annotate.vote.ask.vote_request`), the judge's where
captioners are compared (:func:`fairsets.annotate.captions.compare.judge_request`).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import Any

from fairsets.fetch.chat import ChatRequest, user

from .. import layout
from .views import DEFAULT_CAPTION_PROMPT

__all__ = [
    "CAPTION_MAX_TOKENS",
    "CAPTION_VIEW",
    "VOTE_VIEW",
    "caption_request",
    "chat_cache_dir",
    "usable_caption",
]

#: How a captioner (and a judge) is shown a box: the whole image, the box framed in red, the
#: longest side at most 1024 px (keyword arguments of :func:`fairsets.annotate.chat.items.views`).
CAPTION_VIEW: dict[str, Any] = {"view": "redbox", "max_side": 1024, "width": 3}
#: How a voter is shown a box by default: the crop, at most 512 px (``--view redbox`` shows the
#: whole image framed, at most 1024 px, as captions do).
VOTE_VIEW: dict[str, Any] = {"view": "crop", "max_side": 512}
#: Answer length of a caption: a paragraph.
CAPTION_MAX_TOKENS = 512


def chat_cache_dir(ann: str | os.PathLike[str]) -> Path:
    """``ANN/.fairsets/chat-cache``: the answer cache of every chat request made for ``ann``."""
    return Path(ann) / layout.WORKDIR / "chat-cache"


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
