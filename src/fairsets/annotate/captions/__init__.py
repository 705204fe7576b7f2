"""Stage 3b, red-box person captions, and the choice of a captioner by a judge model.

``fairsets annotate caption`` (:mod:`.caption`) reads the kept boxes (through
:mod:`fairsets.annotate.chat`) and writes ``ANN/captions/{captioner}/{shard}.parquet``
(:data:`~fairsets.annotate.layout.CAPTION_SCHEMA`, :func:`~fairsets.annotate.layout.captions_path`)
with markers ``ANN/.fairsets/markers/caption-{captioner}/{shard}.json``. ``fairsets annotate
compare-captioners`` (:mod:`.compare`) captions a sample with two captioners and has a judge pick the
better caption (:mod:`.judge`: prompts, verdicts, the win rate); it writes ``OUT/verdicts.parquet``,
``OUT/summary.json`` and ``OUT/report.html``. Both cache every answer in ``ANN/.fairsets/chat-cache``.

Importing this package imports none of its modules: each name below is imported on first use.
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "CAPTIONS_DIR",
    "CAPTION_SCHEMA",
    "CHUNK",
    "DEFAULT_JUDGE_INSTRUCTION",
    "MAX_CAPTION_CHARS",
    "SALT",
    "STATUSES",
    "VERDICTS",
    "VERDICT_COLUMNS",
    "JudgePrompt",
    "WinRate",
    "a_shown_first",
    "bootstrap_interval",
    "caption_boxes",
    "captions_path",
    "compare_captioners",
    "judge_prompt",
    "parse_position",
    "prompt_sha256",
    "report_html",
    "stage",
    "to_verdict",
    "wilson_interval",
    "win_rate",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CAPTIONS_DIR": "fairsets.annotate.captions.caption",
        "CAPTION_SCHEMA": "fairsets.annotate.captions.caption",
        "CHUNK": "fairsets.annotate.captions.compare",
        "DEFAULT_JUDGE_INSTRUCTION": "fairsets.annotate.captions.judge",
        "JudgePrompt": "fairsets.annotate.captions.judge",
        "MAX_CAPTION_CHARS": "fairsets.annotate.captions.caption",
        "SALT": "fairsets.annotate.captions.compare",
        "STATUSES": "fairsets.annotate.captions.caption",
        "VERDICTS": "fairsets.annotate.captions.judge",
        "VERDICT_COLUMNS": "fairsets.annotate.captions.compare",
        "WinRate": "fairsets.annotate.captions.judge",
        "a_shown_first": "fairsets.annotate.captions.judge",
        "bootstrap_interval": "fairsets.annotate.captions.judge",
        "caption_boxes": "fairsets.annotate.captions.caption",
        "captions_path": "fairsets.annotate.captions.caption",
        "compare_captioners": "fairsets.annotate.captions.compare",
        "judge_prompt": "fairsets.annotate.captions.judge",
        "parse_position": "fairsets.annotate.captions.judge",
        "prompt_sha256": "fairsets.annotate.captions.caption",
        "report_html": "fairsets.annotate.captions.compare",
        "stage": "fairsets.annotate.captions.caption",
        "to_verdict": "fairsets.annotate.captions.judge",
        "wilson_interval": "fairsets.annotate.captions.judge",
        "win_rate": "fairsets.annotate.captions.judge",
    },
)
