"""Per-host politeness (fetch/guard/hosts.py): a loopback image server reached under several host
names counts, per ``Host`` header, the requests open at once and when each arrived; downloads
never exceed the configured connections or rate per host, and a host that answered 429 with
``Retry-After`` gets nothing before the time it asked for, its rows ending ok."""

from __future__ import annotations

import importlib.util
import itertools
import json
import socket
import threading
import time
from collections import defaultdict

import pytest

from servers import LoopbackServer, Request, Response

if importlib.util.find_spec("img2dataset") is None:
    pytest.skip("img2dataset is not installed (docs/install.md)", allow_module_level=True)

from fairsets.fetch.download import download_urls
from fairsets.fetch.guard import FetchPolicy, fetch_url
from fairsets.fetch.guard import addresses as guard_addresses
from fairsets.fetch.guard.hosts import HostPacer
from fetch.conftest import jpeg_bytes

RATE = 4  # requests per second per host
CONN = 2  # connections per host
JITTER = 0.1  # seconds: how far a request's arrival at the server may drift from its start (2 busy cores)
HOLD = 0.6  # seconds each answer is held open: unlimited, 3 would overlap at RATE


class CountingServer:
    """Counts, per Host header, the requests in progress (max seen) and every arrival time."""

    def __init__(self, srv: LoopbackServer, throttle: dict[str, float]) -> None:
        self.srv = srv
        self.jpeg = jpeg_bytes()
        self.lock = threading.Lock()
        self.open: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)
        self.arrivals: dict[str, list[float]] = defaultdict(list)
        self.throttle = dict(throttle)  # host -> Retry-After of its first answer (a 429)
        self.throttled_at: dict[str, float] = {}
        srv.fallback = self.handle

    def handle(self, req: Request) -> Response:
        host = req.headers["Host"].split(":")[0]
        now = time.monotonic()
        with self.lock:
            self.arrivals[host].append(now)
            self.open[host] += 1
            self.peak[host] = max(self.peak[host], self.open[host])
            wait = self.throttle.pop(host, None)
        time.sleep(HOLD)
        with self.lock:
            self.open[host] -= 1
            if wait is not None:  # the time of the 429 answer: Retry-After counts from it
                self.throttled_at[host] = time.monotonic()
        if wait is not None:
            return Response(429, {"Retry-After": f"{wait:g}", "Content-Type": "text/plain"}, b"slow down")
        return Response(200, {"Content-Type": "image/jpeg"}, self.jpeg)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.srv.port}{path}"


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host names ``*.test`` resolve to 127.0.0.1 through the guard's own resolver hook."""
    real = guard_addresses._getaddrinfo

    def fake(host: str, port: int, *args: object) -> list:
        if host.endswith(".test"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args)

    monkeypatch.setattr(guard_addresses, "_getaddrinfo", fake)


def _max_in_window(times: list[float], window: float) -> int:
    """The most arrivals in any half-open window ``[t, t + window)`` starting at an arrival."""
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


