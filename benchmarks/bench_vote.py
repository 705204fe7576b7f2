"""Throughput of ``annotate vote``: the annotators must be the bottleneck, not rendering the views.

Folder: ``tests/annotate/ann_data.make_ann`` (``--shards`` × ``--images`` images of ``--size``
pixels, ``--boxes`` kept boxes each), its images then re-encoded as ``--format`` (JPEG by default,
as in LAION shards) with light noise over every pixel: ``make_ann`` paints boxes in flat colours,
and identical views would be asked once and then answered from the chat cache. The images tables
then get each image's SHA-256, as ``annotate persons`` writes them.

Annotators: ``--annotators`` loopback OpenAI-compatible servers (``tests/openai_server.py``, in a
child process so that answering costs the measured process nothing) that answer every question
after a fixed delay ``d`` with the letter of one option read from the prompt. Each allows ``c``
requests in flight (``max_concurrency``), so it answers at most ``c / d`` requests per second;
every annotator is shown the same views, so the vote needs ``c / d`` views rendered per second.

Printed, in one run:

1. rendering alone: :func:`fairsets.annotate.chat.items.views` over the sample with the vote's view
   settings, in this thread: views per second and that ÷ ``c / d`` (below 1: rendering, not the
   annotators, sets the pace on this machine);
2. the live vote (:func:`fairsets.annotate.vote.run.vote_boxes`): per annotator, its requests per
   second from the start of the call to its last answer ÷ ``c / d`` (goal ≥ 0.9 up to c = 64,
   ≥ 0.8 above: the fixed start of a vote weighs more on a run of few waves), the steady rate
   (first to last request), when the first request came, the most requests in flight and the
   longest pauses between two requests (a batch boundary shows as one); and the process's CPU
   seconds against the wall;
3. the re-run with every answer in the disk cache: seconds, the speed-up over (2) (goal ≥ 50×) and
   the views it rendered (none: each answer is found by the digest of the view the live vote
   recorded in the view index, and the report's examples were kept);
4. with ``--profile``, where the live vote's CPU time goes: cProfile timed by each thread's CPU
   clock in every thread of this process (the vote's own, its prefetching renderer and the chat
   clients' workers), merged, by own time (waiting for an answer costs nothing there; the pauses
   of (2) show the waits).

    python benchmarks/bench_vote.py --annotators 3 --concurrency 8 --delay 0.05 --sample 400
    # issue 29's settings: d = 2 s, 3 annotators, 5 waves of c
    python benchmarks/bench_vote.py --concurrency 64 --delay 2 --sample 640 --images 100
    python benchmarks/bench_vote.py --concurrency 256 --delay 2 --sample 1280 --images 200
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import itertools
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "annotate"), str(ROOT / "tests")]
try:
    import fairsets  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

_OPTION_LINE = re.compile(r"^([A-Z])\. (.+)$", re.M)
_IMAGE_EXT = (".png", ".jpg")


def _write_shard() -> Any:
    """``write_shard`` of tests/annotate/conftest.py (loaded by path: ``conftest`` is not importable)."""
    path = ROOT / "tests" / "annotate" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_annotate_conftest", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.write_shard


def store_sha256(ann: Path, shards: list[Path]) -> None:
    """Write each image's SHA-256 (of its bytes in the shard) into ``images/{shard}.parquet``."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.annotate import layout

    for path in shards:
        with tarfile.open(path) as tf:
            digests = {
                m.name.rsplit(".", 1)[0]: hashlib.sha256(tf.extractfile(m).read()).hexdigest()  # type: ignore[union-attr]
                for m in tf.getmembers()
                if m.name.endswith(_IMAGE_EXT)
            }
        table_path = layout.images_path(ann, path.stem)
        table = pq.read_table(table_path)
        column = pa.array([digests[k] for k in table["key"].to_pylist()])
        pq.write_table(table.set_column(table.schema.get_field_index("sha256"), "sha256", column), table_path)


