"""Asking the annotators of a vote: every annotator's answer about every box, each cached as it arrives.

Each box is shown as a JPEG view (:data:`~fairsets.annotate.chat.requests.VOTE_VIEW`:
the crop; ``view="redbox"``: the whole image with the box framed in red, as captioners see it) and
each annotator is asked its own question
(:func:`~fairsets.annotate.vote.prompts.build_question`, options shuffled per annotator and box
from the seed). Each view is rendered once, by one thread, and handed to every annotator through
a bounded buffer; each annotator streams its questions through its own
:class:`~fairsets.fetch.chat.ChatClient` (:meth:`~fairsets.fetch.chat.ChatClient.stream`:
``max_concurrency`` requests in flight all the time, no rounds), at its own pace, every answer
cached in :func:`~fairsets.annotate.chat.requests.chat_cache_dir` as it arrives. Each answer gets
a status:

* ``ok``: :func:`~fairsets.annotate.vote.prompts.parse_answer` read one option letter;
* ``invalid``: the reply is not one clear letter (the raw text is kept, never guessed);
* ``refused``: the model declined (a refusal field, a content filter, or a reply that reads as one);
* ``failed``: no answer: the request still failed after ``max_retries`` (429, 5xx, timeouts), or
  the box's image is gone from its shard (``error`` says why).

Every question names its option letters as the request's ``choices``; an annotator whose endpoint
asks for log-probabilities then gets each letter's probability back
(:attr:`~fairsets.fetch.chat.ChatResult.option_probs`), stored per answer as ``option_probs``
(JSON, label → probability, in the order shown; only the letters the server gave a probability)
and ``confidence`` (the probability of the letter the answer chose, for an ``ok`` answer). Both
are null when no probability came back: never invented, never 1.0. For an endpoint at its default
settings ``choices`` is not part of the cache key, so answers cached before it was sent are still
found; one that asks for log-probabilities (or constrains answers) keys its answers by them, so
turning ``logprobs`` on asks again what was answered without probabilities.

:func:`ask_all` gathers the answers (one row per box and annotator, :data:`ANSWER_SCHEMA`) for the
run (:func:`fairsets.annotate.vote.run.vote_boxes`), which makes the consensus of them.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fairsets.fetch.chat import ChatRequest, user

from ..chat.items import BoxItem, remember_view
from ..chat.requests import chat_cache_dir
from .prompts import INVALID, REFUSED, build_question, parse_answer

if TYPE_CHECKING:
    from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatResult

    from .prompts import Question

__all__ = [
    "ANSWER_SCHEMA",
    "FAILED",
    "MAX_ANSWER_CHARS",
    "VOTE_MAX_TOKENS",
    "Asked",
    "ask_all",
    "vote_request",
]

#: The status of an answer that never came (see the module docstring).
FAILED = "failed"
#: The longest raw answer stored (characters): the first and last half are kept, so both a letter
#: and the answer after a long reasoning block survive.
MAX_ANSWER_CHARS = 4000
#: Answer length of a vote: a letter (room for a short preamble).
VOTE_MAX_TOKENS = 16

ANSWER_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.string()),
        pa.field("key", pa.string()),
        pa.field("box_id", pa.int32()),
        pa.field("item", pa.string()),
        pa.field("annotator", pa.string()),
        pa.field("model", pa.string()),
        pa.field("status", pa.string()),
        pa.field("label", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("error", pa.string()),
        pa.field("options", pa.string()),
        pa.field("cached", pa.bool_()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("confidence", pa.float64()),
        pa.field("option_probs", pa.string()),
    ]
)


def vote_request(
    question: Question, jpeg: bytes | dict[str, Any], *, max_tokens: int = VOTE_MAX_TOKENS
) -> ChatRequest:
    """One multiple-choice question about one box view (temperature 0); ``jpeg`` is the view, or an image
    part standing for it (:func:`fairsets.fetch.chat.image_digest_part`, for a cache look-up). An
    ``invalid`` reply (:func:`~fairsets.annotate.vote.prompts.parse_answer`) is not cached."""

    def accept(text: str) -> bool:
        return parse_answer(text, question)[1] != INVALID

    return ChatRequest(
        [user(question.text, images=[jpeg])],
        temperature=0.0,
        max_tokens=max_tokens,
        choices=question.letters,
        accept=accept,
    )


class _Abort(Exception):
    """Another annotator's batch failed: stop this one (its answers so far are cached)."""


