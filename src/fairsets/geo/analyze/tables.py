"""The analysis as CSV tables (``shares.csv``, ``countries.csv``, ``continents.csv``, ``power_law.csv``,
``correlations.csv``, ``representation.csv``, ``diversity.csv``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fairsets.core.atomic import atomic_write_text

from ..analysis_schema import OVERALL
from ..countries import CONTINENTS, countries

__all__ = ["write_tables"]


def _groups(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [*doc["entities"].items(), (OVERALL, doc["overall"])]


def _paper_follows(gof: Mapping[str, Any]) -> bool | None:
    """The paper's reading (p < 0.05: "follows a power law"), from the record or its p-value."""
    if "paper_follows_power_law" in gof:
        return gof["paper_follows_power_law"]
    p = gof.get("p")
    return None if not isinstance(p, (int, float)) or isinstance(p, bool) else p < 0.05


def _csv(path: Path, frame: pd.DataFrame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n", float_format="%.10g"))


def write_tables(doc: Mapping[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """Write the analysis as CSV tables (atomically) and return their paths.

    ``shares.csv`` (Table 1), ``countries.csv`` (counts), ``continents.csv`` (Table 11),
    ``power_law.csv`` (with both readings of the GOF p-value), ``correlations.csv`` (one row per
    group, variable and country set; ``headline`` marks the set the analysis reports),
    ``representation.csv`` (Tables 2/14, per country) and ``diversity.csv`` (per group, modality
    and country). The overall rows have group ``overall``; the entity rows carry ``kind = entity``.
    """
    out = Path(out)
    table = countries()
    shares, counts, conts, pls, corrs, reps, divs = [], [], [], [], [], [], []
    for name, g in _groups(doc):
        kind = "overall" if g is doc["overall"] else "entity"
        s = g["shares"]
        shares.append(
            {
                "group": name,
                "kind": kind,
                "n_rows": g["n_rows"],
                "n_specified": g["n_specified"],
                "n_countries": g["n_countries"],
                "underspecified": s["underspecified"],
                f"top_{s['top_k']}": s["top"],
                "remaining": s["remaining"],
                "top_countries": " ".join(s["top_countries"]),
            }
        )
        for rank, (code, n) in enumerate(g["counts"].items(), start=1):
            c = table[code]
            counts.append(
                {
                    "group": name,
                    "rank": rank,
                    "iso3": code,
                    "name": c.name,
                    "continent": c.continent,
                    "count": n,
                    "share_of_rows": n / g["n_rows"],
                    "share_of_specified": n / g["n_specified"],
                }
            )
        for code, n in g["continents"]["counts"].items():
            conts.append(
                {
                    "group": name,
                    "continent": code,
                    "name": CONTINENTS.get(code, ""),
                    "count": n,
                    "share": g["continents"]["shares"][code],
                }
            )
        pl = g["power_law"]
        row: dict[str, Any] = {"group": name, "status": pl["status"], "n_countries": pl["n_countries"]}
        if pl["status"] == "ok":
            gof = pl["gof"]
            row.update(
                alpha=pl["alpha"],
                xmin=pl["xmin"],
                sigma=pl["sigma"],
                ks_d=pl["ks_d"],
                n_tail=pl["n_tail"],
                gof_p=gof.get("p"),
                bootstrap=gof.get("bootstrap"),
                plausible=gof.get("plausible"),
                paper_follows_power_law=_paper_follows(gof),
                csn_plausible=gof.get("csn_plausible", gof.get("plausible")),
            )
            for alt, cmp_ in pl["comparisons"].items():
                row[f"R_{alt}"] = cmp_["R"]
                row[f"p_{alt}"] = cmp_["p"]
        else:
            row["reason"] = pl.get("reason")
        pls.append(row)
        for var, head in g["correlations"].items():
            alt = head.get("alternative")
            for cr, headline in ((head, True), *(((alt, False),) if isinstance(alt, Mapping) else ())):
                corrs.append(
                    {
                        "group": name,
                        "variable": var,
                        "over": cr.get("over"),
                        "headline": headline,
                        "status": cr["status"],
                        "n": cr.get("n"),
                        "n_zero_count": cr.get("n_zero_count"),
                        "n_not_in_reference": cr.get("n_not_in_reference"),
                        "pearson_r": (cr.get("pearson") or {}).get("r"),
                        "pearson_p": (cr.get("pearson") or {}).get("p"),
                        "spearman_rho": (cr.get("spearman") or {}).get("rho"),
                        "spearman_p": (cr.get("spearman") or {}).get("p"),
                    }
                )
        rep = g["representation"]
        for c in rep.get("countries") or []:
            reps.append({"group": name, **c, "name": table[c["iso3"]].name})
    for modality in ("text", "image"):
        d = doc["diversity"].get(modality)
        if not d:
            continue
        for name, g in d["groups"].items():
            for c in g["countries"]:
                divs.append({"group": name, "modality": modality, **c, "name": table[c["iso3"]].name})
    written = []
    specs = [
        ("shares.csv", shares, None),
        (
            "countries.csv",
            counts,
            ["group", "rank", "iso3", "name", "continent", "count", "share_of_rows", "share_of_specified"],
        ),
        ("continents.csv", conts, ["group", "continent", "name", "count", "share"]),
        ("power_law.csv", pls, None),
        ("correlations.csv", corrs, None),
        ("representation.csv", reps, ["group", "iso3", "name", "count", "p", "p_true", "gr", "status"]),
        ("diversity.csv", divs, ["group", "modality", "iso3", "name", "frequency", "n", "diversity"]),
    ]
    for fname, records, columns in specs:
        frame = (
            pd.DataFrame.from_records(records, columns=columns)
            if columns
            else pd.DataFrame.from_records(records)
        )
        if columns is None and records:
            seen: dict[str, None] = {}
            for rec in records:
                seen.update(dict.fromkeys(rec))
            frame = frame.reindex(columns=list(seen))
        written.append(_csv(out / fname, frame))
    return written
