"""The last step: an annotation folder made into a Hugging Face dataset (``fairsets publish ANN``).

Reads everything stages 1–3 wrote to ``ANN`` (:mod:`fairsets.annotate.layout`) and the audit
blocks stored in ``ANN/.fairsets/card/``; writes the prepared folder ``ANN/.fairsets/publish/``
(``data/boxes/{shard}.parquet``, ``data/images/{shard}.parquet``, ``README.md``,
``manifest.json``) and uploads it. :mod:`.dataset` prepares, verifies and publishes, :mod:`.tables`
writes the published tables, :mod:`.card` renders the dataset card.

Importing this package imports none of its modules: each name below is imported on first use
(so ``from fairsets.annotate.publish import prepare`` works as it did when this was one module).
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "DEFAULT_LICENSE",
    "FORMAT_VERSION",
    "GATED_FIELDS",
    "HF_LICENSES",
    "PUBLISHED_KIND",
    "STAGE",
    "TEMPLATE_NAME",
    "Prepared",
    "boxes_schema",
    "card_blocks_dir",
    "card_header",
    "check_annotation_card",
    "folder_kind",
    "is_annotation_folder",
    "prepare",
    "prepare_shard",
    "prepared_dir",
    "publish_annotations",
    "read_card_blocks",
    "refresh_prepared_card",
    "render_card",
    "scrub_paths",
    "table_counts",
    "verify_prepared",
    "write_card_block",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DEFAULT_LICENSE": "fairsets.annotate.publish.dataset",
        "FORMAT_VERSION": "fairsets.annotate.publish.tables",
        "GATED_FIELDS": "fairsets.annotate.publish.card",
        "HF_LICENSES": "fairsets.annotate.publish.card",
        "PUBLISHED_KIND": "fairsets.annotate.publish.dataset",
        "Prepared": "fairsets.annotate.publish.dataset",
        "STAGE": "fairsets.annotate.publish.tables",
        "TEMPLATE_NAME": "fairsets.annotate.publish.card",
        "boxes_schema": "fairsets.annotate.publish.tables",
        "card_blocks_dir": "fairsets.annotate.publish.dataset",
        "card_header": "fairsets.annotate.publish.card",
        "check_annotation_card": "fairsets.annotate.publish.card",
        "folder_kind": "fairsets.annotate.publish.dataset",
        "is_annotation_folder": "fairsets.annotate.publish.dataset",
        "prepare": "fairsets.annotate.publish.dataset",
        "prepare_shard": "fairsets.annotate.publish.tables",
        "prepared_dir": "fairsets.annotate.publish.dataset",
        "publish_annotations": "fairsets.annotate.publish.dataset",
        "read_card_blocks": "fairsets.annotate.publish.dataset",
        "refresh_prepared_card": "fairsets.annotate.publish.dataset",
        "render_card": "fairsets.annotate.publish.card",
        "scrub_paths": "fairsets.annotate.publish.tables",
        "table_counts": "fairsets.annotate.publish.tables",
        "verify_prepared": "fairsets.annotate.publish.dataset",
        "write_card_block": "fairsets.annotate.publish.dataset",
    },
)
