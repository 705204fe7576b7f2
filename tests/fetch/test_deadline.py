"""Wall-clock deadline and minimum rate per download: a server that drips or never answers.

``timeout`` bounds one socket operation; a server that sends a byte every half second never
trips it. These tests use loopback servers that drip their answer (headers or body), accept a
connection and say nothing, or redirect slowly, and check that the download fails in time with
a reason naming the limit — at the guard, through img2dataset, and through a whole build — and
that a retry succeeds once the server is fast.
"""

from __future__ import annotations

import csv
import importlib.util
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from fairsets.fetch.guard import (
    FetchPolicy,
    TooSlow,
    fetch_url,
    guarded_opener,
    metered_handlers,
    too_slow_reason,
    trusted_policy,
)
from fairsets.fetch.retry import RetryPolicy, call_with_retry
from servers import LoopbackServer, Response

needs_img2dataset = pytest.mark.skipif(
    importlib.util.find_spec("img2dataset") is None,
    reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0",
)

DEADLINE = 2.0
MARGIN = 1.5  # scheduling slack on a loaded 2-core machine
# min_rate off: these tests are about the deadline (the rate has its own tests)
DRIP_POLICY = FetchPolicy(allow_loopback=True, timeout=5, deadline=DEADLINE, min_rate=0)
JPG = {"Content-Type": "image/jpeg"}


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections, reads the request and never answers."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = ls.accept()
            except OSError:
                return
            held.append(conn)  # keep it open, say nothing

    threading.Thread(target=run, daemon=True).start()
    yield f"http://127.0.0.1:{ls.getsockname()[1]}/never.jpg"
    stop.set()
    ls.close()
    for conn in held:
        conn.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("drip_headers", [True, False], ids=["headers", "body"])
def test_dripping_server_fails_within_the_deadline(images: Any, drip_headers: bool) -> None:
    images.srv.route(
        "/drip.jpg", lambda req: Response(200, JPG, images.jpeg, drip=0.2, drip_headers=drip_headers)
    )
    # each byte comes well within the per-operation timeout: only the deadline can end it
    t0 = time.monotonic()
    res = fetch_url(images.url("/drip.jpg"), DRIP_POLICY)
    elapsed = time.monotonic() - t0
    assert res.status == "failed", res
    assert res.error.startswith("deadline: ") and f"within {DEADLINE:g} s" in res.error
    assert "127.0.0.1" in res.error and "/drip.jpg" not in res.error  # the host, never the URL
    assert DEADLINE - 0.1 <= elapsed < DEADLINE + MARGIN


@pytest.mark.timeout(20)
def test_server_that_never_sends_headers_fails_at_the_deadline(silent_server: str) -> None:
    t0 = time.monotonic()
    res = fetch_url(silent_server, DRIP_POLICY)
    elapsed = time.monotonic() - t0
    assert (res.status, res.error.split(":")[0]) == ("failed", "deadline"), res
    assert "0 bytes received" in res.error
    assert elapsed < DEADLINE + MARGIN


@pytest.mark.timeout(20)
def test_minimum_rate_ends_a_drip_before_the_deadline(images: Any) -> None:
    images.srv.route("/drip.jpg", lambda req: Response(200, JPG, images.jpeg, drip=0.1, drip_headers=False))
    policy = FetchPolicy(allow_loopback=True, timeout=5, deadline=30, min_rate=1000, rate_grace=1)
    t0 = time.monotonic()
    res = fetch_url(images.url("/drip.jpg"), policy)
    elapsed = time.monotonic() - t0
    assert res.status == "failed" and res.error.startswith("min_rate: "), res
    assert "less than min_rate 1000 bytes/s" in res.error
    assert 0.9 <= elapsed < 1 + MARGIN


