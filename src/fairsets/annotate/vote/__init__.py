"""Stage 3a, consensus labels from several chat-model annotators (``fairsets annotate vote``).

Reads the kept boxes (through :mod:`fairsets.annotate.chat`) and an annotators file; writes the
answers (``<stem>.answers.parquet``), the consensus LABELS file (:mod:`fairsets.annotate.heads.labels`
format, which ``annotate train`` reads), its statistics and the report page next to the output
(:func:`~.run.output_paths`), and caches every answer in ``ANN/.fairsets/chat-cache``. The
questions and their parsed answers are :mod:`.prompts`, the consensus with its agreement
statistics :mod:`.consensus`, the report page :mod:`.report`, the run :mod:`.run`.

Importing this package imports none of its modules: each name below is imported on first use
(so ``from fairsets.annotate.vote import vote_boxes`` works as it did when this was one module).
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "ANSWER_SCHEMA",
    "ATTRIBUTES",
    "DEFAULT_CAP",
    "DEFAULT_RELAX",
    "EXAMPLES",
    "FAILED",
    "INVALID",
    "OK",
    "OPTIONS",
    "REFUSED",
    "ROW_COLUMNS",
    "THUMB_SIDE",
    "Ballot",
    "Consensus",
    "Example",
    "Question",
    "VoteResult",
    "build_question",
    "consensus",
    "default_keywords_path",
    "load_keywords",
    "output_paths",
    "parse_answer",
    "parse_relax",
    "race_sample",
    "recall_candidates",
    "render_vote_report",
    "vote_boxes",
    "write_labels",
    "write_vote_report",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ANSWER_SCHEMA": "fairsets.annotate.vote.run",
        "ATTRIBUTES": "fairsets.annotate.vote.prompts",
        "Ballot": "fairsets.annotate.vote.consensus",
        "Consensus": "fairsets.annotate.vote.consensus",
        "DEFAULT_CAP": "fairsets.annotate.vote.consensus",
        "DEFAULT_RELAX": "fairsets.annotate.vote.run",
        "EXAMPLES": "fairsets.annotate.vote.run",
        "Example": "fairsets.annotate.vote.report",
        "FAILED": "fairsets.annotate.vote.run",
        "INVALID": "fairsets.annotate.vote.prompts",
        "OK": "fairsets.annotate.vote.prompts",
        "OPTIONS": "fairsets.annotate.vote.prompts",
        "Question": "fairsets.annotate.vote.prompts",
        "REFUSED": "fairsets.annotate.vote.prompts",
        "ROW_COLUMNS": "fairsets.annotate.vote.consensus",
        "THUMB_SIDE": "fairsets.annotate.vote.report",
        "VoteResult": "fairsets.annotate.vote.run",
        "build_question": "fairsets.annotate.vote.prompts",
        "consensus": "fairsets.annotate.vote.consensus",
        "default_keywords_path": "fairsets.annotate.vote.prompts",
        "load_keywords": "fairsets.annotate.vote.prompts",
        "output_paths": "fairsets.annotate.vote.run",
        "parse_answer": "fairsets.annotate.vote.prompts",
        "parse_relax": "fairsets.annotate.vote.run",
        "race_sample": "fairsets.annotate.vote.run",
        "recall_candidates": "fairsets.annotate.vote.prompts",
        "render_vote_report": "fairsets.annotate.vote.report",
        "vote_boxes": "fairsets.annotate.vote.run",
        "write_labels": "fairsets.annotate.vote.consensus",
        "write_vote_report": "fairsets.annotate.vote.report",
    },
)
