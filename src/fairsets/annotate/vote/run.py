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

**Asking** (:mod:`.ask`): each box is shown as a JPEG view (the crop, or with ``view="redbox"``
the whole image with the box framed in red) and each annotator is asked its own question; each
answer is cached as it arrives and gets a status, ``ok``, ``invalid``, ``refused`` or ``failed``.

**Consensus** (:func:`fairsets.annotate.vote.consensus.consensus`): a label is kept when every
annotator gave it, or by a relaxed rule: for ``gender`` by default ``{"mixed": 2}`` (at least two
annotators say ``mixed`` and no other label got as many votes: the method's "2 of 3", since a model
that sees only one of two people answers ``male`` or ``female``); none for ``race``. Then each
label keeps at most ``per_class_cap`` boxes, chosen by the seed. With ``min_vote_confidence``, an
answer counts only when its confidence reaches it (an answer under it or without one is an
abstention: :mod:`.consensus`). A box with a ``failed`` answer is
left out of this run's consensus and statistics: it is listed in ``agreement.json`` (``pending``
for a request that failed, ``rejected`` for a box with no image), and a re-run asks only those
requests again, every other answer coming from the cache.

**Outputs** (written atomically, after every answer is in):

* ``VOTES`` (``.csv``, ``.parquet`` or ``.jsonl``): the consensus rows, a LABELS table
  ``fairsets annotate train`` reads (``shard, key, box_id, label`` plus ``agreement``, ``rule``,
  ``votes``);
* ``<stem>.answers.parquet`` beside it (:data:`~.ask.ANSWER_SCHEMA`): one row per box and annotator with
  the status, label, raw answer, error, the options' order (``A=female,B=unclear,…``), whether
  it came from the cache, and ``confidence`` and ``option_probs`` (null without log-probabilities);
* ``<stem>.agreement.json``: ``stats`` (the consensus statistics: counts per label, invalid and
  refused per annotator, Fleiss' κ, Cohen's κ and the confusion matrix of every pair) and ``run``
  (attribute, seed, view, sample asked and chosen, race recall per label, each annotator's name,
  model and host, never a key, requests sent, cache hits, retries, tokens, failed answers), when
  an answer has a confidence ``calibration`` (:mod:`.calibration`), then ``pending`` and ``rejected``;
* ``<stem>.report.html``: :func:`fairsets.annotate.vote.report.write_vote_report` with up to 24
  agreed and 24 disputed boxes, chosen by the seed (:mod:`.examples`);
