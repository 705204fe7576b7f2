"""SerpAPI source: the google_images request, usage-rights filter, key hygiene, templated queries."""

from __future__ import annotations

import json
import logging
import socket
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairsets.core.data import make_key
from fairsets.fetch.retry import RetryPolicy
from fairsets.sources.serpapi import (
    DEFAULT_TEMPLATES,
    SerpApiError,
    api_key_from_env,
    search_images,
    supplement_rows,
)
from servers import LoopbackServer, Request, Response, json_response

KEY = "sk-test-5e3c7a91f0d24b6e8a1c9d7f2b4e6a80"
FAST = RetryPolicy(attempts=3, backoff=0.0, jitter=0.0)
SHARED = "https://cdn.example.org/shared-face.jpg"


def _item(q: str, i: int, **extra: Any) -> dict[str, Any]:
    slug = q.replace(" ", "-").lower()
    return {
        "position": i + 1,
        "thumbnail": f"https://serpapi.com/searches/abc/images/{slug}-{i}.jpeg",
        "related_content_id": f"rc{i}",
        "serpapi_related_content_link": "https://serpapi.com/search.json?engine=google_images_related_content",
        "source": f"Site {i}",
        "source_logo": "https://serpapi.com/logo.png",
        "title": f"{q} photo {i}",
        "link": f"https://site{i}.example.org/{slug}",
        "original": f"https://img{i}.example.org/{slug}.jpg",
        "original_width": 1024,
        "original_height": 768,
        "is_product": False,
        **extra,
    }