@pytest.mark.timeout(20)
def test_fast_downloads_pass_the_rate_and_deadline(images: Any) -> None:
    big = images.jpeg + b"\0" * 500_000
    images.srv.route("/big-ok.jpg", lambda req: Response(200, JPG, big))
    policy = FetchPolicy(allow_loopback=True, timeout=5, deadline=DEADLINE, min_rate=100_000, rate_grace=0.5)
    res = fetch_url(images.url("/big-ok.jpg"), policy)
    assert (res.status, res.data) == ("ok", big)


@pytest.mark.timeout(20)
def test_one_deadline_covers_every_redirect_hop(images: Any) -> None:
    # each hop answers within the per-operation timeout; together they pass the deadline
    images.srv.route("/hop1", lambda req: Response(302, {"Location": "/hop2"}, delay=0.8))
    images.srv.route("/hop2", lambda req: Response(302, {"Location": "/hop3"}, delay=0.8))
    images.srv.route("/hop3", lambda req: Response(200, JPG, images.jpeg, delay=0.8))
    policy = FetchPolicy(allow_loopback=True, timeout=1.5, deadline=2.0, min_rate=0)
    t0 = time.monotonic()
    res = fetch_url(images.url("/hop1"), policy)
    assert res.status == "failed" and res.error.startswith("deadline: "), res
    assert time.monotonic() - t0 < 2.0 + MARGIN
    # with time enough the same chain succeeds
    assert fetch_url(images.url("/hop1"), policy.model_copy(update={"deadline": 10})).status == "ok"


@pytest.mark.timeout(20)
def test_a_reused_request_gets_a_fresh_deadline(images: Any) -> None:
    opener = guarded_opener(FetchPolicy(allow_loopback=True, timeout=2, deadline=1.0, min_rate=0), "ua-test")
    images.srv.route("/half.jpg", lambda req: Response(200, JPG, images.jpeg, delay=0.6))
    req = urllib.request.Request(images.url("/half.jpg"))
    for _ in range(2):  # 1.2 s in all: the second open must not inherit the first one's clock
        with opener.open(req, timeout=2) as r:
            assert r.read() == images.jpeg


@pytest.mark.timeout(20)
def test_installed_opener_raises_too_slow_like_img2dataset_sees_it(images: Any) -> None:
    """img2dataset calls ``urlopen`` and stores ``str(exc)``: it must carry the reason."""
    images.srv.route("/drip.jpg", lambda req: Response(200, JPG, images.jpeg, drip=0.2))
    previous = urllib.request._opener  # type: ignore[attr-defined]
    urllib.request.install_opener(guarded_opener(DRIP_POLICY, "ua-test"))
    try:
        with pytest.raises(TooSlow) as info, urllib.request.urlopen(images.url("/drip.jpg"), timeout=5) as r:
            r.read()
    finally:
        urllib.request.install_opener(previous)
    assert isinstance(info.value, TimeoutError) and info.value.reason == "deadline"
    assert too_slow_reason(str(info.value)) == ("deadline", info.value.detail)
    assert too_slow_reason(f"<urlopen error {info.value}>") == ("deadline", info.value.detail)
    assert too_slow_reason("timed out") is None and too_slow_reason(None) is None
    # re-raised with context as ``type(exc)(f"...: {exc}")`` (one argument), it keeps its reason
    again = type(info.value)(f"cannot reach 127.0.0.1: {info.value}")
    assert (again.reason, again.detail) == ("deadline", info.value.detail)
    assert TooSlow("something else").reason == "deadline"


@pytest.mark.timeout(30)
def test_api_calls_retry_a_drip_a_bounded_number_of_times(images: Any) -> None:
    """API clients wrap a guarded request in ``call_with_retry``: ``TooSlow`` is retried, boundedly."""
    images.srv.route(
        "/api", lambda req: Response(200, {"Content-Type": "application/json"}, b"{}" * 50, drip=0.2)
    )
    opener = guarded_opener(trusted_policy(timeout=5, deadline=1.0), "ua-test")

    def once() -> bytes:
        with opener.open(images.url("/api"), timeout=5) as r:
            return r.read()

    t0 = time.monotonic()
    with pytest.raises(TooSlow):
        call_with_retry(once, RetryPolicy(attempts=2, backoff=0), what="api")
    assert images.hits("/api") == 2
    assert time.monotonic() - t0 < 2 * 1.0 + MARGIN


