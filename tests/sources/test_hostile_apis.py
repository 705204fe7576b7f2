"""API clients against hostile loopback servers: bombs, broken JSON shapes, huge answers.

Every answer here is one a broken or hostile server can send; each must end as a clear error of
the client (``CommonsError``, ``SerpApiError``, ``SparqlResponseError``) or a per-file error,
never an ``AttributeError``/``RecursionError`` and never gigabytes of memory.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from fairsets.fetch import answers
from fairsets.fetch.retry import RetryPolicy
from fairsets.sources.commons import CommonsError, file_info
from fairsets.sources.commons import api as commons_api
from servers import LoopbackServer, Response, json_response

NO_RETRY = RetryPolicy(attempts=1, backoff=0)


def _gzip_bomb(inflated: int) -> bytes:
    """A gzip body that inflates to ``inflated`` bytes of JSON-looking text (built in 1 MiB steps)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(b'{"x": "')]
    block = b"a" * (1 << 20)
    for _ in range(inflated >> 20):
        parts.append(z.compress(block))
    parts.append(z.compress(b'"}'))
    parts.append(z.flush())
    return b"".join(parts)


def _commons(resp: Response | list[Response], **kw: Any) -> dict[str, dict[str, Any]]:
    answers_ = resp if isinstance(resp, list) else [resp]
    with LoopbackServer() as srv:
        srv.route("/w/api.php", lambda req: answers_[min(srv.hits("/w/api.php"), len(answers_)) - 1])
        return file_info(["File:A.jpg"], api_url=srv.url("/w/api.php"), policy=NO_RETRY, **kw)


# --------------------------------------------------------------------------- Commons


@pytest.mark.timeout(30)
def test_commons_gzip_bomb_is_refused_before_it_inflates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commons_api, "MAX_ANSWER_BYTES", 1 << 20)
    bomb = _gzip_bomb(64 << 20)
    assert len(bomb) < 200_000
    resp = Response(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb)
    with pytest.raises(CommonsError, match=r"more than 1048576 bytes \(after decompression\)"):
        _commons(resp)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"query": {"pages": [{"width": ' + b"9" * 10_000 + b"}]}}", "integer string conversion"),
        (b'{"query": {"pages": [{"title": "File:A.jpg\xff"}]}}', "utf-8"),
    ],
    ids=["deep", "huge-number", "not-utf8"],
)
def test_commons_json_bombs_are_clear_errors(body: bytes, why: str) -> None:
    with pytest.raises(CommonsError, match="not usable JSON") as info:
        _commons(Response(200, {"Content-Type": "application/json"}, body))
    assert why in str(info.value)


def _page(**ii: Any) -> dict[str, Any]:
    return {"query": {"pages": [{"title": "File:A.jpg", "imageinfo": [ii]}]}}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "answer",
    [
        {"query": {"pages": ["x", 3, None]}},
        {"query": [1, 2]},
        {"query": "pages"},
        {"query": {"normalized": [5, "x"], "redirects": "x", "pages": []}},
        {"query": {"pages": []}, "warnings": "x"},
        {"query": {"pages": [{"title": "File:A.jpg", "imageinfo": ["x"]}]}},
        {"query": {"pages": [{"title": "File:A.jpg", "imageinfo": "x"}]}},
        _page(url=5, extmetadata=[1], width="wide", mime=["x"]),
        _page(url="javascript:alert(1)", descriptionurl="javascript:alert(2)"),
        _page(url="data:image/png;base64,AAAA"),
        _page(url="/w/relative.jpg"),
        _page(url="file:///etc/passwd"),
    ],
    ids=lambda a: json.dumps(a)[:40],
)
def test_commons_broken_shapes_are_per_file_errors(answer: dict[str, Any]) -> None:
    out = _commons(json_response(answer))["File:A.jpg"]
    assert out["error"]
    assert out["url"] == out["thumb_url"] == out["source_url"] == ""


@pytest.mark.timeout(30)
def test_commons_keeps_only_http_urls() -> None:
    ok = _page(
        url="//upload.example.org/A.jpg",
        thumburl="javascript:alert(1)",
        descriptionurl="data:text/html,<script>",
        width=True,
        height=-3,
        extmetadata={"LicenseShortName": {"value": "CC0"}},
    )
    out = _commons(json_response(ok), width=320)["File:A.jpg"]
    assert out["error"] == ""
    assert out["url"] == "https://upload.example.org/A.jpg"
    assert out["thumb_url"] == out["source_url"] == ""
    assert out["width"] is None and out["height"] is None


@pytest.mark.timeout(30)
def test_commons_continue_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(CommonsError, match="'continue' that is not an object"):
        _commons(json_response({"query": {"pages": []}, "continue": "again"}))


