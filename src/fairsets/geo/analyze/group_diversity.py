"""5. Diversity per group and country (§4.3; the scores come from :mod:`fairsets.geo.diversity`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..diversity import Encoder, country_diversity
from .load import Profile
from .shares import country_counts

if TYPE_CHECKING:
    from fairsets.core.progress import Progress


def _diversity(
    profile: Profile,
    encoder: Encoder,
    modality: str,
    groups: Mapping[str, pd.Index],
    min_samples: int,
    progress: Progress | None,
) -> dict[str, Any]:
    rows = profile.rows
    eligible: dict[str, list[str]] = {}
    freqs: dict[str, dict[str, int]] = {}
    needed: list[int] = []
    text = modality == "text" and "caption" in rows
    for name, index in groups.items():
        sub = rows.loc[index]
        counts = country_counts(sub["country"])
        freqs[name] = {str(k): int(v) for k, v in counts.items()}
        # A country qualifies by the samples it can be measured on: for captions, the rows with a
        # caption (empty ones carry no text; load.EMPTY_CAPTION_RULE), for images every row.
        if text:
            sub = sub[sub["caption"].notna()]
            measurable = {str(k): int(v) for k, v in country_counts(sub["country"]).items()}
        else:
            measurable = freqs[name]
        eligible[name] = [c for c, n in measurable.items() if n >= min_samples]
        needed += sub.index[sub["country"].isin(eligible[name])].tolist()
    needed = sorted(set(needed))
    if modality == "text":
        if "caption" not in rows:
            raise ValueError("caption diversity needs a 'caption' column (or --text-encoder none)")
        items = rows.loc[needed, "caption"].tolist()
    else:
        items = profile.images(needed)
    encoded = encoder.encode(items, progress) if needed else None
    position = np.asarray(needed, dtype=np.int64)
    kept_rows = position[encoded.kept] if encoded is not None else np.zeros(0, dtype=np.int64)
    vectors = encoded.vectors if encoded is not None else np.zeros((0, 1))
    row_of = {int(r): i for i, r in enumerate(kept_rows)}
    out_groups: dict[str, Any] = {}
    for name, index in groups.items():
        members = [int(i) for i in index if int(i) in row_of]
        sel = [row_of[i] for i in members]
        labels = rows.loc[members, "country"].tolist() if members else []
        feats = vectors[sel] if sel else np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 1))
        mask = [lab in eligible[name] for lab in labels]
        out_groups[name] = country_diversity(
            [lab for lab, m in zip(labels, mask, strict=True) if m],
            feats[np.asarray(mask, dtype=bool)] if len(mask) else feats,
            freqs[name],
            min_samples=min_samples,
            eligible=eligible[name],
        )
    skipped = encoded.skipped if encoded is not None else {}
    means = [g["mean"] for g in out_groups.values() if g["mean"] is not None]
    rhos = [g["rho"]["r"] for g in out_groups.values() if g["rho"].get("status") == "ok"]
    return {
        "encoder": encoder.name,
        "n_encoded": len(kept_rows),
        "n_skipped": len(skipped),
        "skipped": [
            {"row": int(position[i]), "reason": reason} for i, reason in sorted(skipped.items())[:20]
        ],
        "groups": out_groups,
        "summary": {
            "mean_diversity": float(np.mean(means)) if means else None,
            "mean_rho": float(np.mean(rhos)) if rhos else None,
            "n_groups": len(means),
        },
    }