def test_policy_and_recipe_fields() -> None:
    from fairsets.pipeline.config import DownloadConfig
    from fairsets.pipeline.download import fetch_policy

    default = FetchPolicy()
    assert (default.deadline, default.min_rate, default.rate_grace) == (60, 1024, 20)
    with pytest.raises(ValueError):
        FetchPolicy(deadline=0)
    with pytest.raises(ValueError):
        FetchPolicy(min_rate=-1)
    with pytest.raises(ValueError):
        FetchPolicy(rate_grace=0)

    class _Recipe:
        download = DownloadConfig(deadline=7.5, min_rate=0, rate_grace=3)
        steps: list = []  # noqa: RUF012

    policy = fetch_policy(_Recipe())
    assert (policy.deadline, policy.min_rate, policy.rate_grace) == (7.5, 0, 3)
    trusted = trusted_policy(deadline=5)
    assert trusted.allow_loopback and trusted.allow_private and trusted.deadline == 5


@needs_img2dataset
@pytest.mark.timeout(60)
def test_download_urls_fails_a_drip_in_time_and_retries_it_when_fast(images: Any, tmp_path: Path) -> None:
    from fairsets.fetch.download import download_urls, read_image

    fast = {"on": False}
    images.srv.route(
        "/drip.jpg",
        lambda req: Response(200, JPG, images.jpeg, drip=0.0 if fast["on"] else 0.2, drip_headers=False),
    )
    rows = [{"key": "drip", "url": images.url("/drip.jpg")}, {"key": "ok", "url": images.url("/ok.jpg")}]
    t0 = time.monotonic()
    first = {r["key"]: r for r in download_urls(rows, tmp_path, DRIP_POLICY, processes=0, threads=2)}
    assert time.monotonic() - t0 < DEADLINE + 10  # img2dataset's own start-up included
    assert first["ok"]["status"] == "ok"
    assert first["drip"]["status"] == "failed"
    assert first["drip"]["error"].startswith("deadline: no complete answer from 127.0.0.1"), first["drip"]

    fast["on"] = True
    again = {r["key"]: r for r in download_urls(rows, tmp_path, DRIP_POLICY, processes=0, retry_failed=True)}
    assert again["drip"]["status"] == "ok" and again["drip"]["round"] == 1
    assert read_image(tmp_path, again["drip"]) == images.jpeg
    assert images.hits("/drip.jpg") == 2 and images.hits("/ok.jpg") == 1


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
timeout = 5
deadline = {deadline}
min_rate = 0

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