def test_read_capped_stream_stops_at_the_cap() -> None:
    import io

    assert answers.read_capped_stream(io.BytesIO(b"x" * 10), 10, "svc") == b"x" * 10
    with pytest.raises(answers.BadAnswer, match="svc answered more than 9 bytes"):
        answers.read_capped_stream(io.BytesIO(b"x" * 10), 9, "svc")


# --------------------------------------------------------------------------- SerpAPI

SERP_KEY = "sk-hostile-0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a"


def _serp(resp: Response, **kw: Any) -> list[dict[str, Any]]:
    from fairsets.sources.serpapi import search_images

    with LoopbackServer() as srv:
        srv.route("/search", lambda req: resp)
        return search_images("Goa man face", api_key=SERP_KEY, backend=srv.url(""), policy=NO_RETRY, **kw)


@pytest.mark.timeout(30)
def test_serpapi_gzip_bomb_is_refused_before_it_inflates(monkeypatch: pytest.MonkeyPatch) -> None:
    from fairsets.sources import serpapi

    monkeypatch.setattr(serpapi, "MAX_ANSWER_BYTES", 1 << 20)
    resp = Response(
        200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, _gzip_bomb(64 << 20)
    )
    with pytest.raises(serpapi.SerpApiError, match=r"more than 1048576 bytes") as info:
        _serp(resp)
    assert SERP_KEY not in str(info.value)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000 + b"]" * 100_000, b'{"images_results": [' + b"7" * 10_000 + b"]}"],
    ids=["deep", "huge-number"],
)
def test_serpapi_json_bombs_are_clear_errors(body: bytes) -> None:
    from fairsets.sources.serpapi import SerpApiError

    with pytest.raises(SerpApiError, match="not usable JSON") as info:
        _serp(Response(200, {"Content-Type": "application/json"}, body))
    assert SERP_KEY not in str(info.value)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("results", [5, "x", {"a": 1}, [1, None, "x"]])
def test_serpapi_results_that_are_not_a_list_of_objects_give_nothing(results: Any) -> None:
    assert _serp(json_response({"images_results": results})) == []


@pytest.mark.timeout(30)
def test_serpapi_results_keep_only_http_urls_and_integer_sizes() -> None:
    good = "https://img.example.org/a.jpg"
    items = [
        {"original": "javascript:alert(1)", "link": "https://site.example.org/"},
        {"original": "data:image/png;base64,AAAA"},
        {"original": "/relative/a.jpg"},
        {"original": "file:///etc/passwd"},
        {"original": "http://img.example.org/b.jpg\r\nX-Injected: 1"},
        {"original": 5},
        {
            "original": good,
            "link": "javascript:alert(2)",
            "thumbnail": "data:image/jpeg;base64,AAAA",
            "license_details_url": "javascript:alert(3)",
            "original_width": "wide",
            "original_height": 1e308,
            "position": True,
            "title": ["<b>x</b>"],
        },
    ]
    rows = _serp(json_response({"images_results": items}))
    assert [r["url"] for r in rows] == [good]
    row = rows[0]
    assert row["source_url"] == row["thumbnail"] == row["license_details_url"] == ""
    assert row["license_hint"] == "Creative Commons licences (filter cl)"
    assert row["width"] is None and row["height"] is None and row["position"] is None
    assert row["title"] == ""


# --------------------------------------------------------------------------- Wikidata SPARQL


def _sparql(resp: Response, **kw: Any) -> list[dict[str, Any]]:
    from fairsets.sources.wikidata import fetch_people, load_states

    state = load_states()[0]
    with LoopbackServer() as srv:
        srv.route("/sparql", lambda req: resp)
        return fetch_people(
            [state], ["male"], endpoint=srv.url("/sparql"), associations=["birth"], policy=NO_RETRY, **kw
        )


def _bindings(*rows: Any) -> Response:
    return json_response({"head": {"vars": []}, "results": {"bindings": list(rows)}})


def _person(n: int, label: Any, image: Any = "Face.jpg") -> dict[str, Any]:
    return {
        "person": {"type": "uri", "value": f"http://www.wikidata.org/entity/Q{n}"},
        "image": {"type": "literal", "value": image},
        "labelEn": {"type": "literal", "value": label},
    }


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"results": {"bindings": [' + b"1" * 10_000 + b"]}}",
        b'{"results": {"bindings": ["\xff"]}}',
    ],
    ids=["deep", "huge-number", "not-utf8"],
)
def test_sparql_json_bombs_are_clear_errors(body: bytes) -> None:
    from fairsets.sources.wikidata import SparqlResponseError

    with pytest.raises(SparqlResponseError, match="not usable JSON"):
        _sparql(Response(200, {"Content-Type": "application/sparql-results+json"}, body))


