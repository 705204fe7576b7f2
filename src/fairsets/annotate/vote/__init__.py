"""Stage 3a, consensus labels from several chat-model annotators (``fairsets annotate vote``).

Reads the kept boxes (through :mod:`fairsets.annotate.chat`) and an annotators file; writes the
answers (``<stem>.answers.parquet``), the consensus LABELS file (:mod:`fairsets.annotate.heads.labels`
format, which ``annotate train`` reads), its statistics and the report page next to the output
(:func:`~.run.output_paths`), caches every answer in ``ANN/.fairsets/chat-cache``, and writes a
summary of the vote in ``ANN/manifest.json``'s ``votes`` (:mod:`.record`, read when publishing). The
questions and their parsed answers are :mod:`.prompts`, the consensus with its agreement
statistics :mod:`.consensus`, the asking of every annotator :mod:`.ask`, the calibration of the
annotators' confidence against their agreement :mod:`.calibration`, the report page :mod:`.report`
with its examples :mod:`.examples`, and the run that ties them :mod:`.run`.

Importing this package imports none of its modules: each name below is imported on first use
(so ``from fairsets.annotate.vote import vote_boxes`` works as it did when this was one module).
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "ANSWER_SCHEMA",
    "ATTRIBUTES",
    "CALIBRATION_RULE",
    "CONFIDENCE_RULE",
    "DEFAULT_CAP",
    "DEFAULT_RELAX",
    "EXAMPLES",
    "FAILED",
    "INVALID",
    "LOW_CONFIDENCE",
    "MAX_ANSWER_CHARS",
    "NO_CONFIDENCE",
    "OK",
    "OPTIONS",
    "REFUSED",
    "ROW_COLUMNS",
    "THUMB_SIDE",
    "VOTE_MAX_TOKENS",
    "Asked",
    "Ballot",
    "Consensus",
    "Example",
    "Question",
    "VoteResult",
    "ask_all",
    "build_question",
    "calibration_html",
    "choose_examples",
    "default_keywords_path",
    "example_views",
    "load_keywords",
    "output_paths",
    "parse_answer",
    "parse_relax",
    "prompt_template",
    "race_sample",
    "recall_candidates",
    "record_vote",
    "render_vote_report",
    "sheet_copy",
    "vote_boxes",
    "vote_request",
    "vote_summary",
    "write_labels",
    "write_vote_report",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ANSWER_SCHEMA": "fairsets.annotate.vote.ask",
        "ATTRIBUTES": "fairsets.annotate.vote.prompts",
        "Asked": "fairsets.annotate.vote.ask",
        "CALIBRATION_RULE": "fairsets.annotate.vote.calibration",
        "CONFIDENCE_RULE": "fairsets.annotate.vote.consensus",
        "Ballot": "fairsets.annotate.vote.consensus",
        "Consensus": "fairsets.annotate.vote.consensus",
        "DEFAULT_CAP": "fairsets.annotate.vote.consensus",
        "DEFAULT_RELAX": "fairsets.annotate.vote.run",
        "EXAMPLES": "fairsets.annotate.vote.examples",
        "Example": "fairsets.annotate.vote.report",
        "FAILED": "fairsets.annotate.vote.ask",
        "INVALID": "fairsets.annotate.vote.prompts",
        "LOW_CONFIDENCE": "fairsets.annotate.vote.consensus",
        "MAX_ANSWER_CHARS": "fairsets.annotate.vote.ask",
        "NO_CONFIDENCE": "fairsets.annotate.vote.consensus",
        "OK": "fairsets.annotate.vote.prompts",
        "OPTIONS": "fairsets.annotate.vote.prompts",
        "Question": "fairsets.annotate.vote.prompts",
        "REFUSED": "fairsets.annotate.vote.prompts",
        "ROW_COLUMNS": "fairsets.annotate.vote.consensus",
        "THUMB_SIDE": "fairsets.annotate.vote.report",
        "VOTE_MAX_TOKENS": "fairsets.annotate.vote.ask",
        "VoteResult": "fairsets.annotate.vote.run",
        "ask_all": "fairsets.annotate.vote.ask",
        "build_question": "fairsets.annotate.vote.prompts",
        "calibration_html": "fairsets.annotate.vote.calibration",
        "choose_examples": "fairsets.annotate.vote.examples",
        "default_keywords_path": "fairsets.annotate.vote.prompts",
        "example_views": "fairsets.annotate.vote.examples",
        "load_keywords": "fairsets.annotate.vote.prompts",
        "output_paths": "fairsets.annotate.vote.run",
        "parse_answer": "fairsets.annotate.vote.prompts",
        "parse_relax": "fairsets.annotate.vote.run",
        "prompt_template": "fairsets.annotate.vote.record",
        "race_sample": "fairsets.annotate.vote.run",
        "recall_candidates": "fairsets.annotate.vote.prompts",
        "record_vote": "fairsets.annotate.vote.record",
        "render_vote_report": "fairsets.annotate.vote.report",
        "sheet_copy": "fairsets.annotate.vote.examples",
        "vote_boxes": "fairsets.annotate.vote.run",
        "vote_request": "fairsets.annotate.vote.ask",
        "vote_summary": "fairsets.annotate.vote.record",
        "write_labels": "fairsets.annotate.vote.consensus",
        "write_vote_report": "fairsets.annotate.vote.report",
    },
)
