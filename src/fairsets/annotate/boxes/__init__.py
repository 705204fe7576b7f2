"""Stage 1, person boxes: a detector over every image of the shards (``fairsets annotate persons``).

Reads the image–text shards (:mod:`fairsets.annotate.shards`); writes ``ANN/boxes/{shard}.parquet``
(:data:`~fairsets.annotate.layout.BOX_SCHEMA`, :func:`~fairsets.annotate.layout.boxes_path`),
``ANN/images/{shard}.parquet`` (:func:`~fairsets.annotate.layout.images_path`), the markers
``ANN/.fairsets/markers/persons/{shard}.json`` and ``ANN/manifest.json``. The run over shards is
:mod:`.persons`, one shard's task (decode, detect, keep) :mod:`.task`; :mod:`.detection_audit`
measures the detector against human boxes (``annotate verify --boxes``: it reads a CSV of human
boxes, writes ``OUT/detection_audit.json``).

Importing this package imports none of its modules: each name below is imported on first use.
"""

from fairsets.core.lazy import lazy_exports

__all__ = [
    "AREA_FRACTION_CLASSES",
    "BOX_COLUMNS",
    "COCO_AREA_CLASSES",
    "DEFAULT_MODEL",
    "STAGE",
    "annotate_persons",
    "audit_detection",
    "detector_for",
    "iou_matrix",
    "keep_box",
    "keep_detector",
    "load_detector",
    "match_boxes",
    "read_human_boxes",
    "run_persons_task",
    "summary_line",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AREA_FRACTION_CLASSES": "fairsets.annotate.boxes.detection_audit",
        "BOX_COLUMNS": "fairsets.annotate.boxes.detection_audit",
        "COCO_AREA_CLASSES": "fairsets.annotate.boxes.detection_audit",
        "DEFAULT_MODEL": "fairsets.annotate.boxes.persons",
        "STAGE": "fairsets.annotate.boxes.task",
        "annotate_persons": "fairsets.annotate.boxes.persons",
        "audit_detection": "fairsets.annotate.boxes.detection_audit",
        "detector_for": "fairsets.annotate.boxes.task",
        "iou_matrix": "fairsets.annotate.boxes.detection_audit",
        "keep_box": "fairsets.annotate.boxes.task",
        "keep_detector": "fairsets.annotate.boxes.task",
        "load_detector": "fairsets.annotate.boxes.task",
        "match_boxes": "fairsets.annotate.boxes.detection_audit",
        "read_human_boxes": "fairsets.annotate.boxes.detection_audit",
        "run_persons_task": "fairsets.annotate.boxes.task",
        "summary_line": "fairsets.annotate.boxes.persons",
    },
)