def retexture(shards: list[Path], fmt: str, seed: int = 0) -> None:
    """Rewrite each tar: every image with ±12 noise on every pixel, encoded as ``fmt`` (jpg or png)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for path in shards:
        with tarfile.open(path) as tf:
            members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]  # type: ignore[union-attr]
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as out:
            for info, data in members:
                stem, ext = info.name.rsplit(".", 1)
                if f".{ext}" in _IMAGE_EXT:
                    px = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)
                    px = np.clip(px + rng.integers(-12, 13, px.shape), 0, 255).astype(np.uint8)
                    buf = io.BytesIO()
                    Image.fromarray(px).save(buf, format="JPEG" if fmt == "jpg" else "PNG", quality=90)
                    data, info = buf.getvalue(), tarfile.TarInfo(f"{stem}.{fmt}")
                    info.mtime, info.mode = 1_700_000_000, 0o644
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))


class ThreadProfiles:
    """cProfile (each thread's CPU clock) in this thread and every thread started while active."""

    def __init__(self) -> None:
        self.profiles: list[Any] = []
        self._run = threading.Thread.run

    def __enter__(self) -> ThreadProfiles:
        import cProfile

        original, profiles = self._run, self.profiles

        def run(thread: threading.Thread) -> None:
            prof = cProfile.Profile(time.thread_time)
            profiles.append(prof)
            prof.enable()
            try:
                original(thread)
            finally:
                prof.disable()

        threading.Thread.run = run  # type: ignore[method-assign]
        main = cProfile.Profile(time.thread_time)
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.profiles[0].disable()
        threading.Thread.run = self._run  # type: ignore[method-assign]

    def report(self, top: int = 25) -> str:
        import pstats

        buf = io.StringIO()
        stats = pstats.Stats(self.profiles[0], stream=buf)
        for prof in self.profiles[1:]:
            stats.add(prof)
        stats.strip_dirs().sort_stats("tottime").print_stats(top)
        return buf.getvalue()


def serve(k: int, delay: float) -> None:
    """The annotators' process (``--serve``): ``k`` servers; prints their URLs as one JSON line, then
    for each line read prints ``[[hits, arrival times, max in flight], …]``; stops at end of input."""
    from fairsets.annotate.vote.prompts import OPTIONS
    from openai_server import OpenAIServer, Step, last_user_text

    wanted = dict(OPTIONS["gender"][1])["female"]

    def respond(body: dict[str, Any]) -> Step:
        letters = {text: letter for letter, text in _OPTION_LINE.findall(last_user_text(body))}
        return Step(text=letters.get(wanted, "A"), delay=delay)

    servers = [OpenAIServer() for _ in range(k)]
    for srv in servers:
        srv.respond = respond
        srv.start()
    try:
        print(json.dumps([srv.base_url for srv in servers]), flush=True)
        for _ in sys.stdin:
            print(json.dumps([[srv.hits, srv.times, srv.max_in_flight] for srv in servers]), flush=True)
    finally:
        for srv in servers:
            srv.stop()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; None elsewhere)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Servers:
    """:func:`serve` in a child process, so that answering costs the measured process nothing."""

    def __init__(self, k: int, delay: float) -> None:
        cmd = [sys.executable, __file__, "--serve", str(k), "--delay", str(delay)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.urls: list[str] = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]

    def seen(self) -> list[tuple[int, list[float], int]]:
        self.proc.stdin.write("\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return [tuple(x) for x in json.loads(self.proc.stdout.readline())]  # type: ignore[union-attr,misc]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--annotators", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8, help="max_concurrency of each annotator")
    ap.add_argument("--delay", type=float, default=0.05, help="server seconds per answer")
    ap.add_argument("--sample", type=int, default=400, help="boxes voted on")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--images", type=int, default=60, help="images per shard")
    ap.add_argument("--boxes", type=int, default=2, help="kept boxes per image")
    ap.add_argument("--size", default="640x480", help="image width x height")
    ap.add_argument("--format", default="jpg", choices=["jpg", "png"], help="how the shards hold images")
    ap.add_argument("--view", default="crop", choices=["crop", "redbox"])
    ap.add_argument("--profile", action="store_true", help="print where the live vote's time goes")
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)  # the annotators' process
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.delay)
        return 0

    from ann_data import make_ann

    from fairsets.annotate.chat.items import kept_boxes, sample, views
    from fairsets.annotate.chat.requests import CAPTION_VIEW, VOTE_VIEW
    from fairsets.annotate.vote.run import vote_boxes

    c, d, n, k = args.concurrency, args.delay, args.sample, args.annotators
    ideal = c / d
    goal = 0.9 if c <= 64 else 0.8
    w, h = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        ann = make_ann(
            root, _write_shard(), shards=args.shards, images_per_shard=args.images,
            boxes_per_image=args.boxes, size=(w, h),
        )  # fmt: skip
        retexture(sorted(ann.shards_dir.glob("*.tar")), args.format)
        store_sha256(ann.path, sorted(ann.shards_dir.glob("*.tar")))
        boxes = len(ann.truth)
        print(
            f"folder: {args.shards} shards x {args.images} {args.format} images of {w}x{h}, "
            f"{boxes} kept boxes (written in {time.perf_counter() - t:.1f}s)"
        )
        if n > boxes:
            raise SystemExit(f"--sample {n} > {boxes} kept boxes: raise --images or --shards")
        print(
            f"annotators={k} concurrency={c} delay={d:g}s sample={n} view={args.view}: "
            f"ideal {ideal:.1f} req/s per annotator"
        )

        view_kwargs = VOTE_VIEW if args.view == "crop" else CAPTION_VIEW
        t = time.perf_counter()
        chosen = sample(kept_boxes(ann.path), n, 0)
        got = [jpeg for _, jpeg, _ in views(ann.path, chosen, **view_kwargs)]
        render_s = time.perf_counter() - t
        assert all(got)
        print(
            f"1. rendering alone: {n / render_s:.1f} views/s, ÷ (c/d) = {n / render_s / ideal:.2f} "
            f"(mean view {sum(map(len, got)) / n / 1000:.1f} kB)"
        )

        servers = Servers(k, d)
        try:
            toml = root / "annotators.toml"
            toml.write_text(
                "".join(
                    f'[annotators.a{i}]\nbase_url = "{url}"\nmodel = "bench-{i}"\n'
                    f'api_key_env = ""\nmax_concurrency = {c}\ntimeout = 30\n\n'
                    for i, url in enumerate(servers.urls)
                )
            )

            def vote(out: str) -> Any:
                return vote_boxes(
                    ann.path, attribute="gender", annotators=toml, sample=n, out=root / out, seed=0,
                    view=args.view,
                )  # fmt: skip

            profiles = ThreadProfiles() if args.profile else None
            serve0 = cpu_seconds(servers.proc.pid)
            cpu0, t0 = time.process_time(), time.monotonic()
            if profiles:
                with profiles:
                    live = vote("live.csv")
            else:
                live = vote("live.csv")
            live_s, live_cpu = time.monotonic() - t0, time.process_time() - cpu0
            serve1 = cpu_seconds(servers.proc.pid)
            serve_cpu = serve1 - serve0 if serve0 is not None and serve1 is not None else None
            seen = servers.seen()
            rates = []
            for hits, times, peak in seen:
                assert hits == n, f"{hits} requests, expected {n}"
                end = max(times) + d - t0
                steady = (n - 1) / max(max(times) - min(times), 1e-9)
                times = sorted(times)
                gaps = sorted(((b - a, a - t0) for a, b in itertools.pairwise(times)), reverse=True)
                rates.append((n / end, steady, peak, times[0] - t0, gaps[:4]))
            import fairsets.annotate.chat.views as views_mod

            real_render, rerendered = views_mod.render, []

            def counted_render(*a: Any, **kw: Any) -> bytes:
                rerendered.append(1)
                return real_render(*a, **kw)

            views_mod.render = counted_render  # type: ignore[assignment]
            try:
                t1 = time.monotonic()
                cached = vote("cached.csv")
                cached_s = time.monotonic() - t1
            finally:
                views_mod.render = real_render  # type: ignore[assignment]
            assert [hits for hits, _, _ in servers.seen()] == [n] * k, "the cached re-run sent requests"
            assert cached.requests_sent == 0 and cached.cache_hits == n * k
        finally:
            servers.close()

    print(
        f"2. live vote: {live_s:.2f}s wall, {live_cpu:.2f}s CPU; requests_sent {live.requests_sent}, "
        f"cache_hits {live.cache_hits}, kept {live.kept}"
    )
    if serve_cpu is not None:
        import os

        print(
            f"   the annotators' process: {serve_cpu:.2f}s CPU; both processes "
            f"{(live_cpu + serve_cpu) / live_s:.2f} of the {os.cpu_count()} cores busy"
        )
    worst = min(rate for rate, *_ in rates) / ideal
    for i, (rate, steady, peak, first, gaps) in enumerate(rates):
        print(
            f"   a{i}: {rate:.1f} req/s, ratio {rate / ideal:.3f} (target >= {goal}); "
            f"steady {steady:.1f} req/s (ratio {steady / ideal:.3f}); first request at {first:.3f}s; "
            f"max in flight {peak}; "
            "longest pauses between requests: " + ", ".join(f"{g * 1000:.0f} ms at {t:.2f}s" for g, t in gaps)
        )
    speedup = live_s / max(cached_s, 1e-9)
    print(
        f"3. cached re-run: {cached_s:.3f}s, speedup {speedup:.1f}x (target >= 50 up to c = 64); "
        f"views rendered {len(rerendered)} (rendering the {n} views alone takes {render_s:.3f}s)"
    )
    if profiles:
        print("4. where the live vote's CPU time goes (all of its threads, own CPU time):")
        print(profiles.report())
    return 0 if worst >= goal and (speedup >= 50 or c > 64) else 1


if __name__ == "__main__":
    raise SystemExit(main())
