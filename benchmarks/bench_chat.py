"""Throughput of the shared chat client, what its disk cache saves, and the geo ``llm`` method on it.

A loopback OpenAI-compatible server (``tests/openai_server.py``) answers every request after a
fixed delay ``d``. It runs in a process of its own, as a real server does: in this one it would
share the client's interpreter lock, and its own request handling would count as the client's.
With concurrency ``c`` the client should reach ``c / d`` requests per second: printed is the ratio
requests/s ÷ (c / d), target at least 0.9 at each concurrency (default 8 and 16; the default 320
requests are whole waves of both). A re-run answered from the disk cache should be at least 50
times faster than the live run. The last lines run the geo ``llm`` method
(:mod:`fairsets.geo.methods.llm`), which asks through the same client, on distinct captions:
captions/s ÷ (c / d), and its cached re-run::

    python benchmarks/bench_chat.py --concurrency 8,16 --delay 0.2 --requests 320
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
try:
    import fairsets  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))


def _serve(delay: float) -> None:
    """The server process: print the base URL, answer ``Output: No`` after ``delay`` s until stdin closes."""
    from openai_server import OpenAIServer, Step

    with OpenAIServer() as srv:
        # the test server's listen backlog (5) resets connections when many arrive at once
        srv._srv.httpd.socket.listen(256)
        srv.default = Step(text="Output: No", delay=delay)
        print(srv.base_url, flush=True)
        sys.stdin.read()


@contextmanager
def _server(delay: float) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()


def _chat(base_url: str, c: int, d: float, n: int) -> tuple[float, float]:
    """The client alone: (live ratio to c/d, cache speedup)."""
    from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatRequest, user

    requests = [ChatRequest([user(f"question {i} at c={c}")]) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        ep = ChatEndpoint(base_url=base_url, model="bench", api_key_env="", max_concurrency=c)
        live = ChatClient(ep, cache_dir=Path(tmp) / "cache").run(requests)
        cached = ChatClient(ep, cache_dir=Path(tmp) / "cache").run(requests)
        assert live.failed == 0 and live.requests_sent == n and cached.requests_sent == 0
    rate = n / live.seconds
    speedup = live.seconds / max(cached.seconds, 1e-9)
    print(
        f"chat  c={c:<3d} live {live.seconds:6.2f}s {rate:7.1f} req/s  ideal {c / d:7.1f}  "
        f"ratio {rate / (c / d):.3f} (>= 0.9)  cached re-run {cached.seconds:.3f}s  "
        f"speedup {speedup:.0f}x (>= 50)"
    )
    return rate / (c / d), speedup


def _geo(base_url: str, c: int, d: float, n: int) -> tuple[float, float]:
    """The geo llm method on the client: (live captions/s ratio to c/d, cache speedup)."""
    from fairsets.geo.methods.llm import LLMMethod

    captions = [f"A street corner in town number {i}" for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:

        def method() -> LLMMethod:
            return LLMMethod(
                base_url=base_url, model="bench", concurrency=c, cache_dir=Path(tmp), progress=False
            )

        t0 = time.perf_counter()
        codes, errors = method().predict_with_errors(captions)
        live = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = method()
        assert again.predict(captions) == codes
        cached = time.perf_counter() - t0
        assert errors == [None] * n and again.provenance()["counts"]["requests"] == 0
    rate = n / live
    speedup = live / max(cached, 1e-9)
    print(
        f"geo   c={c:<3d} live {live:6.2f}s {rate:7.1f} captions/s  ideal {c / d:7.1f}  "
        f"ratio {rate / (c / d):.3f} (>= 0.9)  cached re-run {cached:.3f}s  speedup {speedup:.0f}x"
    )
    return rate / (c / d), speedup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="8,16", help="comma-separated concurrencies")
    ap.add_argument("--delay", type=float, default=0.2, help="server seconds per answer")
    ap.add_argument("--requests", type=int, default=320, help="requests (and captions) per run")
    ap.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)  # the server process
    args = ap.parse_args(argv)
    if args.serve is not None:
        _serve(args.serve)
        return 0
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    d, n = args.delay, args.requests
    print(f"requests={n} delay={d:g}s concurrency={','.join(map(str, levels))}")
    ok = True
    with _server(d) as base_url:
        for c in levels:
            ratio, speedup = _chat(base_url, c, d, n)
            ok = ok and ratio >= 0.9 and speedup >= 50
        for c in levels:
            ratio, _ = _geo(base_url, c, d, n)
            ok = ok and ratio >= 0.9
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