* then, under the folder's lock, a summary in ``ANN/manifest.json``'s ``votes[VOTES name]``
  (:mod:`.record`: voters' models, question, rule, counts, agreement; no host, no key, no path),
  which ``fairsets publish ANN`` turns into the RAI annotation protocol and the card.

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

import json
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text
from fairsets.core.data import derive_seed
from fairsets.core.progress import Progress

from .. import layout
from ..chat.annotators import load_voters
from ..chat.items import BoxItem, kept_boxes
from ..chat.items import sample as sample_items
from ..chat.requests import CAPTION_VIEW, VOTE_VIEW, chat_cache_dir
from ..heads.labels import item_id
from .ask import ANSWER_SCHEMA, FAILED, ask_all
from .consensus import DEFAULT_CAP, LOW_CONFIDENCE, NO_CONFIDENCE, Ballot, consensus, write_labels
from .examples import choose_examples, example_views
from .prompts import ATTRIBUTES, INVALID, OK, OPTIONS, REFUSED
from .record import record_vote, vote_summary

if TYPE_CHECKING:
    from fairsets.fetch.chat import ChatEndpoint

__all__ = ["DEFAULT_RELAX", "VoteResult", "output_paths", "parse_relax", "race_sample", "vote_boxes"]

#: Relaxed rules by attribute when none is given.
DEFAULT_RELAX: dict[str, dict[str, int]] = {"gender": {"mixed": 2}, "race": {}}
_LABEL_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".ndjson")


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
    min_vote_confidence: float | None = None,
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
        min_vote_confidence: An answer counts toward consensus only with a confidence (the
            probability of its letter) at least this, from 0 to 1; None: every answer counts.
        keywords: The race keyword file (default: the one shipped with fairsets).
        max_retries: Retries of a request answered 429/5xx or timing out.
        backoff: First wait (seconds) before a retry without ``Retry-After``; doubles each retry.
        progress: Progress display (default: off); shows requests per second.

    Returns:
        A :class:`VoteResult`.

    Raises:
        AnnotationError: A bad folder, annotators file, keyword file or ``out``; a voter not in
            the file (the message lists the file's tables) or fewer than two voters.
        ValueError: A bad attribute, sample, view, cap, relax rule or minimum confidence.
        ChatServiceError: An annotator's endpoint refuses every request (bad key, unknown model);
            the message names the annotator. Answers received before it are cached.
    """
    from fairsets.core.tables import write_table

    from .calibration import calibration
    from .prompts import load_keywords, recall_candidates
    from .report import Example, write_vote_report

    started = time.monotonic()
    labels = _labels(attribute)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ValueError(f"--sample {sample!r}: give the number of boxes to ask about (1 or more)")
    if view not in ("crop", "redbox"):
        raise ValueError(f"--view {view!r}: use crop or redbox")
    if min_vote_confidence is not None and not 0.0 <= min_vote_confidence <= 1.0:
        raise ValueError(f"--min-vote-confidence {min_vote_confidence!r}: give a probability from 0 to 1")
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
    from fairsets.fetch.chat.probe import require_constraint

    for ep in endpoints.values():  # fails closed, one line naming the annotator, before any vote
        require_constraint(ep)
    progress = progress or Progress(False)
    lock = threading.Lock()

    with progress.stage(f"vote {attribute}", len(items) * len(names), rates=("requests", "cached")) as bar:

        def advance(n: int = 1, **more: int) -> None:
            with lock:
                bar(n, **more)

        asked = ask_all(
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
                tuple(r["confidence"] for r in answers),
            )
        )
    result = consensus(
        ballots, names, labels=labels, relax=rules, per_class_cap=per_class_cap, seed=seed,
        min_confidence=min_vote_confidence,
    )  # fmt: skip

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
    calibrated = calibration(all_rows, names)
    document = {
        "run": run_info,
        "stats": result.stats,
        **({"calibration": calibrated} if calibrated else {}),
        "pending": pending,
        "rejected": [{"item": i, "reason": rejected[i]} for i in rejected],
    }
    atomic_write_text(paths["agreement"], json.dumps(document, indent=1, ensure_ascii=False) + "\n")

    kept_ids = {item_id(r["shard"], r["key"], r["box_id"]) for r in result.rows}
    disputed = [b for b in ballots if b.item not in kept_ids]
    agreed_ids, disputed_ids = choose_examples(result.rows, disputed, seed)
    row_of = {item_id(r["shard"], r["key"], r["box_id"]): r for r in result.rows}
    wanted = [item_of[i] for i in sorted(set(agreed_ids) | set(disputed_ids))]
    wanted.sort(key=lambda it: (it.shard, it.key, it.box_id))
    shown = example_views(folder, wanted, view_kwargs, asked.sources)

    def shown_vote(r: dict[str, Any]) -> str:
        low = min_vote_confidence is not None and r["status"] == OK
        if low and (r["confidence"] is None or r["confidence"] < min_vote_confidence):
            return NO_CONFIDENCE if r["confidence"] is None else LOW_CONFIDENCE
        return r["label"] or r["status"]

    def example(item: str) -> Example:
        votes = {r["annotator"]: shown_vote(r) for r in by_item[item]}
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
        paths["report"], result.stats, examples, title=f"{attribute} vote: {folder.name}", run=report_run,
        calibration=calibrated,
    )  # fmt: skip
    write_labels(paths["votes"], result.rows)
    # then what ANN/manifest.json says of this vote, for publishing (the vote's own files unchanged)
    record_vote(folder, vote_summary(run_info, result.stats, paths["votes"], run_info["files"], calibrated))
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