def test_rate_connections_and_retry_after_per_host(tmp_path, names, no_egress) -> None:
    hosts = ["a.test", "b.test", "c.test"]
    with LoopbackServer() as srv:
        server = CountingServer(srv, throttle={"c.test": 2})
        rows = [
            {"key": f"{h[0]}{i}", "url": server.url(h, f"/{h[0]}{i}.jpg")} for h in hosts for i in range(8)
        ]
        policy = FetchPolicy(
            allow_loopback=True, timeout=5, per_host_rate=RATE, per_host_connections=CONN, retry_after_max=10
        )
        started = time.monotonic()
        out = download_urls(rows, tmp_path / "dl", policy, processes=0, threads=16, shard_size=100)
        took = time.monotonic() - started

    assert [r["status"] for r in out] == ["ok"] * len(rows)  # the 429'd row was sent again, not failed
    for h in hosts:
        times = sorted(server.arrivals[h])
        assert server.peak[h] <= CONN, (h, server.peak[h])
        # never more than RATE starts in a second (JITTER of it allowed for arrival drift) ...
        assert _max_in_window(times, 1 - JITTER) <= RATE, (h, times)
        # ... which is the spacing: the (i + RATE)-th arrival at least a second after the i-th
        assert all(b - a >= 1 - JITTER for a, b in zip(times, times[RATE:], strict=False)), (h, times)
    # the three hosts were paced side by side, not one after the other (8 rows each at 4/s: ~2 s)
    assert server.peak["a.test"] == CONN and took < 8
    # c.test answered its first request 429 with Retry-After: 2: nothing reached it in the 2 s after
    # that answer (requests sent before it, while it was held, were on their way already)
    c = sorted(server.arrivals["c.test"])
    answered = server.throttled_at["c.test"]
    assert len(c) == 9  # 8 rows, one of them sent twice
    assert not [t for t in c if answered < t < answered + 2 - JITTER], (answered, c)
    assert max(c) > answered + 2 - JITTER  # and the rows after it were sent then

    record = json.loads((tmp_path / "dl" / "hosts.json").read_text())
    assert record["limits"]["per_host_rate"] == RATE and record["limits"]["per_host_connections"] == CONN
    for h in hosts:  # the totals match what the server counted
        assert record["hosts"][h]["requests"] == len(server.arrivals[h])
        assert record["hosts"][h]["throttled"] == (1 if h == "c.test" else 0)
    assert record["hosts"]["c.test"]["waited_s"] >= 2 - JITTER


def test_pause_longer_than_allowed_fails_rows_without_sending(tmp_path, names, no_egress) -> None:
    with LoopbackServer() as srv:
        server = CountingServer(srv, throttle={"slow.test": 3600})
        rows = [{"key": f"s{i}", "url": server.url("slow.test", f"/s{i}.jpg")} for i in range(4)]
        policy = FetchPolicy(allow_loopback=True, timeout=5, per_host_connections=1, retry_after_max=30)
        out = download_urls(rows, tmp_path / "dl", policy, processes=0, threads=4)
    assert len(server.arrivals["slow.test"]) == 1  # the 429; then nothing within its hour
    assert [r["status"] for r in out] == ["failed"] * 4
    errors = sorted(r["error"].split(":")[0] for r in out)
    assert errors == ["http_429"] + ["retry_after"] * 3
    record = json.loads((tmp_path / "dl" / "hosts.json").read_text())["hosts"]["slow.test"]
    assert record == record | {"requests": 1, "throttled": 1, "gave_up": 3}


def test_fetch_url_shares_the_process_pacer(names, no_egress) -> None:
    """fetch_url (any downloader that is not img2dataset) waits its host's turn too."""
    with LoopbackServer() as srv:
        server = CountingServer(srv, throttle={})
        policy = FetchPolicy(allow_loopback=True, timeout=5, per_host_rate=2.5, per_host_connections=1)
        got = []
        threads = [
            threading.Thread(target=lambda i=i: got.append(fetch_url(server.url("f.test", f"/{i}"), policy)))
            for i in range(5)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r.status for r in got] == ["ok"] * 5
    times = sorted(server.arrivals["f.test"])
    assert server.peak["f.test"] == 1
    assert all(b - a >= 0.4 - JITTER for a, b in itertools.pairwise(times)), times


def test_pause_is_shared_through_the_pause_folder(tmp_path) -> None:
    """Two pacers (two worker processes) sharing a folder: a pause set by one holds in the other."""
    one = HostPacer(10, 1, 60, pause_dir=str(tmp_path))
    two = HostPacer(10, 1, 60, pause_dir=str(tmp_path))
    one.pause("x.test", 0.6)
    t0 = time.monotonic()
    waited, release = two.acquire("x.test")
    release()
    assert time.monotonic() - t0 >= 0.6 - JITTER and waited >= 0.6 - JITTER
    assert two.totals()["x.test"]["requests"] == 1


