"""Consensus labels from a vote of chat-model annotators: ``fairsets annotate vote``.

:func:`vote_boxes` bootstraps training labels for a perceived-attribute head the way the
LAION-400M person-centric annotations were made: several multimodal models (the *annotators*, the
``[annotators.NAME]`` tables of ``annotators.toml``, at least two) each answer a multiple-choice
question about a sample of kept person boxes, and only the labels they agree on are kept.

**Which boxes.** The kept boxes of the folder (:func:`fairsets.annotate.chat.items.kept_boxes`).

* ``gender``: ``sample`` of them, chosen by a hash of ``(seed, item)``
  (:func:`fairsets.annotate.chat.items.sample` with salt ``vote-gender``): the same seed gives the same
  boxes, and a larger sample keeps every box of a smaller one.
* ``race``: most boxes show white people, so a plain sample would hold few boxes of the other
  labels. Candidates are first *recalled* by their image's alt-text
  (:func:`fairsets.annotate.vote.prompts.recall_candidates` with the keyword file, by default the
  one shipped with fairsets). Each recalled label's pool is ordered by a hash of
  ``(seed, label, item)``; then the labels take turns, in keyword-file order, each adding its next
  box not yet chosen, until ``sample`` boxes are chosen or every pool is used up. Every label thus
  gets an equal share, a label with fewer candidates gives all it has and the others fill the
  rest; a box recalled for several labels is asked once. Recall only picks boxes: the label is
  what the annotators answer. ``agreement.json`` reports the candidates and the boxes chosen per
  label.

**Asking.** Each box is shown as a JPEG view (:data:`~fairsets.annotate.chat.requests.VOTE_VIEW`:
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

**Consensus** (:func:`fairsets.annotate.vote.consensus.consensus`): a label is kept when every
annotator gave it, or by a relaxed rule: for ``gender`` by default ``{"mixed": 2}`` (at least two
annotators say ``mixed`` and no other label got as many votes: the method's "2 of 3", since a model
that sees only one of two people answers ``male`` or ``female``); none for ``race``. Then each
label keeps at most ``per_class_cap`` boxes, chosen by the seed. A box with a ``failed`` answer is
left out of this run's consensus and statistics: it is listed in ``agreement.json`` (``pending``
for a request that failed, ``rejected`` for a box with no image), and a re-run asks only those
requests again, every other answer coming from the cache.

**Outputs** (written atomically, after every answer is in):

* ``VOTES`` (``.csv``, ``.parquet`` or ``.jsonl``): the consensus rows, a LABELS table
  ``fairsets annotate train`` reads (``shard, key, box_id, label`` plus ``agreement``, ``rule``,
  ``votes``);
* ``<stem>.answers.parquet`` beside it (:data:`ANSWER_SCHEMA`): one row per box and annotator with
  the status, label, raw answer, error, the options' order (``A=female,B=unclear,…``) and whether
  it came from the cache;
* ``<stem>.agreement.json``: ``stats`` (the consensus statistics: counts per label, invalid and
  refused per annotator, Fleiss' κ, Cohen's κ and the confusion matrix of every pair) and ``run``
  (attribute, seed, view, sample asked and chosen, race recall per label, each annotator's name,
  model and host, never a key, requests sent, cache hits, retries, tokens, failed answers), then
  ``pending`` and ``rejected``;
* ``<stem>.report.html``: :func:`fairsets.annotate.vote.report.write_vote_report` with up to 24
  agreed and 24 disputed boxes, chosen by the seed.

**Re-runs.** A re-run is resumable: kill it and run it again, and every answered request comes
from the cache. It renders only what it must: each rendered view's SHA-256 is recorded in the view
index (:func:`fairsets.annotate.chat.items.remember_view`, in ``chat-cache/views``) under the image's
SHA-256 from ``images/{shard}.parquet``, the box, the view settings and the renderer version; a
box whose every answer is found by that digest (:meth:`~fairsets.fetch.chat.ChatClient.lookup`
with :func:`~fairsets.fetch.chat.image_digest_part`) is not rendered at all, and the report's
examples are kept there at thumbnail size. A folder whose images table has no ``sha256`` is
rendered every time.
The outputs hold no time: a re-run whose answers all come from the cache writes the same VOTES
file, and two such re-runs write byte-identical files (only ``cached`` and the run's request
counters differ from the run that asked the servers).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fairsets.core.atomic import atomic_write_text
from fairsets.core.data import derive_seed
from fairsets.core.progress import Progress
from fairsets.fetch.chat import ChatRequest, user

from .. import layout
from ..chat.annotators import load_voters
from ..chat.items import BoxItem, kept_boxes, remember_view
from ..chat.items import sample as sample_items
from ..chat.requests import CAPTION_VIEW, VOTE_VIEW, chat_cache_dir
from ..heads.labels import item_id
from .consensus import DEFAULT_CAP, Ballot, consensus, write_labels
from .prompts import ATTRIBUTES, INVALID, OK, OPTIONS, REFUSED, build_question, parse_answer

if TYPE_CHECKING:
    from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatResult

    from .prompts import Question

__all__ = [
    "ANSWER_SCHEMA",
    "DEFAULT_RELAX",
    "EXAMPLES",
    "FAILED",
    "VoteResult",
    "output_paths",
    "parse_relax",
    "race_sample",
    "vote_boxes",
]

#: The status of an answer that never came (see the module docstring).
FAILED = "failed"
#: Relaxed rules by attribute when none is given.
DEFAULT_RELAX: dict[str, dict[str, int]] = {"gender": {"mixed": 2}, "race": {}}
#: The longest raw answer stored (characters): the first and last half are kept, so both a letter
#: and the answer after a long reasoning block survive.
MAX_ANSWER_CHARS = 4000
#: Agreed and disputed examples on the report page, each at most.
EXAMPLES = 24
#: Answer length of a vote: a letter (room for a short preamble).
VOTE_MAX_TOKENS = 16
_LABEL_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".ndjson")

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
    ]
)


@dataclass
class VoteResult:
    """What :func:`vote_boxes` wrote and did.

    Attributes:
        votes, answers, agreement, report: The four files.
        stats: The consensus statistics (``agreement.json``'s ``stats``).
        run: ``agreement.json``'s ``run``.
        pending: Items left out because a request failed (a re-run asks them again).
        rejected: ``item → reason`` for items whose view could not be made.
        requests_sent, cache_hits, retries: Over every annotator, this run.
        seconds: Wall time of this run.
    """

    votes: Path
    answers: Path
    agreement: Path
    report: Path
    stats: dict[str, Any]
    run: dict[str, Any]
    pending: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    requests_sent: int = 0
    cache_hits: int = 0
    retries: int = 0
    seconds: float = 0.0

    @property
    def kept(self) -> int:
        """Boxes the VOTES file holds."""
        return sum(self.stats["counts"]["kept"].values())


def output_paths(out: str | Path) -> dict[str, Path]:
    """``votes``, ``answers``, ``agreement`` and ``report``: VOTES and the files named from its stem."""
    votes = Path(out)
    stem = votes.name[: -len(votes.suffix)] if votes.suffix else votes.name
    return {
        "votes": votes,
        "answers": votes.with_name(f"{stem}.answers.parquet"),
        "agreement": votes.with_name(f"{stem}.agreement.json"),
        "report": votes.with_name(f"{stem}.report.html"),
    }


def parse_relax(values: Sequence[str] | None, attribute: str) -> dict[str, int] | None:
    """``["mixed=2"]`` → ``{"mixed": 2}``; ``["none"]`` → ``{}``; nothing given → None (the default).

    Raises:
        ValueError: Not ``LABEL=K``, a label the attribute's question does not have, or K not a number.
    """
    if not values:
        return None
    if [v.strip().lower() for v in values] == ["none"]:
        return {}
    labels = _labels(attribute)
    out: dict[str, int] = {}
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            label, eq, k = part.partition("=")
            label = label.strip()
            if part.lower() == "none":
                raise ValueError("--relax none cannot be combined with LABEL=K rules; give one or the other")
            if not eq or not k.strip().lstrip("-").isdigit():
                raise ValueError(f"--relax {part!r}: write LABEL=K (e.g. mixed=2) or none")
            if label not in labels:
                raise ValueError(
                    f"--relax {part!r}: {attribute} has no label {label!r}; use {', '.join(labels)}"
                )
            out[label] = int(k)
    return out


def _labels(attribute: str) -> list[str]:
    if attribute not in OPTIONS:
        raise ValueError(f"unknown attribute {attribute!r}; choose one of {', '.join(ATTRIBUTES)}")
    return [label for label, _ in OPTIONS[attribute][1]]


def race_sample(
    items: Sequence[BoxItem], recalled: Mapping[str, Sequence[str]], n: int, seed: int
) -> tuple[list[BoxItem], dict[str, int]]:
    """The race vote's boxes: equal turns over the recalled labels (see the module docstring).

    Args:
        items: The kept boxes.
        recalled: ``label → items`` (:func:`~fairsets.annotate.vote.prompts.recall_candidates`),
            in keyword-file order.
        n: Boxes to choose at most.
        seed: Orders each label's pool.

    Returns:
        The chosen boxes sorted by (shard, key, box_id), and per label the boxes it added.
    """
    by_id = {it.item: it for it in items}
    pools = {
        label: sorted(set(ids), key=lambda i: (derive_seed("vote-race", int(seed), label, i), i))
        for label, ids in recalled.items()
    }
    where = dict.fromkeys(pools, 0)
    chosen: dict[str, BoxItem] = {}
    added = dict.fromkeys(pools, 0)
    while len(chosen) < n and any(where[lab] < len(pools[lab]) for lab in pools):
        for label, pool in pools.items():
            if len(chosen) >= n:
                break
            while where[label] < len(pool) and pool[where[label]] in chosen:
                where[label] += 1
            if where[label] < len(pool):
                it = pool[where[label]]
                chosen[it] = by_id[it]
                added[label] += 1
                where[label] += 1
    picked = sorted(chosen.values(), key=lambda it: (it.shard, it.key, it.box_id))
    return picked, added


# --------------------------------------------------------------------------- asking


def vote_request(
    question: Question, jpeg: bytes | dict[str, Any], *, max_tokens: int = VOTE_MAX_TOKENS
) -> ChatRequest:
    """One multiple-choice question about one box view (temperature 0); ``jpeg`` is the view, or an image
    part standing for it (:func:`fairsets.fetch.chat.image_digest_part`, for a cache look-up). An
    ``invalid`` reply (:func:`~fairsets.annotate.vote.prompts.parse_answer`) is not cached."""

    def accept(text: str) -> bool:
        return parse_answer(text, question)[1] != INVALID

    return ChatRequest(
        [user(question.text, images=[jpeg])], temperature=0.0, max_tokens=max_tokens, accept=accept
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


def _read(row: dict[str, Any], result: ChatResult, question: Any) -> None:
    """Fill an answered row: the parsed label and status, the raw text kept."""
    if result.error is not None:
        return
    label, status = parse_answer(result.text, question)
    row.update(status=status, label=label, answer=_kept(result.text), error=None)


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
class _Asked:
    """What the asking step gathered: answer rows per annotator, their counters, the rejected items."""

    rows: dict[str, list[dict[str, Any]]]
    counters: dict[str, Counter[str]]
    rejected: dict[str, str] = field(default_factory=dict)
    sources: dict[tuple[str, str], str | None] = field(default_factory=dict)
    rendered: int = 0


def _ask_all(
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
) -> _Asked:
    """Every annotator's answer for every item (see the module docstring, *Asking* and *Re-runs*).

    First, without rendering: an item whose view the index knows and whose every answer is in the
    cache (looked up by the view's digest) is answered from there. The others are rendered once, by
    one thread, and each view is handed to every annotator's :meth:`ChatClient.stream`, each
    annotator in its own thread at its own pace. The first fatal error (in annotator order) is
    raised, named, once every thread has stopped.
    """
    from fairsets.fetch.chat import ChatServiceError, image_digest_part

    from ..chat.items import source_sha256, view_digest, views

    lock = threading.Lock()
    asked = _Asked(rows={n: [] for n in names}, counters={n: Counter[str]() for n in names})
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


# --------------------------------------------------------------------------- the vote


def _sheet_copy(jpeg: bytes) -> bytes:
    """``jpeg`` at the report's thumbnail size (JPEG quality 95): all the contact sheet shows."""
    import io

    from PIL import Image

    from .report import THUMB_SIDE

    with Image.open(io.BytesIO(jpeg)) as im:
        im = im.convert("RGB")
        im.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def _example_views(
    folder: Path, wanted: Sequence[BoxItem], view_kwargs: Mapping[str, Any], sources: Mapping[Any, str | None]
) -> dict[str, bytes]:
    """The report's example views at thumbnail size: kept in the view index by the run that first
    rendered them (so a re-run renders nothing), else rendered and kept; ``b""`` for a box whose
    image is gone."""
    import hashlib

    from ..chat.items import keep_view, kept_view, view_digest, views

    index = chat_cache_dir(folder) / "views"
    shown: dict[str, bytes] = {}
    missing: list[BoxItem] = []
    for it in wanted:
        source = sources.get((it.shard, it.key))
        data = kept_view(index, view_digest(index, it, source, **view_kwargs))
        if data is None:
            missing.append(it)
        else:
            shown[it.item] = data
    for it, jpeg, _ in views(folder, missing, **view_kwargs):
        if jpeg is None:
            shown[it.item] = b""
            continue
        small = _sheet_copy(jpeg)
        remember_view(index, it, sources.get((it.shard, it.key)), jpeg, **view_kwargs)
        keep_view(index, hashlib.sha256(jpeg).hexdigest(), small)
        shown[it.item] = small
    return shown


def _check_out(out: Path) -> None:
    if out.is_dir():
        raise layout.AnnotationError(
            f"--out {out}: a folder; give a file name such as {out / 'votes.parquet'}"
        )
    if out.suffix.lower() not in _LABEL_SUFFIXES:
        raise layout.AnnotationError(
            f"--out {out}: unknown LABELS format {out.suffix or '(no suffix)'!r}; "
            "use .csv, .parquet or .jsonl"
        )
    for path in list(output_paths(out).values())[1:]:
        if path.is_dir():
            raise layout.AnnotationError(f"{path}: a folder where the vote writes a file; move it away")


def _choose_examples(
    rows: Sequence[Mapping[str, Any]], disputed: Sequence[Ballot], seed: int
) -> tuple[list[str], list[str]]:
    def pick(ids: list[str], kind: str) -> list[str]:
        return sorted(ids, key=lambda i: (derive_seed("vote-examples", int(seed), kind, i), i))[:EXAMPLES]

    agreed = pick([item_id(r["shard"], r["key"], r["box_id"]) for r in rows], "agreed")
    return agreed, pick([b.item for b in disputed], "disputed")


def vote_boxes(
    ann: str | Path,
    *,
    attribute: str,
    annotators: str | Path,
    sample: int,
    out: str | Path,
    voters: Sequence[str] | None = None,
    per_class_cap: int | None = DEFAULT_CAP,
    view: str = "crop",
    seed: int = 0,
    relax: Mapping[str, int] | None = None,
    keywords: str | Path | None = None,
    max_retries: int = 3,
    backoff: float = 1.0,
    progress: Progress | None = None,
) -> VoteResult:
    """Ask every annotator about a sample of kept boxes and keep their consensus (module docstring).

    Args:
        ann: The annotation folder (``fairsets annotate persons`` wrote it).
        attribute: ``gender`` or ``race``.
        annotators: ``annotators.toml``.
        voters: The names of the tables that vote, in this order (at least two; each must be in
            the file); None: every table of the file votes (the file may also hold captioners
            and judges: name the voters then).
        sample: Boxes to ask about (fewer when the folder, or the race recall, has fewer).
        out: The VOTES file (``.csv``, ``.parquet`` or ``.jsonl``); the other files go beside it.
        per_class_cap: Boxes kept per label at most (None: all).
        view: ``crop`` or ``redbox``.
        seed: The sample, the questions' option order, the cap and the report's examples.
        relax: Relaxed consensus rules (``{"mixed": 2}``); None: :data:`DEFAULT_RELAX`; ``{}``: none.
        keywords: The race keyword file (default: the one shipped with fairsets).
        max_retries: Retries of a request answered 429/5xx or timing out.
        backoff: First wait (seconds) before a retry without ``Retry-After``; doubles each retry.
        progress: Progress display (default: off); shows requests per second.

    Returns:
        A :class:`VoteResult`.

    Raises:
        AnnotationError: A bad folder, annotators file, keyword file or ``out``; a voter not in
            the file (the message lists the file's tables) or fewer than two voters.
        ValueError: A bad attribute, sample, view, cap or relax rule.
        ChatServiceError: An annotator's endpoint refuses every request (bad key, unknown model);
            the message names the annotator. Answers received before it are cached.
    """
    from fairsets.core.tables import write_table

    from .prompts import load_keywords, recall_candidates
    from .report import Example, write_vote_report

    started = time.monotonic()
    labels = _labels(attribute)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ValueError(f"--sample {sample!r}: give the number of boxes to ask about (1 or more)")
    if view not in ("crop", "redbox"):
        raise ValueError(f"--view {view!r}: use crop or redbox")
    rules = dict(DEFAULT_RELAX[attribute] if relax is None else relax)
    for label in rules:
        if label not in labels:
            raise ValueError(f"relax: {attribute} has no label {label!r}; use {', '.join(labels)}")
    folder, target = Path(ann), Path(out)
    _check_out(target)
    paths = output_paths(target)
    chosen_annotators = load_voters(annotators, voters)
    names = chosen_annotators.names
    for label, k in rules.items():
        if not 1 <= k <= len(names):
            raise ValueError(f"relax {label}={k}: give a number of annotators from 1 to {len(names)}")
    endpoints: dict[str, ChatEndpoint] = dict(chosen_annotators.endpoints)

    everything = kept_boxes(folder)
    if not everything:
        raise layout.AnnotationError(
            f"{folder}: no kept person boxes to vote on; check annotate persons' drop reasons in boxes/"
        )
    run_info: dict[str, Any] = {
        "attribute": attribute,
        "seed": seed,
        "view": view,
        "sample": {"asked": sample, "kept_boxes": len(everything)},
    }
    if attribute == "race":
        words = load_keywords(keywords)
        recalled = recall_candidates(((it.item, it.alt_text) for it in everything), words)
        items, added = race_sample(everything, recalled, sample, seed)
        if not items:
            where = "the default keyword file" if keywords is None else f"--keywords {keywords}"
            raise layout.AnnotationError(
                f"{folder}: no kept box's alt-text matches a keyword of {where}; "
                "give a keyword file with words these captions use"
            )
        run_info["recall"] = {
            label: {"candidates": len(set(ids)), "chosen": added[label]} for label, ids in recalled.items()
        }
        run_info["keywords"] = "default" if keywords is None else Path(keywords).name
    else:
        items = sample_items(everything, sample, seed, salt=f"vote-{attribute}")
    run_info["sample"]["chosen"] = len(items)

    view_kwargs = dict(VOTE_VIEW if view == "crop" else CAPTION_VIEW)
    from fairsets.fetch.chat import ChatClient

    cache = chat_cache_dir(folder)
    clients = {
        name: ChatClient(ep, cache_dir=cache, max_retries=max_retries, backoff=backoff)
        for name, ep in endpoints.items()
    }
    progress = progress or Progress(False)
    lock = threading.Lock()

    with progress.stage(f"vote {attribute}", len(items) * len(names), rates=("requests", "cached")) as bar:

        def advance(n: int = 1, **more: int) -> None:
            with lock:
                bar(n, **more)

        asked = _ask_all(
            folder, items, attribute=attribute, seed=seed, names=names, endpoints=endpoints,
            clients=clients, view_kwargs=view_kwargs, advance=advance,
        )  # fmt: skip
    rows, counters, rejected = asked.rows, asked.counters, asked.rejected

    # ballots: one per item every annotator answered (ok, invalid or refused)
    by_item: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        for row in rows[name]:
            by_item.setdefault(row["item"], []).append(row)
    ballots: list[Ballot] = []
    pending: list[str] = []
    item_of = {it.item: it for it in items}
    for item in sorted(by_item, key=lambda i: (item_of[i].shard, item_of[i].key, item_of[i].box_id)):
        answers = by_item[item]
        if any(r["status"] == FAILED for r in answers):
            if item not in rejected:
                pending.append(item)
            continue
        it = item_of[item]
        ballots.append(
            Ballot(
                it.shard,
                it.key,
                it.box_id,
                tuple(r["label"] for r in answers),
                tuple(r["status"] for r in answers),
            )
        )
    result = consensus(ballots, names, labels=labels, relax=rules, per_class_cap=per_class_cap, seed=seed)

    all_rows = [r for name in names for r in rows[name]]
    all_rows.sort(key=lambda r: (r["shard"], r["key"], r["box_id"], names.index(r["annotator"])))
    statuses = {name: Counter(r["status"] for r in rows[name]) for name in names}
    run_info["annotators"] = [
        {
            "name": name,
            "model": endpoints[name].model,
            "host": endpoints[name].where,
            "answers": {s: statuses[name].get(s, 0) for s in (OK, INVALID, REFUSED, FAILED)},
            "requests_sent": counters[name]["requests_sent"],
            "cache_hits": counters[name]["cache_hits"],
            "retries": counters[name]["retries"],
            "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows[name]),
            "completion_tokens": sum(r["completion_tokens"] or 0 for r in rows[name]),
        }
        for name in names
    ]
    totals = {
        k: sum(a[k] for a in run_info["annotators"])
        for k in ("requests_sent", "cache_hits", "retries", "prompt_tokens", "completion_tokens")
    }
    run_info.update(totals)
    run_info["failed"] = {"pending": len(pending), "rejected": len(rejected)}
    run_info["files"] = {k: p.name for k, p in paths.items()}

    # the files: VOTES, answers, agreement, report (VOTES last: it is what the next step reads)
    write_table(paths["answers"], all_rows, ANSWER_SCHEMA)
    document = {
        "run": run_info,
        "stats": result.stats,
        "pending": pending,
        "rejected": [{"item": i, "reason": rejected[i]} for i in rejected],
    }
    atomic_write_text(paths["agreement"], json.dumps(document, indent=1, ensure_ascii=False) + "\n")

    kept_ids = {item_id(r["shard"], r["key"], r["box_id"]) for r in result.rows}
    disputed = [b for b in ballots if b.item not in kept_ids]
    agreed_ids, disputed_ids = _choose_examples(result.rows, disputed, seed)
    row_of = {item_id(r["shard"], r["key"], r["box_id"]): r for r in result.rows}
    wanted = [item_of[i] for i in sorted(set(agreed_ids) | set(disputed_ids))]
    wanted.sort(key=lambda it: (it.shard, it.key, it.box_id))
    shown = _example_views(folder, wanted, view_kwargs, asked.sources)

    def example(item: str) -> Example:
        votes = {r["annotator"]: r["label"] or r["status"] for r in by_item[item]}
        kept = row_of.get(item)
        return Example(
            item=item,
            jpeg=shown.get(item, b""),
            votes=votes,
            label=kept["label"] if kept else None,
            rule=kept["rule"] if kept else None,
        )

    examples = [example(i) for i in agreed_ids] + [example(i) for i in disputed_ids]
    report_run = {**run_info, "pending": pending[:50], "rejected": document["rejected"][:50]}
    write_vote_report(
        paths["report"], result.stats, examples, title=f"{attribute} vote: {folder.name}", run=report_run
    )
    write_labels(paths["votes"], result.rows)
    return VoteResult(
        votes=paths["votes"],
        answers=paths["answers"],
        agreement=paths["agreement"],
        report=paths["report"],
        stats=result.stats,
        run=run_info,
        pending=pending,
        rejected=dict(sorted(rejected.items())),
        requests_sent=totals["requests_sent"],
        cache_hits=totals["cache_hits"],
        retries=totals["retries"],
        seconds=time.monotonic() - started,
    )
