"""Person-centric annotation of image–text shards (``fairsets annotate``).

The LAION person-annotation method, at web scale in design, one subpackage per stage:

1. :mod:`.boxes` — person boxes from any ultralytics detector, and the detector's audit against
   human boxes;
2. :mod:`.heads` — perceived-attribute heads trained on labelled boxes, applied to every kept box,
   and their agreement with human labels;
3. :mod:`.vote` — consensus labels from several chat-model annotators (LABELS files for
   :mod:`.heads`), and :mod:`.captions` — red-box person captions and the choice of a captioner by
   a judge model; both speak to their annotators through :mod:`.chat` (which boxes, how each is
   shown, the requests and their cache; the endpoints are :mod:`fairsets.fetch.chat`);
4. :mod:`.publish` — the folder made into a Hugging Face dataset with its card.

The ground they share stays here: the folder's layout (:mod:`.layout`: everything a run writes
lives in one folder), the shards read (:mod:`.shards`) and their images decoded (:mod:`.images`),
the run of one task per shard (:mod:`.tasks`), agreement statistics (:mod:`.agreement`), human CSV
files (:mod:`.human_csv`), the reading of a finished folder (:mod:`.read`) and shipped data files.
The commands are in :mod:`.cli`. A stage imports only the ground and the stages before it:
ground ← boxes, heads ← chat ← vote, captions; publish reads the ground only. Importing this
package (or any of its subpackages) imports no model library.

The modules that were here before the stages had packages can still be imported by their old
paths until fairsets 0.3, with a :class:`DeprecationWarning` (:data:`MOVED`,
:mod:`fairsets.core.moved`).
"""

from __future__ import annotations

from fairsets.core.moved import install_moved

#: Old module path → where the module is now (the old paths are removed in fairsets 0.3).
MOVED: dict[str, str] = {
    f"fairsets.annotate.{old}": f"fairsets.annotate.{new}"
    for old, new in {
        "persons": "boxes.persons",
        "persons_task": "boxes.task",
        "detection_audit": "boxes.detection_audit",
        "labels": "heads.labels",
        "embed": "heads.embed",
        "train": "heads.train",
        "train_split": "heads.train_split",
        "finetune": "heads.finetune",
        "classify": "heads.classify",
        "classify_task": "heads.classify_task",
        "verify": "heads.verify",
        "annotators": "chat.annotators",
        "items": "chat.items",
        "views": "chat.views",
        "chat_requests": "chat.requests",
        "vote_prompts": "vote.prompts",
        "consensus": "vote.consensus",
        "vote_report": "vote.report",
        "caption": "captions.caption",
        "compare": "captions.compare",
        "judge": "captions.judge",
        "publish_tables": "publish.tables",
        "card": "publish.card",
    }.items()
}

#: Names an old module had that its new module does not hold (they moved to the stage that uses them).
MOVED_NAMES: dict[str, dict[str, str]] = {
    "fairsets.annotate.chat_requests": {
        "vote_request": "fairsets.annotate.vote.ask",
        "VOTE_MAX_TOKENS": "fairsets.annotate.vote.ask",
        "judge_request": "fairsets.annotate.captions.compare",
        "JUDGE_MAX_TOKENS": "fairsets.annotate.captions.compare",
    },
}

install_moved(MOVED, removed_in="fairsets 0.3", extra=MOVED_NAMES)
