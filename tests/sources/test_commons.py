"""Commons source: titles, batched imageinfo/extmetadata queries, licences, retries, cache."""

from __future__ import annotations

import io
import json
import unicodedata
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from PIL import Image

from fairsets.fetch.retry import HttpStatusError, RetryPolicy
from fairsets.publish.attribution import license_decision
from fairsets.sources.commons import (
    COMMONS_API,
    CommonsError,
    _parse_page,
    commons_image_url,
    file_info,
    file_title,
    license_row_fields,
)
from servers import LoopbackServer, Request, Response, json_response

FAST = RetryPolicy(attempts=3, backoff=0.0, jitter=0.0)
ARTIST_HTML = '<a href="//commons.wikimedia.org/wiki/User:X" title="User:X">X</a>'


def _ext(**fields: str) -> dict[str, dict[str, str]]:
    return {k: {"value": v, "source": "commons-desc-page", "hidden": ""} for k, v in fields.items()}


# title -> (width, height, extmetadata)
FILES: dict[str, tuple[int, int, dict[str, Any]]] = {
    "File:Priya Sharma.jpg": (
        2000,
        3000,
        _ext(
            LicenseShortName="CC BY-SA 4.0",
            LicenseUrl="https://creativecommons.org/licenses/by-sa/4.0",
            License="cc-by-sa-4.0",
            Artist=ARTIST_HTML,
            Credit='<span class="int-own-work" lang="en">Own work</span>',
            AttributionRequired="true",
            UsageTerms="Creative Commons Attribution-Share Alike 4.0",
        ),
    ),
    "File:Café portrait.jpg": (
        800,
        600,
        _ext(
            LicenseShortName="CC0",
            LicenseUrl="http://creativecommons.org/publicdomain/zero/1.0/deed.en",
            License="cc0",
            Credit='<a rel="nofollow" href="https://www.flickr.com/photos/x/1">Sunil &amp; Co</a>',
            AttributionRequired="false",
            UsageTerms="Creative Commons Zero, Public Domain Dedication",
        ),
    ),
    "File:Raja Ravi Varma portrait.jpg": (
        1200,
        1600,
        _ext(
            LicenseShortName="Public domain",
            License="pd",
            Artist='<bdi><a href="https://www.wikidata.org/wiki/Q286981">Raja Ravi Varma</a></bdi>',
            Credit="Scanned from a print",
            AttributionRequired="false",
            UsageTerms="Public domain",
        ),
    ),
    "File:Market day.jpg": (
        640,
        480,
        _ext(
            LicenseShortName="CC BY-NC-SA 2.0",
            LicenseUrl="https://creativecommons.org/licenses/by-nc-sa/2.0",
            Artist="Anon Photographer",
            AttributionRequired="true",
            UsageTerms="Creative Commons Attribution-NonCommercial-ShareAlike 2.0",
        ),
    ),
    "File:Gfdl only.png": (
        300,
        400,
        _ext(
            LicenseShortName="GFDL",
            LicenseUrl="https://www.gnu.org/copyleft/fdl.html",
            License="gfdl",
            Artist="Someone",
            AttributionRequired="true",
            UsageTerms="GNU Free Documentation License",
        ),
    ),
}
REDIRECTS = {"File:Ravi Varma old name.jpg": "File:Raja Ravi Varma portrait.jpg"}