def _answer_row(
    item: BoxItem, name: str, model: str, options: str | None, result: ChatResult | None, reason: str | None
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "shard": item.shard,
        "key": item.key,
        "box_id": item.box_id,
        "item": item.item,
        "annotator": name,
        "model": model,
        "status": FAILED,
        "label": None,
        "answer": None,
        "error": reason,
        "options": options,
        "cached": False,
        "prompt_tokens": None,
        "completion_tokens": None,
        "confidence": None,
        "option_probs": None,
    }
    if result is None:
        return row
    row.update(
        cached=bool(result.cached),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )
    if result.error is not None:
        refused = result.refusal is not None or result.error.startswith("refused")
        row.update(status=REFUSED if refused else FAILED, error=result.error, answer=_kept(result.refusal))
    return row


def _kept(text: str | None) -> str | None:
    """The raw answer as stored: at most :data:`MAX_ANSWER_CHARS`, its middle cut with a marker."""
    if text is None or len(text) <= MAX_ANSWER_CHARS:
        return text
    half = MAX_ANSWER_CHARS // 2
    return f"{text[:half]} … [{len(text) - 2 * half} characters not stored] … {text[-half:]}"


def _read(row: dict[str, Any], result: ChatResult, question: Question) -> None:
    """Fill an answered row: the parsed label and status, the raw text kept, the probabilities."""
    probs = _option_probs(result.option_probs, question)
    if probs:
        row["option_probs"] = json.dumps(probs, ensure_ascii=False)
    if result.error is not None:
        return
    label, status = parse_answer(result.text, question)
    row.update(status=status, label=label, answer=_kept(result.text), error=None)
    if label is not None:
        letter = next(k for k, v in question.options.items() if v == label)
        row["confidence"] = _probability((result.option_probs or {}).get(letter))


def _probability(value: Any) -> float | None:
    """A probability as stored: a finite number from 0 to 1, else None (never guessed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if 0.0 <= value <= 1.0 else None  # NaN fails both comparisons


def _option_probs(probs: Mapping[str, Any] | None, question: Question) -> dict[str, float]:
    """``label → probability`` in the order shown, for the question's letters that have one."""
    if not probs:
        return {}
    out = {}
    for letter, label in question.options.items():
        p = _probability(probs.get(letter))
        if p is not None:
            out[label] = p
    return out


class _Fanout:
    """The rendered views every annotator is shown: one renderer puts them, each annotator reads
    every one in order at its own pace. At most ``bound`` views are held: the renderer waits when
    the slowest reader is that far behind, and a view is dropped once every reader has it."""

    def __init__(self, readers: Sequence[str], bound: int) -> None:
        self._cv = threading.Condition()
        self._views: dict[int, Any] = {}
        self._made = 0
        self._low = 0
        self._pos = dict.fromkeys(readers, 0)
        self._bound = max(1, int(bound))
        self._ended = False
        self._aborted = False

    def put(self, view: Any) -> bool:
        """Add a view (waiting for room); False once aborted."""
        with self._cv:
            while not self._aborted and self._made - min(self._pos.values()) >= self._bound:
                self._cv.wait()
            if self._aborted:
                return False
            self._views[self._made] = view
            self._made += 1
            self._cv.notify_all()
            return True

    def end(self) -> None:
        """No more views: each reader ends after the last one."""
        with self._cv:
            self._ended = True
            self._cv.notify_all()

    def abort(self) -> None:
        """Stop everything: the renderer's ``put`` returns False, readers raise :class:`_Abort`."""
        with self._cv:
            self._aborted = True
            self._cv.notify_all()

    def read(self, name: str) -> Iterator[Any]:
        """Every view, in order, for reader ``name``."""
        while True:
            with self._cv:
                while not self._aborted and not self._ended and self._pos[name] == self._made:
                    self._cv.wait()
                if self._aborted:
                    raise _Abort()
                at = self._pos[name]
                if at == self._made:
                    return
                view = self._views[at]
                self._pos[name] = at + 1
                low = min(self._pos.values())
                while self._low < low:
                    del self._views[self._low]
                    self._low += 1
                self._cv.notify_all()
            yield view


@dataclass
class Asked:
    """What the asking step gathered: answer rows per annotator, their counters, the rejected items."""

    rows: dict[str, list[dict[str, Any]]]
    counters: dict[str, Counter[str]]
    rejected: dict[str, str] = field(default_factory=dict)
    sources: dict[tuple[str, str], str | None] = field(default_factory=dict)
    rendered: int = 0


