"""Probe images for the model bias ``d(c)`` of the bias-transfer audit.

By default the probe is the annotation folder itself (the study's "LAION-400M probe", the
in-distribution one): its kept person boxes whose perceived gender is ``female`` or ``male`` (or,
for the race probe, whose perceived race is one of the race groups), at most ``max_probe`` per
group, chosen by the MD5 of ``seed/shard/key/box_id`` in one streamed DuckDB query (the same seed
gives the same probe on any machine; a larger cap keeps every box a smaller one chose), cropped
from the folder's input shards as ``annotate classify`` crops them
(:func:`fairsets.annotate.heads.embed.embed_labelled`) and embedded through the crop cache
``ANN/.fairsets/embeddings/{model}/`` that ``annotate train`` uses too, keyed by the box and the
SHA-256 of its pixels: a re-run embeds nothing again. A box whose image is gone from its shard is
left out with its reason (``probe.rejected``). The gender probe can instead be another annotation
folder, or a published fairsets face dataset with a gender column (``probe_attribute``, values
``female`` / ``male`` in any case), embedded through the dataset's embedding cache as
``fairsets audit vlm`` does; the race probe needs an annotation folder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress

from .generated import GENDERS

if TYPE_CHECKING:
    from fairsets.models import VLM

__all__ = [
    "GroupProbe",
    "Probe",
    "check_probe_dataset",
    "embed_probe",
    "embed_race_probe",
    "probe_kind",
    "sample_probe_boxes",
]


def probe_kind(path: str | os.PathLike[str]) -> str:
    """``"annotations"`` (an annotation folder) or ``"dataset"`` (a published dataset).

    Raises:
        ValueError: neither (one line saying what to give).
    """
    from fairsets.annotate import layout

    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"--probe {p}: no such folder; give an annotation folder or a published dataset")
    if (p / "metadata").is_dir() and (p / "shards").is_dir():
        return "dataset"
    if (p / layout.MANIFEST).is_file():
        layout.read_manifest(p)  # an annotation folder's, or a one-line error saying what it is
        return "annotations"
    raise ValueError(
        f"--probe {p}: neither an annotation folder (no {layout.MANIFEST}) nor a published dataset "
        "(no metadata/); give one of them"
    )


def sample_probe_boxes(
    con: Any,
    max_per_gender: int | None,
    seed: int,
    *,
    attribute: str = "gender",
    groups: Sequence[str] = GENDERS,
) -> tuple[list[Any], dict[str, int]]:
    """The probe boxes of an annotation folder: ``(LabelRow list, available count per group)``.

    At most ``max_per_gender`` kept boxes per perceived ``attribute`` value of ``groups`` (by
    default the genders ``female`` and ``male``; for the race probe, the race groups), the ones with
    the smallest MD5 of ``"{seed}/{shard}/{key}/{box_id}"``; sorted by ``(shard, key, box_id)``.
    ``con`` is a :func:`fairsets.audit.persons.tables.connect` connection.
    """
    from fairsets.annotate.heads.labels import LabelRow

    col = f"perceived_{attribute}"
    columns = {row[0] for row in con.execute("DESCRIBE boxes").fetchall()}
    if col not in columns:
        raise ValueError(
            f"the probe folder has no {attribute} labels; "
            f"run fairsets annotate classify --attribute {attribute}"
        )
    if not groups:
        return [], {}
    wanted = "(" + ", ".join("'" + str(g).replace("'", "''") + "'" for g in groups) + ")"
    avail = dict(
        con.execute(f"SELECT {col}, count(*) FROM boxes WHERE {col} IN {wanted} GROUP BY 1").fetchall()
    )
    limit = "" if max_per_gender is None else f"QUALIFY rn <= {int(max_per_gender)}"
    rows = con.execute(
        f"SELECT shard, key, box_id, {col}, row_number() OVER (PARTITION BY {col} "
        "ORDER BY md5(? || '/' || shard || '/' || key || '/' || CAST(box_id AS VARCHAR)), "
        "shard, key, box_id) "
        f"AS rn FROM boxes WHERE {col} IN {wanted} {limit} "
        "ORDER BY shard, key, box_id",
        [str(int(seed))],
    ).fetchall()
    out = [LabelRow(str(s), str(k), int(b), str(g), None, i + 1) for i, (s, k, b, g, _) in enumerate(rows)]
    return out, {g: int(avail.get(g, 0)) for g in groups}


@dataclass
class Probe:
    """Probe image embeddings by perceived gender and where they came from."""

    female: np.ndarray
    male: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    computed: int = 0  # images embedded in this call (the others came from a cache)


@dataclass
class GroupProbe:
    """Probe image embeddings by group (a race probe) and where they came from."""

    vectors: dict[str, np.ndarray]
    info: dict[str, Any] = field(default_factory=dict)
    computed: int = 0


def _probe_from_annotations(
    path: Path,
    vlm: VLM,
    *,
    max_probe: int | None,
    seed: int,
    batch_size: int,
    cache_dir: Path | None,
    progress: Progress,
    attribute: str = "gender",
    groups: Sequence[str] = GENDERS,
) -> GroupProbe:
    from fairsets.annotate import layout
    from fairsets.annotate.chat.items import shard_refs
    from fairsets.annotate.heads.embed import CropSource, crop_cache, embed_labelled
    from fairsets.annotate.images import DEFAULT_MAX_BYTES

    from ..tables import connect

    con = connect(path)
    try:
        rows, available = sample_probe_boxes(con, max_probe, seed, attribute=attribute, groups=groups)
    finally:
        con.close()
    params = layout.read_manifest(path).get("params") or {}
    source = CropSource(
        shards=shard_refs(path),
        ann=path,
        max_bytes=int(params.get("max_bytes") or DEFAULT_MAX_BYTES)
        if isinstance(params, dict)
        else DEFAULT_MAX_BYTES,
    )
    base = cache_dir if cache_dir is not None else path / layout.WORKDIR / "embeddings"
    cache = crop_cache(base, vlm)
    emb = embed_labelled(vlm, rows, source, cache, batch_size=batch_size, progress=progress)
    by = {g: [i for i, r in enumerate(emb.rows) if r.label == g] for g in groups}
    return GroupProbe(
        vectors={g: emb.vectors[by[g]] for g in groups},
        info={
            "kind": "annotations",
            "name": path.name,
            "available": available,
            "sampled": {g: sum(1 for r in rows if r.label == g) for g in groups},
            "used": {g: len(by[g]) for g in groups},
            "items": {g: [emb.rows[i].item for i in by[g]] for g in groups},
            "rejected": [{"item": r["item"], "reason": r["reason"]} for r in emb.rejected],
            "cache": "crop embeddings (ANN/.fairsets/embeddings)" if cache_dir is None else "--cache-dir",
        },
        computed=emb.computed,
    )


def check_probe_dataset(path: Path, attribute: str) -> None:
    """Fail before any model loads when ``path`` is not a published dataset with ``attribute`` holding
    female and male values."""
    import pyarrow.parquet as pq

    from fairsets.audit.dataset import DatasetError, open_dataset

    try:
        ds = open_dataset(path)
        variant = ds.default_variant()
        values: set[str] = set()
        for split in ds.splits(variant):
            meta = ds.root / "metadata" / variant / f"{split}.parquet"
            if attribute not in pq.read_schema(meta).names:
                raise ValueError(
                    f"--probe {path}: no column {attribute!r} in {variant}/{split}; "
                    "choose it with --probe-attribute"
                )
            col = pq.read_table(meta, columns=[attribute]).column(0).drop_null().unique().to_pylist()
            values |= {str(v).strip().lower() for v in col}
    except DatasetError as e:
        raise ValueError(str(e)) from None
    missing = [g for g in GENDERS if g not in values]
    if missing:
        raise ValueError(
            f"--probe {path}: column {attribute!r} has no {' or '.join(missing)} value; the probe needs both"
        )


def _probe_from_dataset(
    path: Path,
    vlm: VLM,
    *,
    attribute: str,
    max_probe: int | None,
    seed: int,
    batch_size: int,
    cache_dir: Path | None,
    progress: Progress,
) -> Probe:
    import hashlib

    from fairsets.audit.dataset import open_dataset
    from fairsets.audit.embeddings import embed_dataset

    ds = open_dataset(path)
    variant = ds.default_variant()
    splits = ds.splits(variant)
    rows = ds.rows(variant, splits)
    groups: dict[str, list[dict[str, Any]]] = {g: [] for g in GENDERS}
    for r in rows:
        value = r.get(attribute)
        g = str(value).strip().lower() if value is not None else ""
        if g in groups:
            groups[g].append(r)
    available = {g: len(v) for g, v in groups.items()}

    def order(r: dict[str, Any]) -> tuple[str, str]:
        return hashlib.md5(f"{int(seed)}/{r['key']}".encode()).hexdigest(), str(r["key"])

    chosen = {
        g: sorted(v, key=order)[: max_probe if max_probe is not None else len(v)] for g, v in groups.items()
    }
    wanted = sorted((r for v in chosen.values() for r in v), key=lambda r: str(r["key"]))
    emb = embed_dataset(
        ds, vlm, variant, splits, rows=wanted, batch_size=batch_size, cache_dir=cache_dir, progress=progress
    )
    label = {str(r["key"]): g for g, v in chosen.items() for r in v}
    by = {g: [i for i, r in enumerate(emb.rows) if label[str(r["key"])] == g] for g in GENDERS}
    return Probe(
        female=emb.vectors[by["female"]],
        male=emb.vectors[by["male"]],
        info={
            "kind": "dataset",
            "name": ds.name,
            "variant": variant,
            "splits": list(splits),
            "attribute": attribute,
            "available": available,
            "sampled": {g: len(v) for g, v in chosen.items()},
            "used": {g: len(by[g]) for g in GENDERS},
            "items": {g: [str(emb.rows[i]["key"]) for i in by[g]] for g in GENDERS},
            "rejected": [{"item": s["key"], "reason": s["reason"]} for s in emb.skipped],
            "cache": "dataset embeddings (DATASET/.fairsets/embeddings)"
            if cache_dir is None
            else "--cache-dir",
        },
        computed=emb.computed,
    )


def embed_probe(
    path: str | os.PathLike[str],
    vlm: VLM,
    *,
    max_probe: int | None = 1000,
    seed: int = 0,
    attribute: str = "gender",
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Probe:
    """The probe embeddings (see the module docstring) of an annotation folder or a published dataset.

    Raises:
        ValueError: not a probe source, no gender labels, or no female or no male probe image left.
    """
    if max_probe is not None and (isinstance(max_probe, bool) or int(max_probe) < 1):
        raise ValueError(f"max_probe must be ≥ 1, not {max_probe!r}")
    p = Path(path)
    cache = Path(cache_dir) if cache_dir is not None else None
    progress = progress or Progress()
    if probe_kind(p) == "annotations":
        got = _probe_from_annotations(
            p, vlm, max_probe=max_probe, seed=seed, batch_size=batch_size, cache_dir=cache, progress=progress
        )
        probe = Probe(
            female=got.vectors["female"], male=got.vectors["male"], info=got.info, computed=got.computed
        )
    else:
        probe = _probe_from_dataset(
            p,
            vlm,
            attribute=attribute,
            max_probe=max_probe,
            seed=seed,
            batch_size=batch_size,
            cache_dir=cache,
            progress=progress,
        )
    if len(probe.female) == 0 or len(probe.male) == 0:
        first = probe.info["rejected"][0]["reason"] if probe.info["rejected"] else "none labelled"
        raise ValueError(
            f"{p.name}: {len(probe.female)} female and {len(probe.male)} male probe images could be embedded "
            f"(first problem: {first}); the model bias needs both"
        )
    return probe


def embed_race_probe(
    path: str | os.PathLike[str],
    vlm: VLM,
    groups: Sequence[str],
    *,
    max_probe: int | None = 1000,
    seed: int = 0,
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> GroupProbe:
    """The race probe of an annotation folder: at most ``max_probe`` kept boxes per race group of
    ``groups`` (``unclear`` and unlabelled boxes are never probes), sampled and embedded as the
    gender probe is (the same seed, the same crop cache: a box in both is embedded once).

    Raises:
        ValueError: ``path`` is not an annotation folder, or it has no race labels.
    """
    p = Path(path)
    if probe_kind(p) != "annotations":
        raise ValueError(f"{p.name}: a race probe needs an annotation folder with race labels")
    return _probe_from_annotations(
        p,
        vlm,
        max_probe=max_probe,
        seed=seed,
        batch_size=batch_size,
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        progress=progress or Progress(),
        attribute="race",
        groups=[g for g in groups if g != "unclear"],
    )