@pytest.mark.timeout(30)
def test_sparql_answer_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    from fairsets.sources import wikidata
    from fairsets.sources.wikidata import service

    monkeypatch.setattr(service, "MAX_ANSWER_BYTES", 1000)
    big = _bindings(*[_person(i, "x" * 50) for i in range(1, 50)])
    with pytest.raises(wikidata.SparqlResponseError, match=r"more than 1000 bytes.*page_size"):
        _sparql(big)


@pytest.mark.timeout(30)
def test_sparql_bindings_of_the_wrong_shape_are_skipped() -> None:
    rows = _sparql(
        _bindings(
            1,
            "x",
            None,
            [1],
            {"person": {"value": 5}, "image": {"value": ["Face.jpg"]}},
            {"person": "http://www.wikidata.org/entity/Q3", "image": "Face.jpg"},
            _person(7, 12345),
            _person(8, "Asha", image={"x": 1}),
        )
    )
    assert [(r["person"], r["label"]) for r in rows] == [("Q7", "Q7")]


@pytest.mark.timeout(30)
def test_sparql_hostile_labels_become_one_short_line() -> None:
    from fairsets.sources.wikidata import MAX_LABEL_CHARS

    labels = {
        1: "Asha\nInjected: line\r\n\tthree",
        2: "\u202eevil\u202c name\u2066x\u2069",
        3: "<script>alert(1)</script>",
        4: "y" * 100_000,
        5: "\x00\x1b[31m\x7f",
        6: "अमिताभ بچن",  # right-to-left and other scripts are kept
    }
    rows = {r["person"]: r["label"] for r in _sparql(_bindings(*[_person(n, t) for n, t in labels.items()]))}
    assert rows["Q1"] == "Asha Injected: line three"
    assert rows["Q2"] == "evil name x"
    assert rows["Q3"] == "<script>alert(1)</script>"  # text, escaped where it is rendered
    assert len(rows["Q4"]) == MAX_LABEL_CHARS and rows["Q4"].endswith("…")
    assert rows["Q5"] == "[31m"
    assert rows["Q6"] == "अमिताभ بچن"


ODD_KEY = "sk/odd+key with&chars=1"


def _key_forms(key: str) -> set[str]:
    import urllib.parse

    return {key, urllib.parse.quote_plus(key), urllib.parse.quote(key, safe=""), urllib.parse.quote(key)}


@pytest.mark.timeout(30)
def test_serpapi_key_never_leaks_url_encoded(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    import logging
    import socket

    from fairsets.sources.serpapi import SerpApiError, search_images

    caplog.set_level(logging.DEBUG)
    with socket.socket() as s:  # a loopback port nobody listens on: requests quotes the whole URL
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SerpApiError, match="cannot reach the server") as refused:
        search_images("q", api_key=ODD_KEY, backend=f"http://127.0.0.1:{port}", policy=NO_RETRY)
    echoed = " ".join(sorted(_key_forms(ODD_KEY)))
    with LoopbackServer() as srv:  # a server that echoes the key, in every encoding, in its answers
        srv.route("/search", lambda req: json_response({"error": f"bad key {echoed}"}, 401))
        with pytest.raises(SerpApiError, match="HTTP 401") as answered:
            search_images("q", api_key=ODD_KEY, backend=srv.url(""), policy=NO_RETRY)
        item = {"original": f"https://img.example.org/a.jpg?k={echoed}", "title": echoed}
        srv.route("/search", lambda req: json_response({"images_results": [item]}))
        rows = search_images("q", api_key=ODD_KEY, backend=srv.url(""), policy=NO_RETRY, cache_dir=tmp_path)
    cached = " ".join(p.read_text("utf-8") + p.name for p in tmp_path.rglob("*") if p.is_file())
    for text in (str(refused.value), str(answered.value), caplog.text, json.dumps(rows), cached):
        for form in _key_forms(ODD_KEY):
            assert form not in text
    assert "api_key=***" in str(refused.value)


@pytest.mark.timeout(30)
def test_commons_extmetadata_html_becomes_short_plain_text() -> None:
    from fairsets.sources.commons import MAX_TEXT_CHARS, license_row_fields

    ext = {
        "Artist": {"value": '<script>alert("x")</script><a href="javascript:a()">Bob</a>\n<img onerror=a>'},
        "Credit": {"value": "<style>p{}</style>Own &amp;lt;work&amp;gt;"},
        "UsageTerms": {"value": "u" * 100_000},
        "LicenseShortName": {"value": "CC0" + " really" * 400},
    }
    answer = _page(url="https://upload.example.org/A.jpg", extmetadata=ext)
    out = _commons(json_response(answer))["File:A.jpg"]
    assert out["author"] == "Bob"
    assert out["credit"] == "Own &lt;work&gt;"  # entities decoded once: the visible text
    assert len(out["usage_terms"]) == MAX_TEXT_CHARS and out["usage_terms"].endswith("…")
    assert len(out["license_short"]) == MAX_TEXT_CHARS and out["license"] is None
    assert license_row_fields(out)["license"].startswith("CC0 really")