class FakeCommons:
    """A MediaWiki ``api.php`` that answers ``prop=imageinfo`` like Commons (formatversion=2)."""

    def __init__(self, srv: LoopbackServer) -> None:
        self.srv = srv
        self.before: list[Response] = []  # answers served first, one per request (errors, 429s)
        self.continue_batches = False

    def _info(self, title: str, width: int | None) -> dict[str, Any]:
        name = title[len("File:") :]
        w, h, ext = FILES.get(title) or (1000, 1000, _ext(LicenseShortName="CC BY 4.0", Artist="Gen"))
        under = urllib.parse.quote(name.replace(" ", "_"))
        mime = "image/png" if name.endswith(".png") else "image/jpeg"
        info: dict[str, Any] = {
            "size": w * h // 10,
            "width": w,
            "height": h,
            "url": self.srv.url(f"/orig/{under}"),
            "descriptionurl": f"https://commons.wikimedia.org/wiki/File:{under}",
            "descriptionshorturl": "https://commons.wikimedia.org/w/index.php?curid=1",
            "sha1": f"{abs(hash(title)) % 10**40:040d}"[:40],
            "mime": mime,
            "extmetadata": ext,
        }
        if width:
            tw = min(width, w)
            info.update(
                thumburl=self.srv.url(f"/thumb/{under}/{tw}px-{under}"),
                thumbwidth=tw,
                thumbheight=round(h * tw / w),
            )
        return info

    def __call__(self, req: Request) -> Response:
        if self.before:
            return self.before.pop(0)
        q = {k: v[-1] for k, v in req.query.items()}
        assert q["action"] == "query" and q["prop"] == "imageinfo" and q["formatversion"] == "2"
        width = int(q["iiurlwidth"]) if "iiurlwidth" in q else None
        titles = q["titles"].split("|")
        assert len(titles) <= 50
        query: dict[str, Any] = {}
        pages = []
        for t in titles:
            nfc = unicodedata.normalize("NFC", t)
            if nfc != t:
                query.setdefault("normalized", []).append({"fromencoded": False, "from": t, "to": nfc})
            if nfc in REDIRECTS:
                query.setdefault("redirects", []).append({"from": nfc, "to": REDIRECTS[nfc]})
                nfc = REDIRECTS[nfc]
            if len(nfc.encode()) > 255:
                pages.append(
                    {
                        "title": nfc,
                        "invalidreason": "The requested page title is too long.",
                        "invalid": True,
                    }
                )
            elif nfc in FILES or nfc.startswith("File:Generated "):
                pages.append({"pageid": len(pages) + 1, "ns": 6, "title": nfc, "imagerepository": "local"})
            else:
                pages.append({"ns": 6, "title": nfc, "missing": True, "known": False, "imagerepository": ""})
        files = [p for p in pages if p.get("imagerepository") == "local"]
        half = len(files) // 2 if self.continue_batches and len(files) > 1 else len(files)
        part = files[half:] if "iicontinue" in q else files[:half]
        for p in part:
            p["imageinfo"] = [self._info(p["title"], width)]
        query["pages"] = pages
        answer: dict[str, Any] = {"batchcomplete": True, "query": query}
        if half < len(files) and "iicontinue" not in q:
            answer = {
                "continue": {"iicontinue": f"{files[half]['title'][5:]}|20200101000000", "continue": "||"},
                "query": query,
            }
        return json_response(answer)


def _jpeg(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 120, 90)).save(buf, format="JPEG")
    return buf.getvalue()


def _thumb(req: Request) -> Response:
    width = int(req.path.rsplit("/", 1)[-1].split("px-", 1)[0])
    return Response(200, {"Content-Type": "image/jpeg"}, _jpeg(width, width * 3 // 2))


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:  # one server per module: each shutdown costs half a second
        yield srv


@pytest.fixture
def commons(server: LoopbackServer) -> tuple[LoopbackServer, FakeCommons]:
    """The module's server with a fresh fake API and an empty request log."""
    server.routes.clear()
    server.requests.clear()
    fake = FakeCommons(server)
    server.route("/w/api.php", fake)
    return server, fake


def _info(srv: LoopbackServer, titles: list[str], **kw: Any) -> dict[str, dict[str, Any]]:
    kw.setdefault("policy", FAST)
    return file_info(titles, api_url=srv.url("/w/api.php"), **kw)


# --------------------------------------------------------------------------- titles


@pytest.mark.parametrize(
    ("value", "title"),
    [
        ("http://commons.wikimedia.org/wiki/Special:FilePath/Foo%20bar.jpg", "File:Foo bar.jpg"),
        ("https://commons.wikimedia.org/wiki/Special:FilePath/foo_bar.jpg?width=300", "File:Foo bar.jpg"),
        ("https://commons.wikimedia.org/wiki/File:Foo_bar.jpg", "File:Foo bar.jpg"),
        ("https://commons.wikimedia.org/wiki/File:Caf%C3%A9_(1).jpg#/media/x", "File:Café (1).jpg"),
        ("https://commons.wikimedia.org/w/index.php?title=File:Foo_bar.jpg&oldid=1", "File:Foo bar.jpg"),
        ("https://upload.wikimedia.org/wikipedia/commons/a/ab/Foo_bar.jpg", "File:Foo bar.jpg"),
        (
            "https://upload.wikimedia.org/wikipedia/commons/thumb/a/ab/Foo_bar.jpg/320px-Foo_bar.jpg",
            "File:Foo bar.jpg",
        ),
        ("File:Foo_bar.jpg", "File:Foo bar.jpg"),
        ("Image:foo  bar.jpg", "File:Foo bar.jpg"),
        ("file:émile.png", "File:Émile.png"),
        ("Foo%20bar.jpg", "File:Foo bar.jpg"),
        ("  Foo bar.jpg ", "File:Foo bar.jpg"),
    ],
)
def test_file_title(value: str, title: str) -> None:
    assert file_title(value) == title


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "https://example.org/images/foo.jpg",
        "https://commons.wikimedia.org/wiki/Category:India",
        "Category:Women of India",
        "File:a|b.jpg",
        "File:",
        "File:x<y>.jpg",
    ],
)
def test_file_title_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="not a Commons file"):
        file_title(value)