def ask_all(
    folder: Path,
    items: Sequence[BoxItem],
    *,
    attribute: str,
    seed: int,
    names: Sequence[str],
    endpoints: Mapping[str, ChatEndpoint],
    clients: Mapping[str, ChatClient],
    view_kwargs: Mapping[str, Any],
    advance: Callable[..., None],
) -> Asked:
    """Every annotator's answer for every item (see the module docstring, and *Re-runs* in :mod:`.run`).

    First, without rendering: an item whose view the index knows and whose every answer is in the
    cache (looked up by the view's digest) is answered from there. The others are rendered once, by
    one thread, and each view is handed to every annotator's :meth:`ChatClient.stream`, each
    annotator in its own thread at its own pace. The first fatal error (in annotator order) is
    raised, named, once every thread has stopped.
    """
    from fairsets.fetch.chat import ChatServiceError, image_digest_part

    from ..chat.items import source_sha256, view_digest, views

    lock = threading.Lock()
    asked = Asked(rows={n: [] for n in names}, counters={n: Counter[str]() for n in names})
    index = chat_cache_dir(folder) / "views"
    sources = asked.sources = source_sha256(folder, items)
    models = {name: endpoints[name].model for name in names}

    def record(name: str, item: BoxItem, question: Any, result: ChatResult) -> None:
        order = ",".join(f"{k}={v}" for k, v in question.options.items())
        row = _answer_row(item, name, models[name], order, result, None)
        _read(row, result, question)
        with lock:
            asked.rows[name].append(row)
        advance(1, requests=0 if result.cached else max(1, result.attempts), cached=int(result.cached))

    # 1. answers found by the views' digests: those items are not rendered
    to_render: list[BoxItem] = []
    for it in items:
        digest = view_digest(index, it, sources.get((it.shard, it.key)), **view_kwargs)
        found: list[tuple[str, Any, ChatResult]] = []
        if digest is not None:
            image = image_digest_part(digest)
            for name in names:
                question = build_question(attribute, it.item, seed, annotator=name)
                hit = clients[name].lookup(vote_request(question, image))
                if hit is None:
                    break
                found.append((name, question, hit))
        if digest is None or len(found) < len(names):
            to_render.append(it)
            continue
        for name, question, hit in found:
            asked.counters[name]["cache_hits"] += 1
            record(name, it, question, hit)
    if not to_render:
        return asked

    # 2. the rest: rendered once, every annotator streams its questions about each view
    bound = max(32, 4 * max(endpoints[n].max_concurrency for n in names))
    fanout = _Fanout(names, bound)
    errors: dict[str, BaseException] = {}

    def render() -> None:
        try:
            with contextlib.closing(views(folder, to_render, **view_kwargs)) as made:  # type: ignore[type-var]
                for it, jpeg, reason in made:
                    if jpeg is None:
                        with lock:
                            asked.rejected[it.item] = reason or "no view"
                            for name in names:
                                asked.rows[name].append(
                                    _answer_row(it, name, models[name], None, None, reason)
                                )
                        advance(len(names))
                        continue
                    asked.rendered += 1
                    remember_view(index, it, sources.get((it.shard, it.key)), jpeg, **view_kwargs)
                    if not fanout.put((it, jpeg)):
                        return
            fanout.end()
        except BaseException as exc:  # handed to the caller below
            errors["\0render"] = exc
            fanout.abort()

    def ask(name: str) -> None:
        questions: dict[int, tuple[BoxItem, Any]] = {}

        def requests() -> Iterator[Any]:
            for n, (it, jpeg) in enumerate(fanout.read(name)):
                question = build_question(attribute, it.item, seed, annotator=name)
                questions[n] = (it, question)
                yield vote_request(question, jpeg)

        answers = clients[name].stream(requests())
        try:
            with answers:
                for i, result in answers:
                    it, question = questions.pop(i)
                    record(name, it, question, result)
        except BaseException as exc:  # handed to the caller below
            errors[name] = exc
            fanout.abort()
        finally:
            asked.counters[name].update(
                requests_sent=answers.requests_sent, cache_hits=answers.cache_hits, retries=answers.retries
            )

    threads = [threading.Thread(target=render, name="fairsets-vote-render")]
    threads += [threading.Thread(target=ask, args=(n,), name=f"fairsets-vote-{n}") for n in names]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:  # KeyboardInterrupt: stop every thread, answers in stay cached
        fanout.abort()
        for t in threads:
            t.join()
        raise
    for name in [*names, "\0render"]:
        exc = errors.get(name)
        if exc is None or isinstance(exc, _Abort):
            continue
        if isinstance(exc, ChatServiceError):
            raise ChatServiceError(
                f"annotator {name}: {exc}; the answers received so far are cached, run again once fixed"
            ) from None
        raise exc
    if errors:  # only aborts: cannot happen without a real error, but never return half the answers
        raise next(iter(errors.values()))
    return asked
