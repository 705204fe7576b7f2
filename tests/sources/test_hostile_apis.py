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
from fairsets.sources import commons
from fairsets.sources.commons import CommonsError, file_info
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
    monkeypatch.setattr(commons, "MAX_ANSWER_BYTES", 1 << 20)
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