class FakeSerpApi:
    """``/search`` answering google_images JSON like SerpAPI (errors as ``{"error": ...}``)."""

    def __init__(self) -> None:
        self.before: list[Response] = []
        self.pages: dict[str, list[list[dict[str, Any]]]] = {}

    def __call__(self, req: Request) -> Response:
        if self.before:
            return self.before.pop(0)
        q = {k: v[-1] for k, v in req.query.items()}
        if q.get("api_key") != KEY:
            return json_response(
                {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"},
                401,
            )
        if q.get("engine") != "google_images":
            return json_response({"error": "Unsupported engine"}, 400)
        pages = self.pages.get(q["q"])
        if pages is None:
            pages = [[_item(q["q"], i) for i in range(3)]]
        ijn = int(q.get("ijn", "0"))
        results = pages[ijn] if ijn < len(pages) else []
        meta = {
            "id": "abc",
            "status": "Success",
            "json_endpoint": "https://serpapi.com/searches/abc/abc.json",
        }
        params = {k: v for k, v in q.items() if k != "api_key"}
        if not results:
            return json_response(
                {
                    "search_metadata": meta,
                    "search_parameters": params,
                    "error": "Google hasn't returned any results for this query.",
                }
            )
        return json_response(
            {"search_metadata": meta, "search_parameters": params, "images_results": results}
        )


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:  # one server per module: each shutdown costs half a second
        yield srv


@pytest.fixture
def serp(server: LoopbackServer) -> tuple[LoopbackServer, FakeSerpApi]:
    server.routes.clear()
    server.requests.clear()
    fake = FakeSerpApi()
    server.route("/search", fake)
    return server, fake


def _search(srv: LoopbackServer, query: str, **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("api_key", KEY)
    kw.setdefault("policy", FAST)
    return search_images(query, backend=srv.url(""), **kw)


def _no_key_anywhere(*things: Any) -> None:
    for thing in things:
        assert KEY not in (thing if isinstance(thing, str) else json.dumps(thing, default=str))


# --------------------------------------------------------------------------- key


def test_api_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPAPI_API_KEY", raising=False)
    with pytest.raises(SerpApiError, match="set SERPAPI_API_KEY"):
        api_key_from_env()
    monkeypatch.setenv("SERPAPI_API_KEY", "   ")
    with pytest.raises(SerpApiError, match="set SERPAPI_API_KEY"):
        api_key_from_env()
    monkeypatch.setenv("MY_KEY", f" {KEY} ")
    assert api_key_from_env("MY_KEY") == KEY


def test_search_without_key_fails_before_any_request(
    serp: tuple[LoopbackServer, FakeSerpApi], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, _ = serp
    monkeypatch.delenv("SERPAPI_API_KEY", raising=False)
    with pytest.raises(SerpApiError, match="SERPAPI_API_KEY"):
        _search(srv, "Goa man face", api_key=None)
    assert srv.requests == []


# --------------------------------------------------------------------------- search_images


def test_request_and_rows(
    serp: tuple[LoopbackServer, FakeSerpApi], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    srv, fake = serp
    details = "https://creativecommons.org/licenses/by-sa/4.0/"
    fake.pages["Mizoram woman face"] = [
        [
            _item("Mizoram woman face", 0, license_details_url=details, tag="Licensable"),
            _item("Mizoram woman face", 1),
            _item("Mizoram woman face", 1),  # the same image twice: kept once
        ]
    ]
    caplog.set_level(logging.DEBUG)  # urllib3 logs request URLs at DEBUG: they must be redacted
    from serpapi import GoogleSearch

    rows = _search(srv, "Mizoram woman face", cache_dir=tmp_path, extra_params={"gl": "in", "hl": "en"})
    assert GoogleSearch.BACKEND == "https://serpapi.com"  # no global state was changed

    assert srv.hits("/search") == 1
    req = srv.requests[0]
    assert req.method == "GET"
    assert {k: v[-1] for k, v in req.query.items()} == {
        "engine": "google_images",
        "q": "Mizoram woman face",
        "licenses": "cl",
        "ijn": "0",
        "gl": "in",
        "hl": "en",
        "api_key": KEY,
        "output": "json",
        "source": "python",
    }
    _no_key_anywhere(req.headers)  # only as the API parameter
    assert rows == [
        {
            "url": "https://img0.example.org/mizoram-woman-face.jpg",
            "thumbnail": "https://serpapi.com/searches/abc/images/mizoram-woman-face-0.jpeg",
            "source_url": "https://site0.example.org/mizoram-woman-face",
            "title": "Mizoram woman face photo 0",
            "source": "Site 0",
            "width": 1024,
            "height": 768,
            "license_hint": details,
            "license_details_url": details,
            "tag": "Licensable",
            "position": 1,
            "query": "Mizoram woman face",
        },
        {
            "url": "https://img1.example.org/mizoram-woman-face.jpg",
            "thumbnail": "https://serpapi.com/searches/abc/images/mizoram-woman-face-1.jpeg",
            "source_url": "https://site1.example.org/mizoram-woman-face",
            "title": "Mizoram woman face photo 1",
            "source": "Site 1",
            "width": 1024,
            "height": 768,
            "license_hint": "Creative Commons licences (filter cl)",
            "license_details_url": "",
            "tag": "",
            "position": 2,
            "query": "Mizoram woman face",
        },
    ]
    assert any("api_key=***" in r.getMessage() for r in caplog.records if r.name.startswith("urllib3"))
    _no_key_anywhere(rows, caplog.text, [r.getMessage() for r in caplog.records])
    cached = list(tmp_path.rglob("*.bin"))
    assert len(cached) == 1
    for f in cached:
        _no_key_anywhere(f.read_bytes().decode())

    again = _search(srv, "Mizoram woman face", cache_dir=tmp_path, extra_params={"gl": "in", "hl": "en"})
    assert again == rows and srv.hits("/search") == 1  # from the cache
    # the cache key does not depend on the key: another key reads the same entry, sends nothing
    assert (
        _search(
            srv,
            "Mizoram woman face",
            cache_dir=tmp_path,
            api_key="other",
            extra_params={"gl": "in", "hl": "en"},
        )
        == rows
    )
    assert srv.hits("/search") == 1


def test_other_usage_rights_filter_and_none(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, _ = serp
    rows = _search(srv, "Goa man face", licenses="fmc")
    assert srv.requests[-1].query["licenses"] == ["fmc"]
    assert rows[0]["license_hint"] == "Free to use, share or modify, even commercially (filter fmc)"
    rows = _search(srv, "Goa man face", licenses=None)
    assert "licenses" not in srv.requests[-1].query and rows[0]["license_hint"] == ""
    with pytest.raises(ValueError, match="unknown licenses filter"):
        _search(srv, "Goa man face", licenses="cc")
    with pytest.raises(ValueError, match="api_key"):
        _search(srv, "Goa man face", extra_params={"api_key": "x"})


def test_pages_until_num(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, fake = serp
    q = "Tripura man face"
    fake.pages[q] = [[_item(q, i) for i in range(100)], [_item(q, i) for i in range(100, 130)]]
    rows = _search(srv, q, num=150)
    assert [r.query["ijn"] for r in srv.requests] == [["0"], ["1"]]
    assert len(rows) == 130 and rows[-1]["position"] == 130
    srv.requests.clear()
    assert len(_search(srv, q, num=40)) == 40 and len(srv.requests) == 1


def test_no_results_is_empty(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, fake = serp
    fake.pages["Ladakh woman face"] = [[]]
    assert _search(srv, "Ladakh woman face") == []


def test_429_retried_with_retry_after(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, fake = serp
    fake.before = [
        json_response({"error": "Too many requests"}, 429, {"Retry-After": "2"}),
        json_response({"error": "Internal error"}, 503),
    ]
    slept: list[float] = []
    rows = _search(srv, "Goa man face", sleep=slept.append)
    assert slept == [2.0, 0.0] and len(rows) == 3 and srv.hits("/search") == 3


def _assert_clean(exc: BaseException) -> None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    _no_key_anywhere(str(exc), repr(exc), text)
    assert exc.__cause__ is None


def test_errors_never_contain_the_key(
    serp: tuple[LoopbackServer, FakeSerpApi], caplog: pytest.LogCaptureFixture
) -> None:
    srv, fake = serp
    caplog.set_level(logging.DEBUG)
    # a refused key (401): not retried
    with pytest.raises(SerpApiError, match="HTTP 401: Invalid API key") as info:
        _search(srv, "Goa man face", api_key=KEY[::-1])
    assert srv.hits("/search") == 1
    _assert_clean(info.value)
    # an error text that echoes the key back
    fake.before = [json_response({"error": f"Account for key {KEY} has run out of searches."}, 200)]
    with pytest.raises(SerpApiError, match=r"key \*\*\* has run out") as info:
        _search(srv, "Goa man face")
    _assert_clean(info.value)
    # 429 until the retries are spent
    fake.before = [json_response({"error": f"throughput limit for {KEY}"}, 429)] * 3
    with pytest.raises(SerpApiError, match="after retries: HTTP 429") as info:
        _search(srv, "Goa man face", sleep=lambda s: None)
    _assert_clean(info.value)
    _no_key_anywhere(caplog.text)


def test_connection_error_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG)
    slept: list[float] = []
    with pytest.raises(SerpApiError, match=r"cannot reach the server \(not retried\)") as info:
        search_images(
            "Goa man face", api_key=KEY, backend=f"http://127.0.0.1:{port}", policy=FAST, sleep=slept.append
        )
    assert slept == []  # a refused connection fails at once (fetch.retry.unreachable); drops are retried
    _assert_clean(info.value)
    _no_key_anywhere(caplog.text)


# --------------------------------------------------------------------------- supplement_rows


def test_supplement_rows_for_cells_below_quota(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, fake = serp
    fake.pages["Mizoram man face"] = [
        [_item("Mizoram man face", 0, original=SHARED), _item("Mizoram man face", 1)]
    ]
    fake.pages["Mizoram woman face"] = [
        [_item("Mizoram woman face", 0), _item("Mizoram woman face", 1, original=SHARED)]
    ]
    cells = [
        {"state": "Mizoram", "gender": "male"},
        {"state": "Mizoram", "gender": "female"},
        {"state": "Kerala", "gender": "female"},
        {"state": "Goa", "gender": "male"},
    ]
    need = {("Mizoram", "male"): 5, ("Mizoram", "female"): 2, ("Kerala", "female"): 0}
    rows = supplement_rows(cells, need, api_key=KEY, backend=srv.url(""), policy=FAST, per_query=50)
    assert [r.query["q"][-1] for r in srv.requests] == ["Mizoram man face", "Mizoram woman face"]
    assert [(r["gender"], r["url"]) for r in rows] == [
        ("male", SHARED),
        ("male", "https://img1.example.org/mizoram-man-face.jpg"),
        ("female", "https://img0.example.org/mizoram-woman-face.jpg"),
    ]
    key = make_key("serpapi", SHARED)
    assert rows[0] == {
        "key": key,
        "state": "Mizoram",
        "gender": "male",
        "identity": key,
        "url": SHARED,
        "thumbnail": "https://serpapi.com/searches/abc/images/mizoram-man-face-0.jpeg",
        "source_url": "https://site0.example.org/mizoram-man-face",
        "title": "Mizoram man face photo 0",
        "author": "Site 0",
        "license": "",
        "license_hint": "Creative Commons licences (filter cl)",
        "review": "pending",
        "query": "Mizoram man face",
        "source": "serpapi",
        "width": 1024,
        "height": 768,
        "position": 1,
    }
    assert len({r["key"] for r in rows}) == 3 and all("." not in r["key"] for r in rows)
    _no_key_anywhere(rows)


def test_supplement_templates_and_named_licence(serp: tuple[LoopbackServer, FakeSerpApi]) -> None:
    srv, fake = serp
    fake.pages["portrait of a woman from Goa (female)"] = [
        [
            _item(
                "portrait of a woman from Goa (female)",
                0,
                license_details_url="https://creativecommons.org/licenses/by/2.0/",
            )
        ]
    ]
    templates = {"female": "portrait of a woman from {state} ({gender})"}
    rows = supplement_rows(
        [{"region": "Goa", "sex": "female"}],
        {("Goa", "female"): 1},
        templates=templates,
        state_attr="region",
        gender_attr="sex",
        api_key=KEY,
        backend=srv.url(""),
        policy=FAST,
    )
    assert rows[0]["query"] == "portrait of a woman from Goa (female)"
    assert (rows[0]["region"], rows[0]["sex"], rows[0]["license"]) == ("Goa", "female", "CC-BY-2.0")
    assert DEFAULT_TEMPLATES == {"male": "{state} man face", "female": "{state} woman face"}
    with pytest.raises(ValueError, match=r"cannot fill 'age'"):
        supplement_rows(
            [{"region": "Goa", "sex": "female"}],
            {("Goa", "female"): 1},
            templates={"female": "{state} {age}"},
            state_attr="region",
            gender_attr="sex",
            api_key=KEY,
            backend=srv.url(""),
        )
    with pytest.raises(ValueError, match="no query template for sex='male'"):
        supplement_rows(
            [{"region": "Goa", "sex": "male"}],
            {("Goa", "male"): 1},
            templates=templates,
            state_attr="region",
            gender_attr="sex",
            api_key=KEY,
            backend=srv.url(""),
        )
