"""Train the ``offline`` geo method's scorer and write ``src/fairsets/geo/data/offline_scorer.json``.

The scorer (``fairsets.geo.methods.offline.scorer``) decides whether each candidate mention is a
place and how sure a caption's answer is. It is learned from the labelled development and training
captions in ``benchmarks/data`` (``geo-dev.csv``, ``geo-wiki-dev.csv`` and ``geo-train-*.csv``);
``geo-val.csv``, ``geo-heldout.csv`` and the two Wikipedia evaluation sets are never trained
on, so ``bench_geo.py`` and ``fairsets geo evaluate`` on them measure captions the scorer has not
seen. Deterministic: the same files give the same JSON.

    python scripts/train_geo_scorer.py                       # rebuild the shipped model
    python scripts/train_geo_scorer.py mine.csv --out my-scorer.json   # your own labelled captions
    fairsets geo profile captions.txt -o out.csv -O scorer=my-scorer.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import fairsets  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

DATA = ROOT / "benchmarks" / "data"
SHIPPED = ROOT / "src" / "fairsets" / "geo" / "data" / "offline_scorer.json"


#: Evaluation sets: never trained on.
EVALUATION = ("geo-val.csv", "geo-heldout.csv", "geo-wiki-captions.csv", "geo-wiki-sentences.csv")


def default_training_sets() -> list[Path]:
    """The labelled files the shipped scorer is trained on: the development sets (LAION-style
    ``geo-dev.csv`` and real Wikipedia sentences ``geo-wiki-dev.csv``) and ``geo-train-*.csv``;
    never an evaluation set."""
    return [DATA / "geo-dev.csv", DATA / "geo-wiki-dev.csv", *sorted(DATA.glob("geo-train-*.csv"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "labelled", nargs="*", type=Path, help="labelled CSVs (caption,country); default: dev + train"
    )
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--target-precision", type=float, default=0.9)
    args = ap.parse_args()

    from fairsets.core.atomic import atomic_write_text
    from fairsets.geo.methods.offline.scorer import scorer_json
    from fairsets.geo.methods.offline.training import train_scorer

    sets = args.labelled or default_training_sets()
    forbidden = [p for p in sets if p.name in EVALUATION]
    if forbidden:
        sys.exit(
            f"error: {forbidden[0].name} is an evaluation set; train on geo-dev.csv, geo-wiki-dev.csv "
            "and geo-train-*.csv"
        )
    scorer, report = train_scorer(sets, l2=args.l2, target_precision=args.target_precision)
    atomic_write_text(args.out, scorer_json(scorer))
    print(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
