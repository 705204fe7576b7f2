"""Train the ``offline`` geo method's scorer and write ``src/fairsets/geo/data/offline_scorer.json``.

The scorer (``fairsets.geo.methods.offline.scorer``) decides whether each candidate mention is a
place and how sure a caption's answer is. It is learned from the labelled development and training
captions in ``benchmarks/data`` (``geo-dev.csv`` and ``geo-train-a/b/c.csv``); ``geo-val.csv``,
``geo-wiki-dev.csv`` (which chooses the training files with val, see :func:`default_training_sets`),
``geo-heldout.csv`` and the two Wikipedia evaluation sets are never trained on, so
``bench_geo.py`` and ``fairsets geo evaluate`` on them measure captions the scorer has not seen.
Deterministic: the same files give the same JSON.

    python scripts/train_geo_scorer.py                       # rebuild the shipped model
    python scripts/train_geo_scorer.py mine.csv --out my-scorer.json   # your own labelled captions
    fairsets geo profile captions.txt -o out.csv -O scorer=my-scorer.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
try:
    import fairsets  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

DATA = ROOT / "benchmarks" / "data"
SHIPPED = ROOT / "src" / "fairsets" / "geo" / "data" / "offline_scorer.json"


#: Evaluation sets: never trained on.
EVALUATION = ("geo-val.csv", "geo-heldout.csv", "geo-wiki-captions.csv", "geo-wiki-sentences.csv")


#: The training files of the shipped scorer, by name (a new file joins by a measured decision).
TRAINING = ("geo-dev.csv", "geo-train-a.csv", "geo-train-b.csv", "geo-train-c.csv")


def default_training_sets() -> list[Path]:
    """The labelled files the shipped scorer is trained on (:data:`TRAINING`); never an evaluation
    set.

    Chosen by a rule fixed before measuring: the highest mean of val F1 and accuracy on the located
    sentences of ``geo-wiki-dev.csv`` (5-fold out of fold when trained on), among the choices with
    which every geo behaviour test passes. The choices, with the training as it is now (a file
    offset each, the features ``geo-train-c.csv`` was selected on unknown in its rows; the last row
    measured before the rules on first names and acronyms inside a sentence, which moved the others
    by < 0.01):

    ========================================== ====== ======== ====== ================
    training files                              val F1 accuracy mean   behaviour tests
    ========================================== ====== ======== ====== ================
    dev, train-a/b/c (this set)                 0.945  0.833    0.889  pass
    dev, wiki-dev, train-a/b/c                  0.948  0.824    0.886  pass
    dev, train-a/b/c/d                          0.947  0.843    0.895  10 fail
    ========================================== ====== ======== ====== ================

    ``geo-wiki-dev.csv`` was trained on until the offsets and the unknown selection features came:
    without them, leaving it out taught the scorer from ``geo-train-c.csv`` (obscure sampled towns
    beside listing words, famous names used as product words) that a well-known name is no place
    ("Paris apartment with a balcony" rejected), and with it the scorer learned from its 78 % of
    sentences naming no country that prose rarely names one (0.952, 0.704, mean 0.828). Each of
    the two changes alone failed behaviour tests; dropping the caption-length feature instead
    scored 0.837 and failed 5. ``geo-train-d.csv`` has never been in the shipped scorer."""
    return [DATA / name for name in TRAINING]


def _threshold_from(scorer: Any, report: dict[str, Any], path: Path) -> tuple[Any, dict[str, Any]]:
    """The scorer with its default ``min_confidence`` at the best F1 on ``path`` (never trained on)."""
    import dataclasses
    import math
    import tempfile

    from fairsets.geo.evaluate import choose_threshold, load_labelled
    from fairsets.geo.methods import get_method
    from fairsets.geo.methods.offline.scorer import scorer_json

    captions, gold = load_labelled(path)
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "scorer.json"
        trial.write_text(scorer_json(scorer), encoding="utf-8")
        method = get_method("offline", scorer=str(trial))
        chosen = choose_threshold(gold, method.predict_detailed(captions), rule="best-f1")
    point = {
        "file": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "rule": "best F1",
        "threshold": round(chosen["threshold"], 4),
        "precision": round(chosen["precision"], 4),
        "recall": round(chosen["recall"], 4),
    }
    report = {**report, "operating_point": point}
    # the shipped file keeps 4 decimals: round down, so the caption that set the threshold stays in
    t = math.floor(chosen["threshold"] * 1e4) / 1e4
    point["threshold"] = t
    return dataclasses.replace(scorer, min_confidence=t, provenance=report), report


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _selected_on(specs: list[str], sets: list[Path]) -> dict[str, tuple[str, ...]]:
    """``--selected-on`` values (``FILE=FEATURE,FEATURE``) as ``train_scorer``'s ``selected_on``."""
    from fairsets.geo.methods.offline.scorer import MENTION_FEATURES

    names = {p.name for p in sets}
    out: dict[str, tuple[str, ...]] = {}  # train_scorer keeps the shipped files' own
    for spec in specs:
        file, sep, features = spec.partition("=")
        chosen = tuple(f.strip() for f in features.split(",") if f.strip())
        if not sep or not chosen:
            _fail(f"--selected-on {spec!r} is not FILE=FEATURE,FEATURE; e.g. mine.csv=zipf,zipf_name")
        if file not in names:
            _fail(
                f"--selected-on names {file!r}, which is not a training file; use one of the file names given"
            )
        unknown = [f for f in chosen if f not in MENTION_FEATURES]
        if unknown:
            _fail(f"--selected-on: {unknown[0]!r} is no mention feature; see scorer.MENTION_FEATURES")
        out[file] = chosen
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "labelled", nargs="*", type=Path, help="labelled CSVs (caption,country); default: dev + train"
    )
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--target-precision", type=float, default=0.9)
    ap.add_argument(
        "--threshold-from",
        type=Path,
        default=None,
        help="labelled captions never trained on: the default min_confidence is the threshold with "
        "the best F1 there (default for the shipped model: geo-val.csv; otherwise the lowest "
        "threshold whose out-of-fold precision reaches --target-precision)",
    )
    ap.add_argument(
        "--selected-on",
        action="append",
        default=[],
        metavar="FILE=FEATURE,…",
        help="features a training file's captions were sampled on, unknown in its rows (repeatable; "
        "default for the shipped files: geo-train-c.csv=dictionary_word,zipf,zipf_name)",
    )
    args = ap.parse_args()

    from fairsets.core.atomic import atomic_write_text
    from fairsets.geo.methods.offline.scorer import scorer_json
    from fairsets.geo.methods.offline.training import train_scorer

    sets = args.labelled or default_training_sets()
    forbidden = [p for p in sets if p.name in EVALUATION]
    if forbidden:
        _fail(f"{forbidden[0].name} is an evaluation set; train on geo-dev.csv and geo-train-*.csv")
    missing = [p for p in sets if not p.is_file()]
    if missing:
        _fail(f"{missing[0]} is not a file; give labelled CSVs (caption,country)")
    selected_on = _selected_on(args.selected_on, sets) if args.selected_on else None
    try:
        scorer, report = train_scorer(
            sets, l2=args.l2, target_precision=args.target_precision, selected_on=selected_on
        )
    except ValueError as e:  # unreadable labels, or no positive or no negative mentions
        _fail(f"{e}; check the labelled files")
    chooser = args.threshold_from or (None if args.labelled else DATA / "geo-val.csv")
    if chooser is not None:
        if any(chooser.resolve() == p.resolve() for p in sets):
            _fail(f"{chooser.name} is trained on; choose the threshold on captions never trained on")
        scorer, report = _threshold_from(scorer, report, chooser)
    atomic_write_text(args.out, scorer_json(scorer))
    print(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
