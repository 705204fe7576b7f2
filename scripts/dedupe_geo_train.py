"""Drop training captions that repeat or nearly repeat an evaluation caption.

The training sets (``benchmarks/data/geo-train-*.csv``) were written without seeing the evaluation
sets, but short alt-text converges ("Modern kitchen with white cabinets"), so some rows come out
equal or nearly equal to evaluation rows. Those rows are removed so that no evaluation caption is
also trained on. Near-duplicate: token overlap ≥ 0.5 (of the shorter caption) and character
similarity > 0.8 after lower-casing and removing punctuation — the rule the sets were checked
with. Prints counts only; rewrites the training files atomically.

    python scripts/dedupe_geo_train.py
"""

from __future__ import annotations

import csv
import difflib
import io
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
EVALUATION = ("geo-val.csv", "geo-heldout.csv")


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w ]+", " ", text.lower()).split()


def near_duplicate(a: list[str], b: list[str]) -> bool:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return a == b
    if " ".join(a) == " ".join(b):
        return True
    if len(sa & sb) / min(len(sa), len(sb)) < 0.5:
        return False
    return difflib.SequenceMatcher(None, " ".join(a), " ".join(b)).ratio() > 0.8


def main() -> None:
    evaluation = []
    for name in EVALUATION:
        with (DATA / name).open(encoding="utf-8", newline="") as f:
            evaluation.extend(_words(r["caption"]) for r in csv.DictReader(f))
    for path in sorted(DATA.glob("geo-train-*.csv")):
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        kept = [r for r in rows if not any(near_duplicate(_words(r["caption"]), e) for e in evaluation)]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=["caption", "country"], lineterminator="\n")
        w.writeheader()
        w.writerows({"caption": r["caption"], "country": r["country"]} for r in kept)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        tmp.replace(path)
        removed = len(rows) - len(kept)
        print(f"{path.name}: {len(rows)} rows, {removed} removed, {len(kept)} kept", file=sys.stderr)


if __name__ == "__main__":
    main()
