"""A build where no candidate survives publishes nothing but writes the rejects, the card, the manifest."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.pipeline.build import build
from fairsets.pipeline.config import load_recipe
from helpers import write_candidates, write_recipe


def _rewrite(listing: Path, **changes: str) -> None:
    rows = list(csv.DictReader(listing.open(newline="")))
    for r in rows:
        r.update(changes)
    with listing.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)


def _published(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if ".fairsets" not in p.parts)


@pytest.mark.timeout(120)
def test_every_licence_refused_publishes_nothing_and_says_why(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 6)
    _rewrite(listing, license="CC-BY-NC-4.0")
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=0)
    out = tmp_path / "o"
    res = build(load_recipe(recipe), out)

    assert _published(out) == ["ATTRIBUTION.md", "README.md", "manifest.json", "rejects.parquet"]
    rej = pq.read_table(out / "rejects.parquet").to_pylist()
    assert len(rej) == 6 and {r["step"] for r in rej} == {"license"}
    assert all("CC-BY-NC-4.0" in r["reason"] for r in rej)
    assert res.warnings[0].startswith("no candidate survived: 6 rejected by license (top reasons: 6×")
    assert str(out / "rejects.parquet") in res.warnings[0]
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "Nothing was published" in card and "configs" not in card
    assert "| 1 | `license` |" in card and "| 6 | 0 |" in card  # the drop table
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["candidates"] == 6 and manifest["counts"]["published"] == {}
    assert manifest["counts"]["accepted"] == 0
    assert sorted(manifest["files"]) == ["ATTRIBUTION.md", "README.md", "rejects.parquet"]
    res = CliRunner().invoke(app, ["publish", str(out), "--repo-id", "org/name", "--dry-run"])
    assert res.exit_code == 2 and "the build published no samples" in res.output


@pytest.mark.timeout(120)
def test_every_file_unreadable_is_a_failed_build_with_rejects(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 4)
    for p in (tmp_path / "c").glob("*.jpg"):
        p.unlink()
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=0)
    res = build(load_recipe(recipe), tmp_path / "o")
    rej = pq.read_table(tmp_path / "o" / "rejects.parquet").to_pylist()
    assert [r["status"] for r in rej] == ["failed"] * 4 and {r["step"] for r in rej} == {"read"}
    assert res.warnings[0].startswith("no candidate survived: 4 failed in read")
    assert any("--retry-failed" in w for w in res.warnings)


@pytest.mark.timeout(180)
def test_a_rebuild_that_publishes_nothing_removes_the_earlier_dataset(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 6)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=0)
    out = tmp_path / "o"
    build(load_recipe(recipe), out)
    assert (out / "croissant.json").is_file() and list((out / "shards").rglob("*.tar"))

    _rewrite(listing, license="All rights reserved")
    build(load_recipe(recipe), out)
    assert _published(out) == ["ATTRIBUTION.md", "README.md", "manifest.json", "rejects.parquet"]


@pytest.mark.timeout(120)
def test_cli_says_why_in_one_line_and_exits_0(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 4)
    _rewrite(listing, license="CC-BY-ND-4.0")
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=0)
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["build", str(recipe), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: no candidate survived: 4 rejected by license")
    assert "Traceback" not in res.output


def test_collect_reads_any_column_name_and_pools_without_images(tmp_path: Path) -> None:
    """Task tables may hold a ``filename`` column (DuckDB's own name) and, with nothing accepted,
    no ``image`` column at all."""
    import pyarrow as pa

    from fairsets.pipeline.build import _collect

    work = tmp_path / ".fairsets"
    (work / "samples").mkdir(parents=True)
    (work / "markers" / "samples").mkdir(parents=True)
    specs = []
    for tid, pool in (
        ("a", {"key": ["k1"], "image": [b"x"], "filename": ["mine.jpg"], 'we"ird': ["q"]}),
        ("b", {"key": pa.array([], pa.string()), "status": pa.array([], pa.string())}),
    ):
        pq.write_table(pa.table(pool), work / "samples" / f"{tid}.pool.parquet")
        pq.write_table(
            pa.table({"key": [f"r{tid}"], "status": ["rejected"], "filename": ["x"]}),
            work / "samples" / f"{tid}.rejects.parquet",
        )
        marker = {
            "pool": f"samples/{tid}.pool.parquet",
            "rejects": f"samples/{tid}.rejects.parquet",
            "stats": {"rejected": {"license": 1}, "failed": {}},
        }
        (work / "markers" / "samples" / f"{tid}.json").write_text(json.dumps(marker))
        specs.append({"task_id": tid})
    pool, rejects, stats = _collect(work, specs)
    assert [(r["key"], r["filename"], r['we"ird'], r["pool"]) for r in pool] == [
        ("k1", "mine.jpg", "q", "samples/a.pool.parquet")
    ]
    assert "image" not in pool[0]
    assert [(r["key"], r["filename"]) for r in rejects] == [("ra", "x"), ("rb", "x")]
    assert stats == {"rejected": {"license": 2}, "failed": {}}
    assert _collect(work, []) == ([], [], {"rejected": {}, "failed": {}})


@pytest.mark.timeout(180)
def test_a_supplement_is_asked_for_cells_whose_every_candidate_was_rejected(tmp_path: Path) -> None:
    """Without ``cells`` in the recipe the expected cells come from every candidate, not only the
    accepted ones: when the primary source yields nothing, the supplement fills every cell."""
    primary = write_candidates(tmp_path / "p", 8)
    _rewrite(primary, license="CC-BY-NC-4.0")
    more = write_candidates(tmp_path / "s", 12)
    rows = list(csv.DictReader(more.open(newline="")))[8:]  # other files than the primary's
    with more.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    recipe = write_recipe(tmp_path / "r.toml", primary, quota=1, workers=0)
    with recipe.open("a") as fh:
        fh.write(f'\n[[supplement]]\ntype = "local"\npath = "{more.as_posix()}"\n')
    res = build(load_recipe(recipe), tmp_path / "o")
    sources = res.manifest["counts"]["sources"]
    assert [(s["stage"], s["candidates"], s.get("cells")) for s in sources] == [(0, 8, None), (1, 4, 4)]
    assert res.manifest["counts"]["accepted"] == 4
    assert res.manifest["counts"]["published"]["imbalanced"]


@pytest.mark.timeout(180)
def test_every_download_refused_publishes_nothing_and_says_why(tmp_path: Path) -> None:
    """Loopback URLs without ``allow_loopback``: the guard refuses every download (no request leaves)."""
    pytest.importorskip("img2dataset")
    from servers import LoopbackServer

    with LoopbackServer() as srv:
        listing = tmp_path / "urls.csv"
        with listing.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["url", "state", "gender", "license"])
            for i, (state, gender) in enumerate([("Goa", "female"), ("Goa", "male"), ("Assam", "male")]):
                w.writerow([srv.url(f"/{i}.jpg"), state, gender, "CC0-1.0"])
        recipe = tmp_path / "r.toml"
        recipe.write_text(
            'name = "u"\ngroups = ["state", "gender"]\nquota = 1\n[source]\ntype = "urls"\n'
            f'path = "{listing.as_posix()}"\n[download]\nprocesses = 0\ntimeout = 1\n'
            '[[steps]]\nname = "license"\n[[steps]]\nname = "decode"\n[executor]\nworkers = 0\n'
        )
        out = tmp_path / "o"
        res = CliRunner().invoke(app, ["build", str(recipe), "--out", str(out), "--quiet"])
        assert res.exit_code == 0, res.output
        assert srv.hits("/0.jpg") == 0
    assert "no candidate survived: 3 rejected by download" in res.output
    rej = pq.read_table(out / "rejects.parquet").to_pylist()
    assert len(rej) == 3 and all("loopback" in r["reason"] for r in rej)
    assert not (out / "shards").exists() and (out / "README.md").is_file()


@pytest.mark.timeout(180)
def test_a_person_listed_in_two_cells_is_published_in_one_split_only(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 12)
    rows = list(csv.DictReader(listing.open(newline="")))
    for i, r in enumerate(rows):  # every person has images in both states
        r["identity"] = f"person{i % 3}"
    with listing.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=0)
    out = tmp_path / "o"
    build(load_recipe(recipe), out)
    rejects = pq.read_table(out / "rejects.parquet").to_pylist()
    moved = [r for r in rejects if r["step"] == "select" and "belongs to the cell" in r["reason"]]
    assert moved, [(r["step"], r["reason"]) for r in rejects]
    for variant in ("imbalanced", "balanced"):
        sides: dict[tuple[str, str], set[str]] = {}
        for f in (out / "metadata" / variant).glob("*.parquet"):
            for r in pq.read_table(f).to_pylist():
                sides.setdefault(r["identity"], set()).add(r["split"])
                sides.setdefault((r["identity"], "cell"), set()).add(f"{r['state']}/{r['gender']}")
        assert all(len(v) == 1 for v in sides.values()), sides
