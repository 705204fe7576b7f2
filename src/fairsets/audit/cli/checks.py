"""What the model-audit commands (``fairsets audit vlm``, ``utility``) and ``fairsets debias fit``
check before any work or model load: the output (:func:`check_out`), the dataset
(:func:`check_dataset`) and the model (:func:`load_vlm_or_die`), and the model options' help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairsets._cli_util import die

MODEL_HELP = (
    "Model: an open_clip name (ViT-B-32, hf-hub:ORG/NAME) or hf:HUB_ID / hf:LOCAL_DIR for transformers."
)
PRETRAINED_HELP = (
    "Weights: an open_clip tag (openai, laion2b_s34b_b79k, ...) or a local weights file; "
    "'none' = random weights (tests, dry runs)."
)


def check_out(out: Path | None, *, folder: bool) -> None:
    """Fail before any work when OUT cannot be written as a folder (or as a file)."""
    if out is None:
        return
    if folder:
        blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            die(f"{blocked}: a file is where the output folder {out} must be; choose another --out")
    elif out.is_dir():
        die(f"{out}: a folder, but the output is a file; choose a file name for --out")
    elif out.parent.exists() and not out.parent.is_dir():
        die(f"{out.parent}: a file, not a folder; choose another --out")


def check_dataset(
    dataset: Path,
    variant: str | None,
    splits: list[str] | None,
    attribute: str,
    prefer: str,
    min_groups: int = 0,
) -> None:
    """Fail before any model loads: DATASET must be a published dataset whose variant and splits
    exist, hold samples and have the ATTRIBUTE column (with at least ``min_groups`` values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.audit.dataset import DatasetError, open_dataset

    try:
        ds = open_dataset(dataset)
        name = variant or ds.default_variant()
        chosen = list(splits) if splits else ds.default_splits(name, prefer=prefer)
        have = ds.splits(name)
        missing = [s for s in chosen if s not in have]
        if missing:
            raise DatasetError(
                f"{dataset}: variant {name!r} has no split {missing[0]!r} (splits: {', '.join(have)}); "
                "choose one with --split"
            )
        rows = 0
        for split in chosen:
            path = ds.root / "metadata" / name / f"{split}.parquet"
            try:
                meta = pq.read_metadata(path)
                columns = pq.read_schema(path).names
            except (pa.ArrowException, OSError) as exc:
                why = " ".join(str(exc).split())
                raise DatasetError(f"{path}: not readable Parquet ({why}); rebuild the dataset") from None
            if attribute not in columns:
                raise DatasetError(
                    f"{path}: no column {attribute!r} (columns: {', '.join(columns)}); choose one with "
                    "--attribute"
                )
            rows += meta.num_rows
        if rows == 0:
            raise DatasetError(
                f"{dataset}: {name}/{'+'.join(chosen)} holds no samples; choose another --variant or --split"
            )
        if min_groups:
            groups: set[Any] = set()
            for split in chosen:
                path = ds.root / "metadata" / name / f"{split}.parquet"
                column = pq.read_table(path, columns=[attribute]).column(0)
                groups.update(column.drop_null().unique().to_pylist())
            if len(groups) < min_groups:
                raise DatasetError(
                    f"{dataset}: {attribute!r} has {len(groups)} group(s) in {name}/{'+'.join(chosen)}; "
                    f"need at least {min_groups}: choose another --attribute or --split"
                )
    except DatasetError as exc:
        die(exc)


def load_vlm_or_die(model: str, pretrained: str | None, device: str) -> Any:
    """The model, or one line saying why it cannot load (exit 2)."""
    from fairsets.core.step import MissingDependency
    from fairsets.models import ModelUnavailable, load_vlm

    try:
        return load_vlm(model, pretrained, device=device)
    except (ModelUnavailable, MissingDependency, ValueError) as exc:
        die(exc)
