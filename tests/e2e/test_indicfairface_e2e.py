"""The IndicFairFace recipe end to end on loopback servers.

A real Oxigraph SPARQL server holds a small Wikidata-shaped graph; a loopback HTTP server plays
the MediaWiki API of Commons (licences, authors, thumbnails), the image host and SerpAPI. The
shipped ``builders/indicfairface.toml`` runs against them (endpoints swapped, two states, quota
2), then the web-search candidates are reviewed and the build runs again.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import logging
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import tomllib

from helpers import ROOT, jpeg, portraits
from servers import LoopbackServer, Request, Response, json_response

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("img2dataset") is None,
        reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0",
    ),
]

sys.path.insert(0, str(ROOT / "tests" / "sources"))
from oxigraph import oxigraph_server  # noqa: E402

SERP_KEY = "serp-SECRET-e2e-0123456789abcdef"
HF_TOKEN = "hf_SECRETe2etoken0123456789abcdef"
PRIVATE = "10.0.0.1"
ALLOWED = (
    {"CC0-1.0", "PDM-1.0"}
    | {f"CC-BY-{v}" for v in ("2.0", "3.0", "4.0")}
    | {f"CC-BY-SA-{v}" for v in ("2.0", "3.0", "4.0")}
)


# ------------------------------------------------------------------------------------ images
def faces() -> dict[str, bytes]:
    """16 distinct real-face JPEGs (flips, rotations, crops and tints of two public-domain portraits)."""
    from PIL import Image

    out = {}
    for b, img in enumerate(portraits()):
        h, w = img.shape[:2]
        for v in range(8):
            im = Image.fromarray(img)
            if v % 2:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            im = im.rotate([0, 6, -6, 10][v // 2], resample=Image.BICUBIC, fillcolor=(128, 128, 128))
            s = [1.0, 0.85, 0.75, 0.9][v // 2]
            cw, ch = int(w * s), int(h * s)
            x, y = (w - cw) // 2, int((h - ch) * 0.3)
            arr = np.asarray(im.crop((x, y, x + cw, y + ch))).astype(np.int16)
            arr = arr + np.array([(v * 5) % 20 - 10, 0, (v * 3) % 12 - 6])
            out[f"p{b}v{v}"] = jpeg(np.clip(arr, 0, 255).astype(np.uint8))
    return out


# ------------------------------------------------------------------------- Wikidata-shaped graph
# (person, gender QID, image file or None, [triples about the person], note)
FILES = {
    # file name: (face, LicenseShortName, Artist HTML)
    "Anjali Kerala.jpg": (
        "p0v0",
        "CC BY-SA 4.0",
        '<a href="//commons.wikimedia.org/wiki/User:Ravi">Ravi K</a>',
    ),
    "Beena.jpg": ("p0v2", "CC0", ""),
    "Chitra MLA.jpg": ("p0v4", "Public domain", "Government of Kerala"),
    "Deepa NC.jpg": ("p0v6", "CC BY-NC-SA 4.0", "Someone"),
    "Eldho.jpg": ("p1v1", "CC BY 4.0", "<span>Photo: <b>Anu</b></span>"),
    "Faisal 1.jpg": ("p1v3", "CC BY 2.0", "Flickr user"),
    "Faisal 2.jpg": ("p1v5", "GFDL", "Old uploader"),
    "Gogoi.jpg": ("p1v7", "CC BY-SA 3.0", "Assam photographer"),
    "Cat.jpg": ("p0v1", "CC0", ""),
    "Nonbinary.jpg": ("p0v3", "CC0", ""),
}
MISSING_FILE = "Hari missing.jpg"
COMMONS_PAGE = "https://commons.wikimedia.org/wiki/File:"


def graph() -> str:
    fp = "http://commons.wikimedia.org/wiki/Special:FilePath/"
    lines = [
        "@prefix wd: <http://www.wikidata.org/entity/> .",
        "@prefix wds: <http://www.wikidata.org/entity/statement/> .",
        "@prefix wdt: <http://www.wikidata.org/prop/direct/> .",
        "@prefix p: <http://www.wikidata.org/prop/> .",
        "@prefix ps: <http://www.wikidata.org/prop/statement/> .",
        "@prefix pq: <http://www.wikidata.org/prop/qualifier/> .",
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
        # Kerala Q1186 <- Ernakulam district Q8800002 <- Kochi Q8800003 <- Fort Kochi Q8800004
        'wd:Q1186 rdfs:label "Kerala"@en . wd:Q1164 rdfs:label "Assam"@en .',
        "wd:Q8800002 wdt:P131 wd:Q1186 . wd:Q8800003 wdt:P131 wd:Q8800002 .",
        "wd:Q8800004 wdt:P131 wd:Q8800003 .",
        "wd:Q8800010 wdt:P131 wd:Q8800003 .",  # a college in Kochi
        "wd:Q8800020 wdt:P131 wd:Q8800002 .",  # Ernakulam constituency
        "wd:Q8800030 wdt:P131 wd:Q1186 .",  # Thrissur constituency
        "wd:Q8800031 wdt:P768 wd:Q8800030 .",  # MLA for Thrissur (the paper's direct form)
        "wd:Q8801000 wdt:P131 wd:Q1164 .",  # Guwahati, Assam
    ]
    F, M = "wd:Q6581072", "wd:Q6581097"

    def person(q: str, label: str, gender: str, image: str | None, *triples: str, human: bool = True) -> None:
        lines.append(
            f'wd:{q} rdfs:label "{label}"@en ; wdt:P31 {"wd:Q5" if human else "wd:Q146"} ; wdt:P21 {gender} .'
        )
        if image:
            lines.append(f"wd:{q} wdt:P18 <{fp}{image.replace(' ', '%20')}> .")
        for t in triples:  # "wds:…" triples are about a statement node, the rest about the person
            lines.append(f"{t} ." if t.startswith("wds:") else f"wd:{q} {t} .")

    person("Q8900001", "Anjali", F, "Anjali Kerala.jpg", "wdt:P19 wd:Q8800004")  # birth, 3 levels deep
    person("Q8900002", "Beena", F, "Beena.jpg", "wdt:P69 wd:Q8800010")  # education
    person(  # constituency as a qualifier on the P39 statement
        "Q8900003",
        "Chitra",
        F,
        "Chitra MLA.jpg",
        "p:P39 wds:s1",
        "wds:s1 ps:P39 wd:Q8800021",
        "wds:s1 pq:P768 wd:Q8800020",
    )
    person("Q8900004", "Deepa", F, "Deepa NC.jpg", "wdt:P551 wd:Q8800003")  # residence; NC licence
    person("Q8900005", "Eldho", M, "Eldho.jpg", "wdt:P937 wd:Q8800002")  # work
    person(  # constituency, direct form; two images (one GFDL-only)
        "Q8900006",
        "Faisal",
        M,
        "Faisal 1.jpg",
        "wdt:P39 wd:Q8800031",
        f"wdt:P18 <{fp}Faisal%202.jpg>",
    )
    person(  # born in Assam, lives in Kerala: birth wins
        "Q8900007", "Gogoi", M, "Gogoi.jpg", "wdt:P19 wd:Q8801000", "wdt:P551 wd:Q8800003"
    )
    person("Q8900008", "Hari", M, MISSING_FILE, "wdt:P19 wd:Q8800003")  # Commons lost the file
    person("Q8900009", "Indu", F, None, "wdt:P19 wd:Q8800003")  # no image
    person("Q8900010", "Kitty", F, "Cat.jpg", "wdt:P19 wd:Q8800003", human=False)  # not a human
    person("Q8900011", "Jo", "wd:Q48270", "Nonbinary.jpg", "wdt:P19 wd:Q8800003")  # other gender
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------- HTTP routes
def commons_api(srv: LoopbackServer):
    def handler(req: Request) -> Response:
        titles = req.query.get("titles", [""])[0].split("|")
        pages = []
        for t in titles:
            name = t.removeprefix("File:")
            if name not in FILES:
                pages.append({"ns": 6, "title": t, "missing": True, "known": False})
                continue
            face, short, artist = FILES[name]
            ext = {"LicenseShortName": {"value": short}, "Artist": {"value": artist}}
            ext["AttributionRequired"] = {"value": "false" if short in ("CC0", "Public domain") else "true"}
            pages.append(
                {
                    "ns": 6,
                    "title": t,
                    "imageinfo": [
                        {
                            "url": srv.url(f"/orig/{face}.jpg"),
                            "thumburl": srv.url(f"/thumb/{face}.jpg"),
                            "descriptionurl": COMMONS_PAGE + name.replace(" ", "_"),
                            "width": 512,
                            "height": 512,
                            "mime": "image/jpeg",
                            "sha1": "0" * 40,
                            "extmetadata": ext,
                        }
                    ],
                }
            )
        return json_response({"batchcomplete": True, "query": {"pages": pages}})

    return handler


def serpapi(srv: LoopbackServer):
    def handler(req: Request) -> Response:
        q = req.query["q"][0]
        if req.query.get("api_key") != [SERP_KEY]:
            return json_response({"error": "Invalid API key."}, status=401)
        results = {
            "Assam woman face": [
                ("/web/ok-woman.jpg", "woman page"),
                ("/web/optout.jpg", "opt-out page"),
                ("/web/gone.jpg", "404 page"),
                ("/web/to-private.jpg", "redirect page"),
            ],
            "Assam man face": [("/web/ok-man.jpg", "man page"), ("/web/dup-of-gogoi.jpg", "copy page")],
        }.get(q, [])
        items = [
            {
                "position": i + 1,
                "original": srv.url(path),
                "thumbnail": srv.url(path),
                "link": f"https://news.example/{i}",
                "title": title,
                "source": "news.example",
                "original_width": 512,
                "original_height": 512,
            }
            for i, (path, title) in enumerate(results)
        ]
        return json_response({"search_metadata": {"status": "Success"}, "images_results": items})

    return handler


def _recipe(endpoint: str, srv: LoopbackServer):
    """The shipped recipe with loopback endpoints, two states and a quota of 2."""
    from fairsets.pipeline.config import parse_recipe

    data = tomllib.loads((ROOT / "builders" / "indicfairface.toml").read_text())
    data["quota"] = 2
    data["cells"]["state"] = ["Kerala", "Assam"]
    data["source"].update(endpoint=endpoint, commons_api=srv.url("/w/api.php"), states=["Kerala", "Assam"])
    data["supplement"][0]["backend"] = srv.url("")
    data["download"].update(allow_loopback=True, processes=0, threads=4, timeout=2)
    data["executor"].update(workers=0, task_size=4)
    return parse_recipe(data, base_dir=ROOT / "builders")


def _rejects(out: Path) -> dict[str, tuple[str, str]]:
    return {r["key"]: (r["step"], r["reason"]) for r in pq.read_table(out / "rejects.parquet").to_pylist()}


def _published(out: Path, variant: str = "imbalanced") -> list[dict]:
    rows = []
    for f in sorted((out / "metadata" / variant).glob("*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return rows


def test_indicfairface_end_to_end(tmp_path, monkeypatch, caplog, no_egress):
    from typer.testing import CliRunner

    from fairsets.cli import app
    from fairsets.pipeline.build import build

    monkeypatch.setenv("SERPAPI_API_KEY", SERP_KEY)
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    caplog.set_level(logging.DEBUG)
    imgs = faces()
    ttl = tmp_path / "graph.ttl"
    ttl.write_text(graph())
    with LoopbackServer() as srv, oxigraph_server(ttl) as endpoint:
        srv.route("/w/api.php", commons_api(srv))
        srv.route("/search", serpapi(srv))
        for name, data in imgs.items():
            for prefix in ("/thumb/", "/orig/"):
                srv.route(
                    f"{prefix}{name}.jpg",
                    lambda req, d=data: Response(200, {"Content-Type": "image/jpeg"}, d),
                )
        jpg = {"Content-Type": "image/jpeg"}
        srv.route("/web/ok-woman.jpg", lambda req: Response(200, jpg, imgs["p0v1"]))
        srv.route("/web/ok-man.jpg", lambda req: Response(200, jpg, imgs["p1v0"]))
        srv.route("/web/dup-of-gogoi.jpg", lambda req: Response(200, jpg, imgs["p1v7"]))
        srv.route("/web/optout.jpg", lambda req: Response(200, {**jpg, "X-Robots-Tag": "noai"}, imgs["p0v3"]))
        srv.route("/web/to-private.jpg", lambda req: Response(302, {"Location": f"http://{PRIVATE}/x.jpg"}))

        recipe = _recipe(endpoint, srv)
        out = tmp_path / "out"
        build(recipe, out)

        # ---- first build: Wikidata + Commons; SerpAPI asked for the Assam cells only
        queries = sorted(r.query["q"][0] for r in srv.requests if r.path == "/search")
        assert queries == ["Assam man face", "Assam woman face"]
        rej = _rejects(out)
        table = pq.read_table(out / "rejects.parquet").to_pylist()
        by_title = {r["title"]: (r["step"], r["reason"]) for r in table if r["source"] == "wikidata"}
        assert by_title == {
            "Deepa NC.jpg": ("license", "non-commercial licence (NC) is not allowed (CC-BY-NC-SA-4.0)"),
            "Faisal 2.jpg": ("license", "unknown or unrecognised licence: 'GFDL'"),
            MISSING_FILE: ("commons", "Commons: missing file"),
        }
        assert srv.hits("/thumb/p0v6.jpg") == srv.hits("/thumb/p1v5.jpg") == 0  # refused: never downloaded
        web = {
            r["url"].rsplit("/", 1)[-1]: (r["step"], r["reason"])
            for r in pq.read_table(out / "rejects.parquet").to_pylist()
            if r.get("source") == "serpapi"
        }
        assert web["optout.jpg"][0] == "download" and "X-Robots-Tag" in web["optout.jpg"][1]
        assert web["gone.jpg"][0] == "download" and "404" in web["gone.jpg"][1]
        assert web["to-private.jpg"][0] == "download"
        assert PRIVATE in web["to-private.jpg"][1] or "private" in web["to-private.jpg"][1].lower()
        assert no_egress.attempts == []  # the guard refused before any connection was tried
        assert srv.hits("/web/optout.jpg") == 1  # downloaded once, refused on its header
        # web candidates that passed the face pipeline await review; nothing from them is published
        awaiting = {k for k, (step, why) in rej.items() if step == "review" and "awaiting" in why}
        assert len(awaiting) == 3
        pub = _published(out)
        assert {r["person"] for r in pub} == {f"Q890000{i}" for i in (1, 2, 3, 5, 6, 7)}
        assert all(r["source"] == "wikidata" for r in pub)
        gogoi = next(r for r in pub if r["person"] == "Q8900007")
        assert (gogoi["state"], gogoi["association"]) == ("Assam", "birth")

        # ---- review: export a contact sheet, accept the two new faces, reject the copy
        runner = CliRunner()
        res = runner.invoke(app, ["review", "export", str(out), "--to", str(tmp_path / "rev")])
        assert res.exit_code == 0, res.output
        sheet = (tmp_path / "rev" / "review.html").read_text()
        assert sheet.count("data:image/jpeg;base64,") >= 3
        with (tmp_path / "rev" / "review.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == 3
        for r in rows:
            if r["url"].endswith("ok-woman.jpg"):
                r.update(decision="accept", license="CC BY 4.0", author="Mary Web")
            elif r["url"].endswith("ok-man.jpg"):
                r.update(decision="accept", license="CC0", author="")
            else:
                r.update(decision="reject", note="copy of a Commons image")
        with (tmp_path / "rev" / "review.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        res = runner.invoke(app, ["review", "import", str(out), str(tmp_path / "rev" / "review.csv")])
        assert res.exit_code == 0, res.output
        n_search = srv.hits("/search")
        build(recipe, out)
        assert srv.hits("/search") == n_search  # cached: no new query

        res = runner.invoke(
            app, ["publish", str(out), "--repo-id", "fairsets-test/indicfairface", "--dry-run"]
        )
        assert res.exit_code == 0, res.output
        assert "README.md" in res.output and "manifest.json" in res.output

    # ---- second build: the accepted web images are in, with the reviewer's licence and author
    pub = _published(out)
    web_rows = [r for r in pub if r["source"] == "serpapi"]
    assert sorted((r["state"], r["gender"], r["license"]) for r in web_rows) == [
        ("Assam", "female", "CC-BY-4.0"),
        ("Assam", "male", "CC0-1.0"),
    ]
    rej = _rejects(out)
    assert sum(1 for step, why in rej.values() if step == "review" and "copy of a Commons image" in why) == 1
    # every published image has an allowed licence; NC/ND/unknown never appear
    for variant in ("imbalanced", "balanced", "augmented"):
        for r in _published(out, variant):
            assert r["license"] in ALLOWED, r
    # an attribution line for every CC-BY/CC-BY-SA image (author and source page)
    attribution = (out / "ATTRIBUTION.md").read_text()
    for r in pub:
        if r["license"].startswith("CC-BY"):
            assert r["author"] and r["author"] in attribution and r["source_url"] in attribution, r
    assert "Ravi K" in attribution and "<a " not in attribution  # Commons HTML reduced to text
    # balanced: exactly 2 per cell, in every one of the 4 cells
    bal = _published(out, "balanced")
    cells = {}
    for r in bal:
        cells[(r["state"], r["gender"])] = cells.get((r["state"], r["gender"]), 0) + 1
    assert cells == {(s, g): 2 for s in ("Kerala", "Assam") for g in ("male", "female")}

    # ---- no secret anywhere: outputs (work folder included) and logs
    for f in out.rglob("*"):
        if f.is_file():
            blob = f.read_bytes()
            assert SERP_KEY.encode() not in blob and HF_TOKEN.encode() not in blob, f
    for f in (tmp_path / "rev").rglob("*"):
        assert SERP_KEY.encode() not in f.read_bytes()
    assert SERP_KEY not in caplog.text and HF_TOKEN not in caplog.text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["sources"][1]["type"] == "serpapi"