def test_commons_image_url() -> None:
    assert (
        commons_image_url("File:Café portrait (1).jpg", 512)
        == "https://commons.wikimedia.org/wiki/Special:FilePath/Caf%C3%A9_portrait_%281%29.jpg?width=512"
    )
    assert commons_image_url("https://commons.wikimedia.org/wiki/File:A_b.jpg") == (
        "https://commons.wikimedia.org/wiki/Special:FilePath/A_b.jpg"
    )
    assert COMMONS_API == "https://commons.wikimedia.org/w/api.php"


# --------------------------------------------------------------------------- file_info


def test_batch_answers_exactly(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, _ = commons
    decomposed = unicodedata.normalize("NFD", "File:Café portrait.jpg")
    long_title = "File:" + "a" * 300 + ".jpg"
    titles = [
        "https://commons.wikimedia.org/wiki/Special:FilePath/Priya%20Sharma.jpg",
        decomposed,
        "File:Ravi_Varma_old_name.jpg",
        "File:Market day.jpg",
        "Gfdl only.png",
        "File:Does not exist.jpg",
        long_title,
        "https://example.org/not-commons.jpg",
    ]
    out = _info(srv, titles, width=320, contact="team@example.org")
    assert list(out) == titles
    assert srv.hits("/w/api.php") == 1
    req = srv.requests[0]
    assert req.method == "POST"
    assert req.headers["User-Agent"].startswith("fairsets/0.1.0 (")
    assert "team@example.org" in req.headers["User-Agent"]
    q = {k: v[-1] for k, v in req.query.items()}
    assert q["iiprop"] == "url|extmetadata|size|mime|sha1"
    assert q["iiurlwidth"] == "320" and q["format"] == "json" and q["redirects"] == "1"
    assert "LicenseShortName" in q["iiextmetadatafilter"] and "Artist" in q["iiextmetadatafilter"]
    assert q["titles"].split("|")[:3] == ["File:Priya Sharma.jpg", decomposed, "File:Ravi Varma old name.jpg"]

    priya = out[titles[0]]
    assert priya == {
        "title": "File:Priya Sharma.jpg",
        "license_short": "CC BY-SA 4.0",
        "license": "CC-BY-SA-4.0",
        "license_url": "https://creativecommons.org/licenses/by-sa/4.0",
        "author": "X",
        "credit": "Own work",
        "attribution_required": True,
        "usage_terms": "Creative Commons Attribution-Share Alike 4.0",
        "url": srv.url("/orig/Priya_Sharma.jpg"),
        "thumb_url": srv.url("/thumb/Priya_Sharma.jpg/320px-Priya_Sharma.jpg"),
        "source_url": "https://commons.wikimedia.org/wiki/File:Priya_Sharma.jpg",
        "width": 2000,
        "height": 3000,
        "mime": "image/jpeg",
        "sha1": priya["sha1"],
        "error": "",
    }
    assert len(priya["sha1"]) == 40

    cafe = out[decomposed]  # normalized (NFC) by the API, mapped back to the input title
    assert cafe["title"] == "File:Café portrait.jpg"
    assert (cafe["license"], cafe["license_short"], cafe["attribution_required"]) == ("CC0-1.0", "CC0", False)
    assert cafe["author"] == "Sunil & Co" == cafe["credit"]  # no Artist: the Credit text

    ravi = out["File:Ravi_Varma_old_name.jpg"]  # a redirect, followed
    assert ravi["title"] == "File:Raja Ravi Varma portrait.jpg"
    assert (ravi["license"], ravi["author"], ravi["error"]) == ("PDM-1.0", "Raja Ravi Varma", "")

    nc = out["File:Market day.jpg"]
    assert (nc["license"], nc["license_short"]) == ("CC-BY-NC-SA-2.0", "CC BY-NC-SA 2.0")
    gfdl = out["Gfdl only.png"]
    assert (gfdl["license"], gfdl["license_short"], gfdl["mime"]) == (None, "GFDL", "image/png")

    missing = out["File:Does not exist.jpg"]
    assert missing["error"] == "missing file" and missing["url"] == "" and missing["license"] is None
    assert out[long_title]["error"] == "invalid title: The requested page title is too long."
    assert out["https://example.org/not-commons.jpg"]["error"].startswith("invalid title: not a Commons file")

    # what the build's license step sees: allowed ones pass, NC and unknown are rejected with a reason
    rows = {t: license_row_fields(i) for t, i in out.items()}
    assert rows[titles[0]] == {
        "license": "CC-BY-SA-4.0",
        "author": "X",
        "source_url": "https://commons.wikimedia.org/wiki/File:Priya_Sharma.jpg",
        "url": srv.url("/thumb/Priya_Sharma.jpg/320px-Priya_Sharma.jpg"),
        "title": "Priya Sharma.jpg",
        "attribution_required": True,
    }
    assert rows["Gfdl only.png"]["license"] == "GFDL"
    assert license_decision(rows["Gfdl only.png"]["license"]) == (
        None,
        False,
        "unknown or unrecognised licence: 'GFDL'",
    )
    assert license_decision(rows["File:Market day.jpg"]["license"])[1] is False
    assert rows["File:Does not exist.jpg"]["license"] == ""
    assert [license_decision(rows[t]["license"])[1] for t in titles[:3]] == [True, True, True]


def test_thumb_url_fetches_image_at_width(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, _ = commons
    srv.route("/thumb/Priya_Sharma.jpg/256px-Priya_Sharma.jpg", _thumb)
    info = _info(srv, ["File:Priya Sharma.jpg"], width=256)["File:Priya Sharma.jpg"]
    resp = requests.get(info["thumb_url"], headers={"User-Agent": "t"}, timeout=5)
    assert resp.status_code == 200
    assert Image.open(io.BytesIO(resp.content)).size == (256, 384)


def test_no_width_asks_no_thumbnail(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, _ = commons
    info = _info(srv, ["File:Priya Sharma.jpg"], width=None)["File:Priya Sharma.jpg"]
    assert "iiurlwidth" not in srv.requests[0].query
    assert info["thumb_url"] == "" and info["url"] == srv.url("/orig/Priya_Sharma.jpg")
    assert license_row_fields(info)["url"] == info["url"]


def test_batches_of_at_most_50_with_continue_and_progress(
    commons: tuple[LoopbackServer, FakeCommons],
) -> None:
    srv, fake = commons
    fake.continue_batches = True
    titles = [f"File:Generated {i}.jpg" for i in range(120)]
    seen: list[tuple[int, int]] = []
    out = _info(srv, [*titles, titles[0]], progress=lambda d, t: seen.append((d, t)))
    batches = [r.query["titles"][-1].split("|") for r in srv.requests]
    # 3 batches (50, 50, 20), each asked twice: once, then with iicontinue for the rest
    assert [len(b) for b in batches] == [50, 50, 50, 50, 20, 20]
    assert ["iicontinue" in r.query for r in srv.requests] == [False, True] * 3
    assert sorted(t for b in batches[::2] for t in b) == sorted(titles)
    assert seen == [(50, 120), (100, 120), (120, 120)]
    assert len(out) == 120
    assert all(
        i["error"] == "" and i["license"] == "CC-BY-4.0" and i["author"] == "Gen" for i in out.values()
    )
    assert out["File:Generated 119.jpg"]["thumb_url"].endswith("/1000px-Generated_119.jpg")


def test_batch_size_is_bounded(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, _ = commons
    with pytest.raises(ValueError, match="between 1 and 50"):
        _info(srv, ["File:A.jpg"], batch_size=51)
    out = _info(srv, [f"File:Generated {i}.jpg" for i in range(7)], batch_size=3)
    assert len(out) == 7 and srv.hits("/w/api.php") == 3


def test_429_with_retry_after_then_success(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, fake = commons
    fake.before = [Response(429, {"Retry-After": "7", "Content-Type": "text/plain"}, b"slow down")]
    slept: list[float] = []
    out = _info(srv, ["File:Priya Sharma.jpg"], sleep=slept.append)
    assert slept == [7.0]
    assert srv.hits("/w/api.php") == 2
    assert out["File:Priya Sharma.jpg"]["license"] == "CC-BY-SA-4.0"


def test_maxlag_error_is_retried(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, fake = commons
    lag = {"error": {"code": "maxlag", "info": "Waiting for 10.64.0.1: 6 seconds lagged.", "lag": 6}}
    fake.before = [json_response(lag, headers={"Retry-After": "6"}), json_response(lag)]
    slept: list[float] = []
    out = _info(srv, ["File:Priya Sharma.jpg"], sleep=slept.append)
    assert slept == [6.0, 5.0]  # Retry-After, else the maxlag default
    assert out["File:Priya Sharma.jpg"]["error"] == ""


def test_persistent_5xx_raises_after_retries(commons: tuple[LoopbackServer, FakeCommons]) -> None:
    srv, fake = commons
    fake.before = [Response(503, body=b"down")] * 3
    slept: list[float] = []
    with pytest.raises(HttpStatusError) as info:
        _info(srv, ["File:Priya Sharma.jpg"], sleep=slept.append)
    assert info.value.status == 503 and len(slept) == 2 and srv.hits("/w/api.php") == 3


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (
            json_response(
                {"error": {"code": "toomanyvalues", "info": "Too many values supplied for titles"}}
            ),
            "MediaWiki API error 'toomanyvalues': Too many values",
        ),
        (Response(200, {"Content-Type": "text/html"}, b"<html>proxy error</html>"), "not JSON"),
        (Response(403, {"Content-Type": "text/plain"}, b"blocked UA"), "HTTP 403"),
    ],
)
def test_other_errors_are_clear(
    commons: tuple[LoopbackServer, FakeCommons], answer: Response, match: str
) -> None:
    srv, fake = commons
    fake.before = [answer]
    with pytest.raises(CommonsError, match=match):
        _info(srv, ["File:Priya Sharma.jpg"])
    assert srv.hits("/w/api.php") == 1  # not retried


def test_cache_reuse(commons: tuple[LoopbackServer, FakeCommons], tmp_path: Path) -> None:
    srv, _ = commons
    titles = ["File:Priya Sharma.jpg", "File:Market day.jpg", "File:Does not exist.jpg"]
    first = _info(srv, titles, cache_dir=tmp_path)
    assert srv.hits("/w/api.php") == 1
    again = _info(srv, list(reversed(titles)), cache_dir=tmp_path)  # same batch, other order
    assert srv.hits("/w/api.php") == 1
    assert again == {t: first[t] for t in reversed(titles)}
    files = list(tmp_path.rglob("*.bin"))
    assert len(files) == 1 and json.loads(files[0].read_bytes())[0]["query"]["pages"]
    _info(srv, titles, cache_dir=tmp_path, width=640)  # another width is another key
    assert srv.hits("/w/api.php") == 2


CC = "https://creativecommons.org"


@pytest.mark.parametrize(
    ("fields", "spdx"),
    [
        ({"LicenseShortName": "CC BY-SA 3.0", "License": "cc-by-sa-3.0-migrated"}, "CC-BY-SA-3.0"),
        (
            {"LicenseShortName": "CC0", "LicenseUrl": "http://creativecommons.org/publicdomain/zero/1.0/"},
            "CC0-1.0",
        ),
        ({"LicenseShortName": "CC BY 4.0", "License": "cc-by-nc-4.0"}, None),  # the fields disagree
        (
            {
                "LicenseShortName": "CC BY 4.0",
                "LicenseUrl": "https://creativecommons.org/licenses/by-nd/4.0/",
            },
            None,
        ),
        ({"LicenseShortName": "Non-commercial use only", "License": "cc-by-4.0"}, None),  # a restriction
        ({"LicenseShortName": "CC BY 4.0 NonCommercial", "License": "cc-by-4.0"}, None),
    ],
)
def test_licence_fields_must_agree(fields: dict[str, str], spdx: str | None) -> None:
    """The first field that parses is not enough: the fields agree, and none names a restriction."""
    page = {
        "title": "File:A.jpg",
        "imageinfo": [{"url": "https://x.example/a.jpg", "extmetadata": _ext(**fields)}],
    }
    info = _parse_page(page, None)
    assert info["license"] == spdx
    allowed = license_decision(license_row_fields(info)["license"])[1]
    assert allowed is (spdx is not None)
