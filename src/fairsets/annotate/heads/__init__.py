"""Stage 2, perceived-attribute heads: trained on labelled boxes, applied to every kept box, verified.

Reads LABELS files (:mod:`.labels`) and the boxes of stage 1 (``ANN/boxes/{shard}.parquet``) with
the shards' images; writes a head file (:mod:`.store`: the head and its format), the embedding
caches ``ANN/.fairsets/embeddings/``, ``ANN/attributes/{attr}/{shard}.parquet``
(:func:`~fairsets.annotate.layout.attribute_path`, :func:`~fairsets.annotate.layout.attribute_schema`)
and ``manifest["attributes"]``. Training: :mod:`.train` (the run), :mod:`.train_split` (split by
image), :mod:`.embed` (crops to embeddings), :mod:`.finetune` (the encoder itself). Applying:
:mod:`.classify` (over shards), :mod:`.classify_task` (one shard). Verifying against human labels:
:mod:`.verify` (``OUT/verify_{attr}.json``, ``OUT/verify_{attr}.png``).

Importing this package imports none of its modules: each name below is imported on first use
(so ``from fairsets.annotate.heads import Head, load_head`` works as it did when this was one
module, :mod:`.store`).
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "BOX_COLUMNS",
    "COLUMNS",
    "CONFUSION_FORMAT",
    "C_GRID",
    "DEFAULT_SPLIT",
    "DEFAULT_THRESHOLDS",
    "FINETUNE_FAMILIES",
    "FORMAT",
    "IMAGES_PER_READ",
    "KEY_COLUMNS",
    "PARTS",
    "CropSource",
    "FinetuneParams",
    "Finetuned",
    "Head",
    "LabelRow",
    "LabelledEmbeddings",
    "Labels",
    "LabelsError",
    "TrainResult",
    "classify_boxes",
    "crop_cache",
    "crop_sha256",
    "crop_source",
    "embed_crops",
    "embed_labelled",
    "encoder_for",
    "evaluate",
    "finetune_encoder",
    "fit_logistic",
    "image_digests",
    "item_id",
    "iter_crops",
    "load_head",
    "parse_split",
    "plot_confusion",
    "read_human_labels",
    "read_labels",
    "run_classify_task",
    "split_parts",
    "stage",
    "summary_lines",
    "train_head",
    "verify_labels",
    "write_head",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BOX_COLUMNS": "fairsets.annotate.heads.labels",
        "COLUMNS": "fairsets.annotate.heads.labels",
        "CONFUSION_FORMAT": "fairsets.annotate.heads.verify",
        "C_GRID": "fairsets.annotate.heads.train",
        "CropSource": "fairsets.annotate.heads.embed",
        "DEFAULT_SPLIT": "fairsets.annotate.heads.train_split",
        "DEFAULT_THRESHOLDS": "fairsets.annotate.heads.verify",
        "FINETUNE_FAMILIES": "fairsets.annotate.heads.finetune",
        "FORMAT": "fairsets.annotate.heads.store",
        "FinetuneParams": "fairsets.annotate.heads.finetune",
        "Finetuned": "fairsets.annotate.heads.finetune",
        "Head": "fairsets.annotate.heads.store",
        "IMAGES_PER_READ": "fairsets.annotate.heads.classify_task",
        "KEY_COLUMNS": "fairsets.annotate.heads.verify",
        "LabelRow": "fairsets.annotate.heads.labels",
        "LabelledEmbeddings": "fairsets.annotate.heads.embed",
        "Labels": "fairsets.annotate.heads.labels",
        "LabelsError": "fairsets.annotate.heads.labels",
        "PARTS": "fairsets.annotate.heads.train_split",
        "TrainResult": "fairsets.annotate.heads.train",
        "classify_boxes": "fairsets.annotate.heads.classify",
        "crop_cache": "fairsets.annotate.heads.embed",
        "crop_sha256": "fairsets.annotate.heads.embed",
        "crop_source": "fairsets.annotate.heads.train",
        "embed_crops": "fairsets.annotate.heads.embed",
        "embed_labelled": "fairsets.annotate.heads.embed",
        "encoder_for": "fairsets.annotate.heads.classify_task",
        "evaluate": "fairsets.annotate.heads.store",
        "finetune_encoder": "fairsets.annotate.heads.finetune",
        "fit_logistic": "fairsets.annotate.heads.train",
        "image_digests": "fairsets.annotate.heads.train_split",
        "item_id": "fairsets.annotate.heads.labels",
        "iter_crops": "fairsets.annotate.heads.embed",
        "load_head": "fairsets.annotate.heads.store",
        "parse_split": "fairsets.annotate.heads.train_split",
        "plot_confusion": "fairsets.annotate.heads.train",
        "read_human_labels": "fairsets.annotate.heads.verify",
        "read_labels": "fairsets.annotate.heads.labels",
        "run_classify_task": "fairsets.annotate.heads.classify_task",
        "split_parts": "fairsets.annotate.heads.train_split",
        "stage": "fairsets.annotate.heads.classify_task",
        "summary_lines": "fairsets.annotate.heads.labels",
        "train_head": "fairsets.annotate.heads.train",
        "verify_labels": "fairsets.annotate.heads.verify",
        "write_head": "fairsets.annotate.heads.store",
    },
)