@needs_img2dataset
@pytest.mark.timeout(120)
def test_build_fails_a_dripping_url_and_retry_failed_publishes_it(tmp_path: Path) -> None:
    from fairsets.pipeline.build import build
    from fairsets.pipeline.config import load_recipe
    from helpers import jpeg, portraits

    astronaut, hopper = (jpeg(p) for p in portraits())
    drip = {"seconds": 0.2}
    with LoopbackServer() as srv:
        srv.route("/a.jpg", lambda req: Response(200, JPG, astronaut))
        srv.route("/drip.jpg", lambda req: Response(200, JPG, hopper, drip=drip["seconds"]))
        listing = tmp_path / "urls.csv"
        with listing.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["url", "state", "gender", "license", "author"])
            w.writerow([srv.url("/a.jpg"), "Goa", "female", "CC-BY-4.0", "A. Author"])
            w.writerow([srv.url("/drip.jpg"), "Goa", "male", "CC0-1.0", "B. Author"])
        recipe_path = tmp_path / "r.toml"
        recipe_path.write_text(RECIPE.format(listing=listing.as_posix(), deadline=DEADLINE))
        recipe = load_recipe(recipe_path)
        assert recipe.download.deadline == DEADLINE
        out = tmp_path / "out"

        build(recipe, out)
        rejects = pq.read_table(out / "rejects.parquet").to_pylist()
        rej = {r["url"].rsplit("/", 1)[-1]: r for r in rejects}
        assert (rej["drip.jpg"]["status"], rej["drip.jpg"]["step"]) == ("failed", "download")
        assert "deadline" in rej["drip.jpg"]["reason"] and f"{DEADLINE:g} s" in rej["drip.jpg"]["reason"]

        drip["seconds"] = 0.0
        build(recipe, out, retry_failed=True)
        assert srv.hits("/drip.jpg") == 2
    published = [
        r
        for f in sorted((out / "metadata" / "imbalanced").glob("*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]
    assert sorted(r["url"].rsplit("/", 1)[-1] for r in published) == ["a.jpg", "drip.jpg"]


# --- the other HTTP clients: none may hang on a server that drips or never answers ---


def _drip_json(srv: LoopbackServer, path: str) -> None:
    body = b'{"pad": "' + b"x" * 400 + b'"}'
    srv.route(path, lambda req: Response(200, {"Content-Type": "application/json"}, body, drip=0.1))


@pytest.mark.timeout(20)
def test_call_with_deadline() -> None:
    from fairsets.fetch.retry import call_with_deadline

    assert call_with_deadline(lambda: 42, 1.0) == 42
    with pytest.raises(KeyError, match="boom"):
        call_with_deadline(lambda: {}["boom"], 1.0)
    t0 = time.monotonic()
    with pytest.raises(TooSlow, match=r"too slow \(deadline\): svc: no complete answer within 0.3 s"):
        call_with_deadline(lambda: time.sleep(5), 0.3, what="svc")
    assert time.monotonic() - t0 < 0.3 + MARGIN
    with pytest.raises(ValueError, match="deadline must be > 0"):
        call_with_deadline(lambda: 1, 0)


@pytest.mark.timeout(20)
def test_metered_handlers_bound_an_api_opener(images: Any, silent_server: str) -> None:
    _drip_json(images.srv, "/api")
    opener = urllib.request.build_opener(*metered_handlers(trusted_policy(timeout=5, deadline=1.0)))
    for url in (images.url("/api"), silent_server):
        t0 = time.monotonic()
        with pytest.raises(TooSlow, match=r"too slow \(deadline\)"), opener.open(url, timeout=5) as r:
            r.read()
        assert time.monotonic() - t0 < 1.0 + MARGIN
    images.srv.route("/fast", lambda req: Response(200, {"Content-Type": "application/json"}, b"{}"))
    with opener.open(images.url("/fast"), timeout=5) as r:
        assert r.read() == b"{}"


@pytest.mark.timeout(30)
def test_world_bank_fetch_ends_a_drip(tmp_path: Path) -> None:
    from fairsets.geo.reference import WORLD_BANK_INDICATORS, fetch_worldbank

    pytest.importorskip("pandas")  # imported by fetch_worldbank: not part of the time measured
    with LoopbackServer() as srv:
        _drip_json(srv, f"/v2/country/all/indicator/{WORLD_BANK_INDICATORS[0]}")
        t0 = time.monotonic()
        with pytest.raises(TooSlow, match=r"too slow \(deadline\)"):  # deadline: 3 timeouts
            fetch_worldbank(
                2022, base_url=srv.url("/v2"), cache=False, timeout=0.4, policy=RetryPolicy(attempts=1)
            )
        assert time.monotonic() - t0 < 1.2 + MARGIN


@pytest.mark.timeout(30)
def test_llm_client_ends_a_drip() -> None:
    from fairsets.geo.methods import get_method
    from fairsets.geo.methods.llm import LLMServiceError

    with LoopbackServer() as srv:
        _drip_json(srv, "/v1/chat/completions")
        method = get_method(
            "llm", base_url=srv.url("/v1"), model="m", timeout=0.5, max_retries=0, cache_dir=None
        )
        t0 = time.monotonic()
        with pytest.raises(LLMServiceError, match=r"too slow \(deadline\)"):  # deadline: 2 timeouts
            method.predict(["a caption"])
        assert time.monotonic() - t0 < 1.0 + MARGIN


@pytest.mark.timeout(30)
def test_commons_api_call_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("requests")  # imported by the client: not part of the time measured
    from fairsets.sources.commons import api as commons_api

    class StuckSession:
        calls = 0

        def post(self, *args: Any, **kwargs: Any) -> Any:
            StuckSession.calls += 1
            time.sleep(5)  # a drip: the client's per-read timeout never fires

    monkeypatch.setattr(commons_api, "DEADLINE", 0.3)
    t0 = time.monotonic()
    with pytest.raises(TooSlow, match=r"MediaWiki API 127\.0\.0\.1:9: no complete answer within 0.3 s"):
        commons_api._post(
            StuckSession(),
            "http://127.0.0.1:9/w/api.php",
            {},
            {},
            RetryPolicy(attempts=2, backoff=0),
            time.sleep,
        )
    assert StuckSession.calls == 2  # retried, a bounded number of times
    assert time.monotonic() - t0 < 0.6 + MARGIN


@pytest.mark.timeout(30)
def test_serpapi_request_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("serpapi")
    pytest.importorskip("requests")
    from fairsets.sources import serpapi

    monkeypatch.setattr(serpapi, "DEADLINE", 0.5)
    with LoopbackServer() as srv:
        _drip_json(srv, "/search")
        t0 = time.monotonic()
        with pytest.raises(serpapi.SerpApiError, match=r"too slow \(deadline\)") as info:
            serpapi.search_images(
                "Goa man face",
                api_key="k3y-s3cret",
                backend=srv.url(""),
                policy=RetryPolicy(attempts=2, backoff=0),
            )
        assert "k3y-s3cret" not in str(info.value)
        assert srv.hits("/search") == 2 and time.monotonic() - t0 < 1.0 + MARGIN


@pytest.mark.timeout(30)
def test_wikidata_query_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("SPARQLWrapper")
    from fairsets.sources.wikidata import service

    monkeypatch.setattr(service, "DEADLINE_MARGIN", 0.0)
    with LoopbackServer() as srv:
        _drip_json(srv, "/sparql")
        t0 = time.monotonic()
        with pytest.raises(TooSlow, match=r"query service 127\.0\.0\.1:\d+: no complete answer within 1 s"):
            service._request(srv.url("/sparql"), "SELECT * WHERE {}", "ua-test", timeout=0.5)
        assert time.monotonic() - t0 < 1.0 + MARGIN


@pytest.mark.timeout(30)
def test_wikidata_paging_ends_when_the_endpoint_ignores_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint that answers every offset with the same full page would be asked forever."""
    import json

    from fairsets.sources import wikidata
    from fairsets.sources.wikidata import people

    page = {
        "head": {"vars": ["person", "image"]},
        "results": {
            "bindings": [
                {
                    "person": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"},
                    "image": {
                        "type": "uri",
                        "value": "http://commons.wikimedia.org/wiki/Special:FilePath/A.jpg",
                    },
                }
            ]
        },
    }
    calls: list[str] = []

    def same_page(endpoint: str, query: str, agent: str, timeout: float) -> bytes:
        calls.append(query)
        return json.dumps(page).encode()

    monkeypatch.setattr(people, "_request", same_page)
    state = wikidata.State("Q1159", "Goa")
    with pytest.raises(wikidata.SparqlResponseError, match="ignores OFFSET"):
        wikidata.fetch_people([state], ["male"], endpoint="http://127.0.0.1:9/sparql", page_size=1)
    assert len(calls) == 2