def test_cli_limits_hold_across_worker_processes(tmp_path, no_egress, capsys) -> None:
    """``fairsets download --processes 2 --per-host-rate 3 --per-host-connections 2``: the two
    spawned workers share the limits (each gets half), so the server sees them whole at most. The
    host names are ``127.0.0.1`` and ``localhost``, which the workers resolve without any patch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cli_helpers import run_cli

    rate, n = 3, 8
    with LoopbackServer() as srv:
        server = CountingServer(srv, throttle={})
        urls = [server.url(h, f"/{h[0]}{i}.jpg") for h in ("127.0.0.1", "localhost") for i in range(n)]
        listing = tmp_path / "l.parquet"
        pq.write_table(pa.table({"url": urls, "caption": ["c"] * len(urls)}), listing)
        out = tmp_path / "shards"
        args = [
            "download",
            listing,
            "--out",
            out,
            "--allow-loopback",
            "--processes",
            "2",
            "--shard-size",
            "4",
        ]
        code, text, err = run_cli(
            [*args, "--per-host-rate", str(rate), "--per-host-connections", "2"], capsys
        )
    assert code == 0, err
    assert text.startswith(f"{2 * n} rows: {2 * n} ok, 0 rejected, 0 failed -> ")  # no host asked to wait
    for h in ("127.0.0.1", "localhost"):
        times = sorted(server.arrivals[h])
        assert len(times) == n and server.peak[h] <= 2, (h, server.peak[h])
        assert _max_in_window(times, 1 - JITTER) <= rate, (h, times)
    record = json.loads((out / ".fairsets" / "hosts.json").read_text())
    assert {h: t["requests"] for h, t in record["hosts"].items()} == {"127.0.0.1": n, "localhost": n}


def test_cli_names_the_host_that_asked_to_slow_down(tmp_path, names, no_egress, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cli_helpers import run_cli

    with LoopbackServer() as srv:
        server = CountingServer(srv, throttle={"t.test": 1})
        urls = [server.url("t.test", f"/t{i}.jpg") for i in range(3)]
        listing = tmp_path / "l.parquet"
        pq.write_table(pa.table({"url": urls, "caption": ["c"] * 3}), listing)
        args = ["download", listing, "--out", tmp_path / "s", "--allow-loopback", "--processes", "0"]
        code, text, err = run_cli([*args, "--per-host-connections", "1"], capsys)
    assert code == 0, err
    assert text.startswith(
        "3 rows: 3 ok, 0 rejected, 0 failed; hosts that asked to slow down: t.test 1 times in 4 "
    )


def test_loopback_names_are_paced_only_when_asked() -> None:
    """The default limits pace remote hosts; this machine (``localhost``, ``*.localhost``, loopback
    IPs) is paced only with ``pace_loopback`` (a command sets it when the limits are given). A
    pause (Retry-After) holds for every host."""
    import time

    from fairsets.fetch.guard.hosts import HostPacer, is_loopback_name

    assert all(map(is_loopback_name, ["localhost", "a.localhost", "127.0.0.1", "127.9.9.9", "[::1]"]))
    assert not any(map(is_loopback_name, ["a.test", "example.org", "10.0.0.1", "localhost.example"]))

    def second_wait(pacer: HostPacer, host: str) -> float:
        _, release = pacer.acquire(host)
        release()
        waited, release = pacer.acquire(host)
        release()
        return waited

    free = HostPacer(rate=2, connections=1, retry_after_max=10)
    assert second_wait(free, "127.0.0.1") < 0.1 and second_wait(free, "localhost") < 0.1
    assert second_wait(free, "a.test") >= 0.4  # 2 requests/s: the second start waits ~0.5 s
    paced = HostPacer(rate=2, connections=1, retry_after_max=10, pace_loopback=True)
    assert second_wait(paced, "127.0.0.1") >= 0.4
    free.pause("localhost", 0.5)
    start = time.monotonic()
    _, release = free.acquire("localhost")
    release()
    assert time.monotonic() - start >= 0.45  # Retry-After is honoured for loopback too
