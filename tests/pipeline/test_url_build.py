"""A build from a URL listing (``urls`` source): downloads, per-sample status, retry of failed only."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import jpeg, portraits
from servers import LoopbackServer, Response

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("img2dataset") is None,
    reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0",
)

RECIPE = """
name = "urls"
seed = 3
groups = ["state", "gender"]
quota = 1

[source]
type = "urls"
path = "{listing}"

[download]
allow_loopback = true
processes = 0
threads = 4
timeout = 1

[[steps]]
name = "license"

[[steps]]
name = "decode"

[[steps]]
name = "detect_face"

[[steps]]
name = "crop"

[executor]
workers = 0
task_size = 2
"""


def _published(out: Path) -> list[dict]:
    return [
        r
        for f in sorted((out / "metadata" / "imbalanced").glob("*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]


def test_urls_build_downloads_and_retries_only_failed(tmp_path: Path) -> None:
    from fairsets.pipeline.build import build
    from fairsets.pipeline.config import load_recipe

    astronaut, hopper = (jpeg(p) for p in portraits())
    slow = {"delay": 3.0}
    with LoopbackServer() as srv:
        jpg = {"Content-Type": "image/jpeg"}
        srv.route("/a.jpg", lambda req: Response(200, jpg, astronaut))
        srv.route("/slow.jpg", lambda req: Response(200, jpg, hopper, delay=slow["delay"]))
        srv.route("/nc.jpg", lambda req: Response(200, jpg, hopper))
        rows = [
            ("/a.jpg", "Goa", "female", "CC-BY-4.0"),
            ("/slow.jpg", "Goa", "male", "CC0-1.0"),
            ("/gone.jpg", "Assam", "female", "CC0-1.0"),
            ("/nc.jpg", "Assam", "male", "CC-BY-NC-4.0"),
        ]
        listing = tmp_path / "urls.csv"
        with listing.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["url", "state", "gender", "license", "author"])
            for path, state, gender, lic in rows:
                w.writerow([srv.url(path), state, gender, lic, "A. Author"])
        recipe_path = tmp_path / "r.toml"
        recipe_path.write_text(RECIPE.format(listing=listing.as_posix()))
        recipe = load_recipe(recipe_path)
        out = tmp_path / "out"

        build(recipe, out)
        rej = {r["url"].rsplit("/", 1)[-1]: r for r in pq.read_table(out / "rejects.parquet").to_pylist()}
        assert (rej["slow.jpg"]["status"], rej["slow.jpg"]["step"]) == ("failed", "download")
        assert (rej["gone.jpg"]["status"], rej["gone.jpg"]["step"]) == ("rejected", "download")
        assert "404" in rej["gone.jpg"]["reason"]
        assert (rej["nc.jpg"]["step"], srv.hits("/nc.jpg")) == ("license", 0)  # refused, never fetched
        published = _published(out)
        assert [r["url"].rsplit("/", 1)[-1] for r in published] == ["a.jpg"]
        assert all(not k.startswith("_") for k in published[0])  # internal download fields stay internal

        hits = {p: srv.hits(p) for p in ("/a.jpg", "/slow.jpg", "/gone.jpg")}
        build(recipe, out)  # a re-run downloads nothing
        assert {p: srv.hits(p) for p in hits} == hits

        slow["delay"] = 0.0
        build(recipe, out, retry_failed=True)  # only the failed download is fetched again
        assert srv.hits("/slow.jpg") == hits["/slow.jpg"] + 1
        assert srv.hits("/a.jpg") == hits["/a.jpg"] and srv.hits("/gone.jpg") == hits["/gone.jpg"]
    published = _published(out)
    assert sorted(r["url"].rsplit("/", 1)[-1] for r in published) == ["a.jpg", "slow.jpg"]
    assert "slow.jpg" not in {
        r["url"].rsplit("/", 1)[-1] for r in pq.read_table(out / "rejects.parquet").to_pylist()
    }


def test_retry_failed_with_a_supplement_keeps_what_still_fails(tmp_path: Path) -> None:
    """``--retry-failed`` in a recipe with a supplement: a download that fails again stays ``failed``."""
    from fairsets.pipeline.build import build
    from fairsets.pipeline.config import load_recipe
    from helpers import write_candidates

    hopper = jpeg(portraits()[1])  # the local supplement's Goa candidates are astronaut crops
    with LoopbackServer() as srv:
        jpg = {"Content-Type": "image/jpeg"}
        srv.route("/a.jpg", lambda req: Response(200, jpg, hopper))
        srv.route("/slow.jpg", lambda req: Response(200, jpg, hopper, delay=3.0))
        listing = tmp_path / "urls.csv"
        with listing.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["url", "state", "gender", "license"])
            w.writerow([srv.url("/a.jpg"), "Goa", "female", "CC0-1.0"])
            w.writerow([srv.url("/slow.jpg"), "Goa", "male", "CC0-1.0"])
        local = write_candidates(tmp_path / "local", 4)
        recipe_path = tmp_path / "r.toml"
        recipe_path.write_text(
            RECIPE.format(listing=listing.as_posix())
            + f'\n[[supplement]]\ntype = "local"\npath = "{local.as_posix()}"\n'
            + '\n[cells]\nstate = ["Goa"]\ngender = ["female", "male"]\n'
        )
        recipe = load_recipe(recipe_path)
        out = tmp_path / "out"
        build(recipe, out)
        build(recipe, out, retry_failed=True)  # the slow route is still too slow
        assert srv.hits("/slow.jpg") == 2
    rej = {r["url"]: r for r in pq.read_table(out / "rejects.parquet").to_pylist() if r["source"] == "urls"}
    assert (rej[srv.url("/slow.jpg")]["status"], rej[srv.url("/slow.jpg")]["step"]) == ("failed", "download")
    assert {r["source"] for r in _published(out)} == {"urls", "local"}