@pytest.mark.timeout(30)
def test_sparql_new_full_pages_forever_end(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from fairsets.sources import wikidata
    from fairsets.sources.wikidata import people
    from servers import Request

    monkeypatch.setattr(people, "MAX_ROWS_PER_QUERY", 20)

    def endless(req: Request) -> Response:  # a different full page at every offset
        offset = int(re.search(r"OFFSET (\d+)", req.query["query"][0]).group(1))
        return _bindings(_person(offset + 1, "a"), _person(offset + 2, "b"))

    state = wikidata.load_states()[0]
    with LoopbackServer() as srv:
        srv.route("/sparql", endless)
        with pytest.raises(wikidata.SparqlResponseError, match="and more full pages"):
            wikidata.fetch_people(
                [state],
                ["male"],
                endpoint=srv.url("/sparql"),
                associations=["birth"],
                page_size=2,
                policy=NO_RETRY,
            )
        assert srv.hits("/sparql") == 10


# --------------------------------------------------------------------------- broken cache entries


def _break_cache(folder: Any, content: bytes) -> int:
    files = [p for p in folder.rglob("*.bin") if p.is_file()]
    for p in files:
        p.write_bytes(content)
    return len(files)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("content", [b"", b"{not json", b'{"a": 1}', b"[1, 2]", b"[" * 50_000])
def test_broken_cache_entries_are_asked_again(content: bytes, tmp_path: Any) -> None:
    from fairsets.sources.serpapi import search_images
    from fairsets.sources.wikidata import fetch_people, load_states

    good = _page(url="https://upload.example.org/A.jpg", extmetadata={"LicenseShortName": {"value": "CC0"}})
    item = {"original": "https://img.example.org/a.jpg"}
    with LoopbackServer() as srv:
        srv.route("/w/api.php", lambda req: json_response(good))
        srv.route("/search", lambda req: json_response({"images_results": [item]}))
        srv.route("/sparql", lambda req: _bindings(_person(5, "Asha")))

        def run() -> tuple[Any, ...]:
            commons_out = file_info(
                ["File:A.jpg"], api_url=srv.url("/w/api.php"), cache_dir=tmp_path, policy=NO_RETRY
            )
            serp = search_images(
                "q", api_key=SERP_KEY, backend=srv.url(""), cache_dir=tmp_path, policy=NO_RETRY
            )
            people = fetch_people(
                load_states()[:1],
                ["male"],
                endpoint=srv.url("/sparql"),
                associations=["birth"],
                cache_dir=tmp_path,
                policy=NO_RETRY,
            )
            return (
                commons_out["File:A.jpg"]["license"],
                [r["url"] for r in serp],
                [p["person"] for p in people],
            )

        first = run()
        assert _break_cache(tmp_path, content) == 3
        assert run() == first == ("CC0-1.0", ["https://img.example.org/a.jpg"], ["Q5"])
        assert srv.hits("/w/api.php") == srv.hits("/search") == srv.hits("/sparql") == 2


@pytest.mark.timeout(30)
def test_serpapi_result_texts_are_one_short_line() -> None:
    from fairsets.sources.serpapi import MAX_TEXT_CHARS

    title = "a\nInjected: b\r\n" + "t" * 100_000
    item = {"original": "https://img.example.org/a.jpg", "title": title, "tag": "x\ty"}
    row = _serp(json_response({"images_results": [item]}))[0]
    assert row["title"].startswith("a Injected: b ttt") and len(row["title"]) == MAX_TEXT_CHARS
    assert row["tag"] == "x y"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("status", [200, 400, 503])
def test_serpapi_huge_error_text_is_one_short_line(status: int) -> None:
    from fairsets.sources.serpapi import SerpApiError

    error = f"quota\r\n\x1b[2J gone for {SERP_KEY} " + "blah\n" * 200_000 + SERP_KEY
    body = json.dumps({"error": error}).encode()
    with pytest.raises(SerpApiError) as info:
        _serp(Response(status, {"Content-Type": "application/json"}, body))
    msg = str(info.value)
    assert len(msg) < 800 and "\n" not in msg and all(c.isprintable() for c in msg), msg[:1000]
    assert "quota" in msg and "characters in all" in msg and SERP_KEY not in msg
