"""Scale of the person audits: composition, crime words and transfer data bias over 10 M box rows,
against a straightforward pandas implementation of the same numbers, measured in the same run.

Folder: a generated annotation folder in the layout :func:`fairsets.audit.persons.tables.connect`
reads (manifest, persons markers, ``boxes/``, ``images/``, ``attributes/{gender,race}/``; the
schemas of :mod:`fairsets.annotate.layout`), ``--rows`` box rows over ``--files`` shards (one
Parquet file per shard and table). Images have 0–12 boxes (mean ≈ 2.6), about 88 % of them kept;
each image has a dominant perceived gender and race that most of its boxes share, with 2–3 % of
boxes unlabelled; 1–2 % of images failed. Alt-texts are drawn from two generated pools (one for
images of mostly women, one for mostly men) that name the social categories of
:func:`fairsets.audit.persons.transfer.load_categories` (each with its own gender lean, Zipf-like
frequencies, plurals, capitals and hyphens), crime words of the default list (more often in the
men's pool) and near misses (``nursery``, ``thiefdom``), with some NULL and blank alt-texts
(spaces, a tab, a no-break space), so every aggregation has real matches and non-matches.
Generation is vectorised (numpy + pyarrow) and cached in ``--work`` (re-used when the folder was
written with the same settings).

Each side runs in its own child process, so its peak RSS (``ru_maxrss``) is its own:

* **fairsets** — ``tables.connect(ann, memory_limit=--memory-limit, cache=…)`` (building the
  per-shard fact tables in a new, empty folder: a first run), then
  ``composition(con)``, ``crime_association(con, texts=("alt",))`` and
  ``transfer.data_bias(con, load_categories())``: DuckDB streaming the Parquet files.
* **pandas** — ``pd.read_parquet`` of each table folder, ``merge`` of the labels onto the kept
  boxes, ``groupby`` per image and per group, and ``Series.str.contains`` with the very patterns
  fairsets builds (:func:`fairsets.audit.persons.crime.word_pattern`,
  :func:`fairsets.audit.persons.transfer.category_pattern`). With pandas ≥ 3 and pyarrow, string
  columns are Arrow-backed and ``str.contains`` runs RE2 (Arrow's), as DuckDB does
  (``--pandas-regex arrow``, the default: the strongest plain-pandas baseline);
  ``--pandas-regex re`` casts the alt-texts to object strings, so pandas runs Python ``re`` with
  the patterns translated (``\\pL\\pN_`` → ``\\w``; the same matches on these texts).

Printed: per step (read + join, composition, crime words, data bias) the seconds of each side and
their ratio, the total ratio, each side's peak RSS, whether the targets hold (≥ 10× faster,
fairsets ≤ 2 GB), and ``same numbers: yes`` when every count agrees: boxes/images per gender and
race group under the image-level group rule (unlabelled apart from unclear, both genders),
persons-per-image and box-area bins, the crime-word matches and texts per group, the data-bias
female/male counts per category (means and the median within 1e-6). A mismatch lists the first
differences and exits with status 1.

    python benchmarks/bench_audit_persons.py --rows 10000000 --files 100 --work /tmp/bench-audit
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import fairsets  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

#: Settings that make a generated folder; a cached folder is re-used only when they all agree.
GENERATOR_VERSION = 2
GENDERS = ("female", "male", "mixed", "unclear")
RACES = (
    "white",
    "black",
    "east asian",
    "south asian",
    "latino",
    "middle eastern",
    "southeast asian",
    "unclear",
)
RACE_P = (0.52, 0.12, 0.1, 0.06, 0.09, 0.05, 0.04, 0.02)
#: P(an image has k boxes), k = 0 … 12 (mean ≈ 2.64).
BOXES_P = (0.08, 0.30, 0.22, 0.14, 0.09, 0.06, 0.04, 0.03, 0.015, 0.01, 0.008, 0.005, 0.002)
SIZES = ((640, 480), (1024, 768), (500, 500), (800, 1200))
FILLER = [
    "photo",
    "of",
    "a",
    "the",
    "at",
    "in",
    "on",
    "with",
    "and",
    "smiling",
    "standing",
    "portrait",
    "outdoors",
    "city",
    "street",
    "beach",
    "park",
    "office",
    "studio",
    "young",
    "old",
    "happy",
    "serious",
    "black",
    "white",
    "red",
    "blue",
    "summer",
    "winter",
    "wedding",
    "party",
    "event",
    "stock",
    "image",
    "close",
    "up",
    "view",
    "working",
    "holding",
    "looking",
    "sitting",
    "walking",
    "team",
    "group",
    "friends",
    "family",
    "home",
    "kitchen",
    "café",
    "niño",
    "straße",
    "東京",
    "festival",
    "concert",
    "stage",
    "night",
    "morning",
    "background",
    "vintage",
    "modern",
    "business",
    "casual",
]
SUBJECTS = ("woman", "man", "girl", "boy", "people", "couple", "lady", "guy", "person", "student")
NEAR_MISSES = ("nursery", "thiefdom", "cookbook", "modelling clay", "judgement day", "prisonbreak", "bakery")
POOL = 20_000  # alt-texts per pool


# --- the folder ----------------------------------------------------------------------------------


def _plural(word: str) -> str:
    low = word.lower()
    if low.endswith("man"):
        return word[:-3] + "men"
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _vary(phrase: str, rng: Any) -> str:
    """A category or crime word as alt-texts write it: plural, capitals, hyphens."""
    u = rng.random(4)
    if u[0] < 0.25:
        phrase = _plural(phrase)
    if u[1] < 0.1 and " " in phrase:
        phrase = phrase.replace(" ", "-")
    if u[2] < 0.2:
        phrase = phrase.title()
    elif u[3] < 0.05:
        phrase = phrase.upper()
    return phrase


def alt_pools(seed: int, categories: str | None = None) -> tuple[list[str | None], list[str | None]]:
    """Two pools of alt-texts, for images of mostly women and of mostly men (see the docstring)."""
    import numpy as np

    from fairsets.audit.persons.crime import load_crime_words
    from fairsets.audit.persons.transfer import load_categories

    rng = np.random.default_rng([seed, 1_000_001])
    cats, crimes = load_categories(categories), load_crime_words()
    lean = rng.beta(2, 2, len(cats))  # P(female pool) weight per category
    base = 1.0 / (1.0 + rng.permutation(len(cats)))  # Zipf-like: a few categories are frequent
    pools = []
    for weights, crime_rate in ((lean * base, 0.02), ((1 - lean) * base, 0.04)):
        p = weights / weights.sum()
        pool: list[str | None] = []
        for _ in range(POOL):
            u = rng.random(4)
            if u[0] < 0.01:
                pool.append(
                    None if u[1] < 0.6 else ("" if u[1] < 0.75 else ("   " if u[1] < 0.9 else "\t\u00a0 "))
                )
                continue
            words = list(rng.choice(FILLER, rng.integers(2, 9)))
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(SUBJECTS)))
            if u[1] < 0.35:
                words.insert(
                    int(rng.integers(0, len(words) + 1)), _vary(cats[rng.choice(len(cats), p=p)], rng)
                )
            if u[2] < crime_rate:
                words.insert(int(rng.integers(0, len(words) + 1)), _vary(str(rng.choice(crimes)), rng))
            if u[3] < 0.03:
                words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(NEAR_MISSES)))
            text = " ".join(words)
            pool.append(text[0].upper() + text[1:] if rng.random() < 0.5 else text)
        pools.append(pool)
    return pools[0], pools[1]


def _shard_tables(s: int, rows: int, seed: int, alts: Any) -> dict[str, Any]:
    """The boxes, images and label tables of shard ``s`` with ``rows`` box rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from fairsets.annotate import layout

    rng = np.random.default_rng([seed, s])
    shard = f"{s:05d}"
    k = np.zeros(0, dtype=np.int64)
    while k.sum() < rows:
        k = np.concatenate([k, rng.choice(len(BOXES_P), size=rows // 2 + 16, p=BOXES_P)])
    ends = np.cumsum(k)
    n_img = int(np.searchsorted(ends, rows)) + 1
    k = k[:n_img]
    k[-1] -= int(ends[n_img - 1]) - rows
    starts = np.cumsum(k) - k
    failed = (k == 0) & (rng.random(n_img) < 0.2)
    keys = pa.array([f"{s:05d}{i:07d}" for i in range(n_img)])
    size = rng.integers(0, len(SIZES), n_img)
    w = np.array([x for x, _ in SIZES], dtype=np.int32)[size]
    h = np.array([y for _, y in SIZES], dtype=np.int32)[size]
    dom_g = np.where(rng.random(n_img) < 0.42, 0, 1)
    dom_r = rng.choice(len(RACES), n_img, p=RACE_P)

    img = np.repeat(np.arange(n_img), k)
    kept = rng.random(rows) < 0.88
    area = np.where(kept, rng.beta(1.5, 8, rows), rng.uniform(0.0002, 0.003, rows)).astype(np.float32)
    side = np.sqrt(area * w[img] * h[img]).astype(np.float32)
    x1 = (rng.random(rows) * np.maximum(w[img] - side, 0)).astype(np.float32)
    y1 = (rng.random(rows) * np.maximum(h[img] - side, 0)).astype(np.float32)
    n_kept = np.bincount(img[kept], minlength=n_img).astype(np.int32)
    box_keys = keys.take(pa.array(img))
    shard_col = pa.repeat(pa.scalar(shard), rows)
    boxes = pa.table(
        {
            "shard": shard_col, "key": box_keys,
            "box_id": pa.array((np.arange(rows) - starts[img]).astype(np.int32)),
            "x1": x1, "y1": y1, "x2": x1 + side, "y2": y1 + side,
            "conf": rng.uniform(0.25, 1.0, rows).astype(np.float32),
            "class_name": pa.repeat(pa.scalar("person"), rows), "width": side, "height": side,
            "area_frac": area, "image_w": w[img], "image_h": h[img], "kept": kept,
            "drop_reason": pc.if_else(pa.array(kept), pa.scalar(None, pa.string()), "min side 12 px < 30"),
        },
        schema=layout.BOX_SCHEMA,
    )  # fmt: skip

    labels = {}
    ki = np.flatnonzero(kept)
    n = len(ki)
    u = rng.random((4, n))
    g = np.where(u[0] < 0.72, dom_g[img[ki]], rng.choice(4, n, p=(0.35, 0.4, 0.05, 0.2)))
    r = np.where(u[1] < 0.8, dom_r[img[ki]], rng.choice(len(RACES), n, p=RACE_P))
    for attr, codes, names, missing in (("gender", g, GENDERS, u[2] < 0.02), ("race", r, RACES, u[3] < 0.03)):
        label = pa.array(np.array(names, dtype=object)[codes], pa.string())
        label = pc.if_else(pa.array(missing), pa.scalar(None, pa.string()), label)
        probs = rng.dirichlet(np.ones(len(names)), n).astype(np.float32)
        schema = layout.attribute_schema(attr, [c.replace(" ", "_") for c in names])
        cols = {
            "shard": shard_col.slice(0, n),
            "key": box_keys.take(pa.array(ki)),
            "box_id": boxes["box_id"].take(ki),
        }
        cols[f"perceived_{attr}"] = label
        cols |= {f"p_{attr}_{c.replace(' ', '_')}": probs[:, j] for j, c in enumerate(names)}
        cols[f"{attr}_reason"] = pc.if_else(
            pa.array(missing), "image no longer decodes", pa.scalar(None, pa.string())
        )
        labels[attr] = pa.table(cols, schema=schema)

    pick = rng.integers(0, POOL, n_img) + np.where(dom_g == 0, 0, POOL)
    ok = ~failed
    columns = {
        "shard": pa.repeat(pa.scalar(shard), n_img), "key": keys, "caption": alts.take(pa.array(pick)),
        "url": pc.binary_join_element_wise("http://img.invalid/", keys, ""),
        "sha256": pc.binary_join_element_wise(keys, pa.repeat(pa.scalar("0" * 52), n_img), ""),
        "image_w": w, "image_h": h, "n_boxes": k.astype(np.int32), "n_kept": n_kept,
        "status": pc.if_else(pa.array(ok), "ok", "failed"),
        "reason": pc.if_else(pa.array(ok), pa.scalar(None, pa.string()), "could not decode"),
    }  # fmt: skip
    # the originals' columns (sizes, digest, resize) are unknown for made-up images: null
    columns |= {f.name: pa.nulls(n_img, f.type) for f in layout.IMAGE_SCHEMA if f.name not in columns}
    images = pa.table(columns, schema=layout.IMAGE_SCHEMA)
    return {"boxes": boxes, "images": images, **labels}


def make_folder(ann: Path, rows: int, files: int, seed: int, categories: str | None = None) -> Path:
    """Write (or re-use) the generated annotation folder ``ann``; shows progress on stderr."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.annotate import layout
    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.progress import Progress

    settings = {"version": GENERATOR_VERSION, "rows": rows, "files": files, "seed": seed}
    if categories is not None:  # the shipped list by default (folders of earlier runs stay valid)
        settings["categories"] = str(Path(categories).resolve())
    stamp = ann / "bench-settings.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == settings:
        print(f"re-using {ann} ({rows:,} box rows in {files} files)", flush=True)
        return ann
    t0 = time.perf_counter()
    stamp.unlink(missing_ok=True)
    female, male = alt_pools(seed, categories)
    alts = pa.array(female + male, pa.string())
    per = [rows // files + (1 if s < rows % files else 0) for s in range(files)]
    refs = []
    with Progress(enabled=True).stage("writing shards", files, rates=("boxes",)) as advance:
        for s in range(files):
            tables = _shard_tables(s, per[s], seed, alts)
            shard = f"{s:05d}"
            paths = {
                "boxes": layout.boxes_path(ann, shard), "images": layout.images_path(ann, shard),
                "gender": layout.attribute_path(ann, "gender", shard),
                "race": layout.attribute_path(ann, "race", shard),
            }  # fmt: skip
            for name, path in paths.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(
                    tables[name], path, compression="zstd", use_dictionary=True, write_statistics=True
                )
            marker = layout.marker_path(ann, "persons", shard)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"task_id": shard}))
            refs.append({"name": shard, "path": str(ann / f"{shard}.tar"), "kind": "tar"})
            advance(1, boxes=per[s])
    layout.write_manifest(ann, {"inputs": refs, "params": {"min_side": 30}})
    atomic_write_text(stamp, json.dumps(settings))
    print(f"generated {rows:,} box rows in {files} files in {time.perf_counter() - t0:.1f} s", flush=True)
    return ann


# --- the two sides -------------------------------------------------------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def flat_fairsets(comp: dict, crime: dict, bias: dict) -> tuple[dict[str, int], dict[str, float]]:
    """The counts (and the few means) of the three fairsets results, under flat names."""
    n: dict[str, int] = {k: comp[k] for k in ("n_boxes", "n_images", "n_person_images")}
    for attr in ("gender", "race"):  # every table of one denominator, unlabelled its own row
        for kind in ("boxes", "images"):
            n |= {f"{kind}.{attr}.{g}": v["count"] for g, v in comp[kind][attr]["groups"].items()}
    n["images.both_genders"] = comp["images"]["both_genders"]["count"]
    ppi, area = comp["persons_per_image"], comp["box_area"]
    n |= {f"persons_per_image.{b}": c for b, c in zip(ppi["bins"], ppi["counts"], strict=True)}
    n["persons_per_image.max"] = ppi["max"]
    n |= {f"box_area.{i}": c for i, c in enumerate(area["counts"])}
    n["box_area.invalid"] = area["invalid"]
    alt = crime["alt"]
    n |= {"crime.overall.matches": alt["overall"]["matches"], "crime.overall.n": alt["overall"]["n"]}
    n |= {"crime.no_text": alt["no_text"]}
    for attr in ("gender", "race"):
        for g, v in alt[attr].items():
            n[f"crime.{attr}.{g}.matches"], n[f"crime.{attr}.{g}.n"] = v["matches"], v["n"]
    for c in bias["categories"] + bias["dropped"]:
        n[f"bias.{c['category']}.female"], n[f"bias.{c['category']}.male"] = c["female"], c["male"]
    n |= {f"bias.{k}": bias[k] for k in ("n_single_gender", "n_female", "n_male")}
    floats = {
        "persons_per_image.mean": ppi["mean"],
        "box_area.mean": area["mean"],
        "box_area.median": area["median"],
    }
    return n, floats


def run_fairsets(
    ann: Path, memory_limit: str, threads: int | None, categories: str | None = None
) -> dict[str, Any]:
    from fairsets.audit.persons import tables, transfer
    from fairsets.audit.persons.composition import composition
    from fairsets.audit.persons.crime import crime_association

    times = {}
    facts = tempfile.mkdtemp(prefix="bench-audit-facts-")  # a first run: no fact table exists yet
    t = time.perf_counter()
    con = tables.connect(ann, memory_limit=memory_limit, threads=threads, cache=facts)
    times["read + join"] = time.perf_counter() - t
    t = time.perf_counter()
    comp = composition(con)
    times["composition"] = time.perf_counter() - t
    t = time.perf_counter()
    crime = crime_association(con, texts=("alt",))
    times["crime words"] = time.perf_counter() - t
    t = time.perf_counter()
    bias = transfer.data_bias(con, transfer.load_categories(categories))
    times["data bias"] = time.perf_counter() - t
    con.close()
    shutil.rmtree(facts, ignore_errors=True)
    counts, floats = flat_fairsets(comp, crime, bias)
    return {"times": times, "counts": counts, "floats": floats, "peak_rss_mb": _peak_rss_mb()}


def python_pattern(pattern: str) -> str:
    """An RE2 pattern of fairsets for Python ``re``: ``[^\\pL\\pN_]`` is ``[^\\w]`` there."""
    return pattern.replace(r"\pL\pN_", r"\w")


def _contains(s: Any, pattern: str) -> Any:
    """``s.str.contains(pattern)``: RE2 on Arrow-backed strings, Python ``re`` on objects."""
    import pandas as pd

    arrow = isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow"
    return s.str.contains(pattern if arrow else python_pattern(pattern), regex=True).astype(bool)


def run_pandas(ann: Path, regex: str = "arrow", categories: str | None = None) -> dict[str, Any]:
    """The same numbers with plain pandas: whole tables in memory, merge, groupby, str.contains
    (``regex="re"``: on object strings, so with Python ``re``; ``"arrow"``: pandas' default dtype)."""
    import numpy as np
    import pandas as pd

    from fairsets.audit.persons.crime import load_crime_words, word_pattern
    from fairsets.audit.persons.transfer import category_pattern, load_categories
    from fairsets.audit.persons.words import load_exclusions, mask_pattern

    times, n = {}, {}
    key = ["shard", "key"]
    t = time.perf_counter()
    boxes = pd.read_parquet(ann / "boxes", columns=["shard", "key", "box_id", "area_frac", "kept"])
    boxes = boxes[boxes["kept"]].drop(columns="kept")
    for attr in ("gender", "race"):
        labels = pd.read_parquet(ann / "attributes" / attr, columns=[*key, "box_id", f"perceived_{attr}"])
        boxes = boxes.merge(labels, on=[*key, "box_id"], how="left")
    images = pd.read_parquet(ann / "images", columns=["shard", "key", "caption", "status"])
    images = images[images["status"] == "ok"].drop(columns="status")
    if regex == "re":
        images["caption"] = images["caption"].astype(object)
    g = boxes["perceived_gender"]
    per = (
        boxes.assign(
            f=g.eq("female").fillna(False), m=g.eq("male").fillna(False),
            x=g.eq("mixed").fillna(False), u=g.eq("unclear").fillna(False),
        )
        .groupby(key, sort=False)
        .agg(n_persons=("box_id", "size"), n_female=("f", "sum"), n_male=("m", "sum"),
             n_mixed=("x", "sum"), n_unclear=("u", "sum"))
        .reset_index()
    )  # fmt: skip
    pi = per.merge(images, on=key, how="inner")
    for attr in ("gender", "race"):  # the exclusive image-level rule: one group per image
        labels = boxes[[*key, f"perceived_{attr}"]].dropna().drop_duplicates()
        col = labels[f"perceived_{attr}"]
        known = labels[col.ne("unclear")].groupby(key)[f"perceived_{attr}"].agg(["size", "first"])
        has = labels.groupby(key).size().rename("labelled")
        grp = pi[key].merge(has.reset_index(), on=key, how="left")
        grp = grp.merge(known.reset_index(), on=key, how="left")
        pi[attr] = np.select(
            [grp["labelled"].isna().to_numpy(), grp["size"].isna().to_numpy(), grp["size"].eq(1).to_numpy()],
            ["unlabelled", "unclear", grp["first"].astype(object).to_numpy()],
            "mixed",
        )
    times["read + join"] = time.perf_counter() - t

    t = time.perf_counter()
    n["n_boxes"], n["n_images"], n["n_person_images"] = len(boxes), len(images), len(pi)
    for attr in ("gender", "race"):
        counts = boxes[f"perceived_{attr}"].value_counts(dropna=False)
        for label, c in counts.items():
            n[f"boxes.{attr}.{'unlabelled' if pd.isna(label) else label}"] = int(c)
        n |= {f"images.{attr}.{k}": int(v) for k, v in pi[attr].value_counts().items()}
    n["images.both_genders"] = int(((pi.n_female > 0) & (pi.n_male > 0)).sum())
    binned = np.minimum(pi["n_persons"].to_numpy(), 10)
    for b, c in zip(range(1, 11), np.bincount(binned, minlength=11)[1:], strict=True):
        n[f"persons_per_image.{b if b < 10 else '>=10'}"] = int(c)
    n["persons_per_image.max"] = int(pi["n_persons"].max())
    area = boxes["area_frac"].to_numpy(np.float32)
    valid = area[(area >= 0) & (area <= 1)]
    bins = np.minimum(np.floor(valid * np.float32(20)).astype(np.int64), 19)
    n |= {f"box_area.{i}": int(c) for i, c in enumerate(np.bincount(bins, minlength=20))}
    n["box_area.invalid"] = len(area) - len(valid)
    floats = {
        "persons_per_image.mean": float(pi["n_persons"].mean()),
        "box_area.mean": float(valid.astype(np.float64).mean()),
        "box_area.median": float(np.median(valid.astype(np.float64))),
    }
    times["composition"] = time.perf_counter() - t

    t = time.perf_counter()
    cap = pi["caption"]
    texted = cap.notna() & cap.fillna("").str.strip().ne("")  # blank: only whitespace
    n["crime.no_text"] = int((~texted).sum())
    alt = pi.loc[texted, [*key, "gender", "race", "caption"]]
    masked = alt["caption"].str.lower()  # innocent senses blanked first, twice (as masked_sql)
    pat = mask_pattern(load_exclusions())
    if not (isinstance(masked.dtype, pd.StringDtype) and masked.dtype.storage == "pyarrow"):
        pat = python_pattern(pat)  # Python re on object strings
    for _ in range(2):
        masked = masked.str.replace(pat, r"\1 \3", regex=True)
    alt["hit"] = _contains(masked, word_pattern(load_crime_words()))
    n["crime.overall.matches"], n["crime.overall.n"] = int(alt["hit"].sum()), len(alt)
    for attr in ("gender", "race"):
        for g, row in alt.groupby(attr)["hit"].agg(["sum", "size"]).iterrows():
            n[f"crime.{attr}.{g}.matches"], n[f"crime.{attr}.{g}.n"] = int(row["sum"]), int(row["size"])
    times["crime words"] = time.perf_counter() - t

    t = time.perf_counter()
    single = pi[pi["gender"].isin(["female", "male"]) & texted]  # blank alt-texts are no text
    lower = single["caption"].str.lower()
    for c in load_categories(categories):
        hits = _contains(lower, category_pattern(c)).groupby(single["gender"]).sum()
        n[f"bias.{c}.female"], n[f"bias.{c}.male"] = int(hits.get("female", 0)), int(hits.get("male", 0))
    sizes = single["gender"].value_counts()
    n["bias.n_female"], n["bias.n_male"] = int(sizes.get("female", 0)), int(sizes.get("male", 0))
    n["bias.n_single_gender"] = len(single)
    times["data bias"] = time.perf_counter() - t
    return {"times": times, "counts": n, "floats": floats, "peak_rss_mb": _peak_rss_mb()}


def _child(side: str, ann: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one side in a fresh Python process (its own peak RSS) and return its JSON result."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--side", side, "--ann", str(ann), "--result", str(out)]
        cmd += ["--memory-limit", args.memory_limit, "--pandas-regex", args.pandas_regex]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        if args.categories:
            cmd += ["--categories", args.categories]
        t = time.perf_counter()
        proc = subprocess.run(cmd, check=False)
        if proc.returncode != 0 or not out.is_file():
            sys.exit(f"the {side} side failed (exit {proc.returncode}); see its output above")
        result = json.loads(out.read_text())
        result["wall"] = time.perf_counter() - t
        return result


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The differences between two sides' counts (a name one side lacks counts as 0) and floats."""
    diffs = []
    for name in sorted(set(a["counts"]) | set(b["counts"])):
        x, y = a["counts"].get(name, 0), b["counts"].get(name, 0)
        if x != y:
            diffs.append(f"{name}: fairsets {x}, pandas {y}")
    for name, x in a["floats"].items():
        y = b["floats"].get(name)
        if x is None or y is None or not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9):
            diffs.append(f"{name}: fairsets {x}, pandas {y}")
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="box rows (kept and dropped)")
    ap.add_argument("--files", type=int, default=100, help="shards: Parquet files per table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--work", default=None, help="folder for the generated data (re-used; default: temporary)"
    )
    ap.add_argument("--memory-limit", default="1GB", help="DuckDB's memory limit on the fairsets side")
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: one per core)")
    ap.add_argument(
        "--pandas-regex",
        choices=("arrow", "re"),
        default="arrow",
        help="pandas' string matching: arrow (pandas' default Arrow strings, RE2) or re (object strings)",
    )
    ap.add_argument(
        "--categories",
        default=None,
        help="a category TOML file for the alt-texts and the data bias (default: fairsets' list)",
    )
    ap.add_argument("--skip-pandas", action="store_true", help="measure fairsets alone")
    ap.add_argument("--side", choices=("fairsets", "pandas"), help=argparse.SUPPRESS)
    ap.add_argument("--ann", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:  # a child: one side, its result as JSON
        ann = Path(args.ann)
        result = (
            run_fairsets(ann, args.memory_limit, args.threads, args.categories)
            if args.side == "fairsets"
            else run_pandas(ann, args.pandas_regex, args.categories)
        )
        Path(args.result).write_text(json.dumps(result))
        return
    if args.rows < 1 or args.files < 1 or args.files > args.rows:
        sys.exit("--rows and --files must be positive, with at most one file per row")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        ann = make_folder(
            work / f"ann-{args.rows}-{args.files}-{args.seed}",
            args.rows,
            args.files,
            args.seed,
            args.categories,
        )
        print(
            f"cores: {os.cpu_count()}; DuckDB memory limit {args.memory_limit}; "
            f"pandas {args.pandas_regex} regular expressions",
            flush=True,
        )
        fs = _child("fairsets", ann, args)
        if args.skip_pandas:
            for step, s in fs["times"].items():
                print(f"{step:14} fairsets {s:8.2f} s")
            print(f"total fairsets {sum(fs['times'].values()):.2f} s, peak RSS {fs['peak_rss_mb']:.0f} MB")
            return
        pd_ = _child("pandas", ann, args)
    report(fs, pd_)


def report(fs: dict[str, Any], pd_: dict[str, Any]) -> None:
    print(f"{'step':14} {'fairsets s':>11} {'pandas s':>10} {'ratio':>8}")
    for step, s in fs["times"].items():
        p = pd_["times"][step]
        print(f"{step:14} {s:11.2f} {p:10.2f} {p / s if s > 0 else float('inf'):7.1f}x")
    total_f, total_p = sum(fs["times"].values()), sum(pd_["times"].values())
    ratio = total_p / total_f
    print(f"{'total':14} {total_f:11.2f} {total_p:10.2f} {ratio:7.1f}x")
    print(f"peak RSS: fairsets {fs['peak_rss_mb']:.0f} MB, pandas {pd_['peak_rss_mb']:.0f} MB")
    print(f">= 10x faster: {'yes' if ratio >= 10 else 'no'} ({ratio:.1f}x)")
    print(f"fairsets <= 2 GB: {'yes' if fs['peak_rss_mb'] <= 2048 else 'no'} ({fs['peak_rss_mb']:.0f} MB)")
    diffs = compare(fs, pd_)
    print(f"same numbers: {'no' if diffs else 'yes'} ({len(fs['counts'])} counts, {len(fs['floats'])} means)")
    for d in diffs[:20]:
        print("   ", d)
    if diffs:
        sys.exit(1)


if __name__ == "__main__":
    main()
