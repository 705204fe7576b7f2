r"""Entity-presence filtering (GeoProfiler §3.2, Appendix A.3): does an image show the entity?

Captions that mention an entity ("house") often come with images that do not show it. GeoProfiler
annotates a few hundred geo-diverse images per entity (Table 6), trains an SVM on CLIP image
features, reports F1 of the positive class on an in-distribution (ID) test set and on an
out-of-distribution (OOD) one made of held-out countries (Table 7: China, Chile, New Zealand,
Philippines and Spain in the paper), and drops the images it predicts do not show the entity.

Workflow::

    ann = load_annotations("house.csv", entity="house")       # image, present[, country, entity]
    data = embed_annotations(ann, vlm)                         # vlm = fairsets.models.load_vlm(...)
    result = fit_entity_classifier(data, ood_countries=PAPER_OOD_COUNTRIES, seed=0)
    result.classifier.save("house.npz")
    filter_dataset("captions.parquet", result.classifier, vlm, "filtered.parquet")

(:func:`train_entity_classifier` runs the first three steps; ``fairsets geo entity-train`` and
``fairsets geo entity-filter`` are the commands.)

Split
-----
OOD test: every row of the held-out countries (named, or a seeded choice that puts 15-20% of the
rows there). ID test: a seeded sample of ``id_test_size`` rows (the paper's 100) from the other
rows, stratified by label. Train: the rest. Without a country column there is no OOD test.
Rows whose image is missing or unreadable, and rows whose image content repeats an earlier row
(a duplicate would leak between train and test), are rejected with a reason before the split.

Model
-----
A linear SVM (scikit-learn ``SVC(kernel="linear", class_weight="balanced")``) on standardised,
L2-normalised embeddings; ``C`` is chosen from a small grid by seeded stratified k-fold
cross-validation on the training split (F1 of positives; ties go to the smaller ``C``). The
fitted model is four arrays, so it needs only numpy to apply.

File format (``.npz``, no pickle)
---------------------------------
A numpy zip archive with deterministic bytes (fixed member order and timestamps) holding
``mean``, ``scale``, ``coef`` (``(d,)`` float64 each), ``intercept`` (``(1,)`` float64) and
``header``, a 0-d unicode array holding JSON::

    {"format": "fairsets.geo.entity/1", "entity": "house", "dim": 512, "l2_normalize": true,
     "threshold": 0.0, "C": 0.1, "encoder": {model_id, spec, family, model, pretrained, embed_dim,
     package, weights}, "meta": {split, counts, cv, metrics, seed, ...},
     "fairsets_version": "...", "sha256": {"mean": ..., "scale": ..., "coef": ..., "intercept": ...}}

(SHA-256 of each array's little-endian C-order bytes; :meth:`EntityPresenceClassifier.load`
verifies them.) Applying it::

    z = np.load("house.npz", allow_pickle=False); h = json.loads(str(z["header"]))
    x = X.astype(np.float64)
    if h["l2_normalize"]:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    score = ((x - z["mean"]) / z["scale"]) @ z["coef"] + z["intercept"][0]
    present = score >= h["threshold"]
"""

from .annotations import Annotation, Annotations, load_annotations, parse_present
from .classifier import FORMAT, EntityPresenceClassifier
from .embedding import (
    AnnotatedEmbeddings,
    ImageEmbeddings,
    embed_annotations,
    embed_images,
    embedding_cache,
    encoder_info,
)
from .filtering import FilterResult, filter_dataset
from .metrics import binary_metrics
from .split import OOD_FRACTION, PAPER_ID_TEST_SIZE, PAPER_OOD_COUNTRIES, Split, split_annotations
from .training import (
    DEFAULT_C_GRID,
    REPORT_SCHEMA,
    TrainResult,
    fit_classifier,
    fit_entity_classifier,
    train_entity_classifier,
)

__all__ = [
    "DEFAULT_C_GRID",
    "FORMAT",
    "OOD_FRACTION",
    "PAPER_ID_TEST_SIZE",
    "PAPER_OOD_COUNTRIES",
    "REPORT_SCHEMA",
    "AnnotatedEmbeddings",
    "Annotation",
    "Annotations",
    "EntityPresenceClassifier",
    "FilterResult",
    "ImageEmbeddings",
    "Split",
    "TrainResult",
    "binary_metrics",
    "embed_annotations",
    "embed_images",
    "embedding_cache",
    "encoder_info",
    "filter_dataset",
    "fit_classifier",
    "fit_entity_classifier",
    "load_annotations",
    "parse_present",
    "split_annotations",
    "train_entity_classifier",
]
