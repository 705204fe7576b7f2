"""Throughput and memory of fairsets' URL downloads against plain img2dataset on the same listing.

Serves ``--images`` small generated JPEGs (distinct, ~2 kB) from a ``http.server`` thread on
127.0.0.1 and downloads the listing with

  (a) plain img2dataset: ``img2dataset.download(...)`` with ``resize_mode="no"``,
      ``skip_reencode=True``, ``output_format="webdataset"``, no EXIF, no hash, no wandb;
  (b) fairsets: ``fairsets.fetch.download.download_urls`` (the guard, the pixel cap, per-sample
      status rows on top of the same img2dataset Downloader/Reader/Writer),

with the same process, thread and shard-size settings.

``--resize-mode keep_ratio --image-size 384`` (or ``center_crop``) is the ``fairsets download`` case:
larger JPEGs (``--image-px``, default 640x480 with ``--resize-mode``), a listing with a caption and
an extra column, and

  (a) plain img2dataset: ``img2dataset.download(...)`` with that resize mode and size and its
      other defaults (re-encoding, ``resize_only_if_bigger=False``), the caption and the extra
      column kept, no EXIF, no hash, no wandb;
  (b) fairsets: ``fairsets.fetch.shards.download_listing`` (what ``fairsets download`` runs),

and the images' sizes of the two runs are compared (every key's width x height). Target there:
(b)/(a) images/s >= 1.0. Each run is a fresh interpreter (a
subprocess of this one) and is timed from before it imports its download module to the end, so
import costs in the driver and in every worker count. Runs alternate (a), (b), (a), (b), ...; the
best of ``--repeat`` counts.

Peak memory is each process's ``VmHWM`` (``/proc/<pid>/status``; polled every 0.1 s for the
worker processes): ``getrusage``'s ``ru_maxrss`` would not do, since a child started by
fork/vfork + exec inherits its parent's peak in it (a spawned worker of a 400 MiB driver reports
at least 400 MiB). "workers" is the largest child process of the run (download workers, and
img2dataset's logger process). Targets: (b)/(a) images/s >= 1.7; (b)'s peaks below (a)'s.

    python benchmarks/bench_download.py                 # 2,000 images, 2 processes x 16 threads
    python benchmarks/bench_download.py --quick         # 300 images, one run each
    python benchmarks/bench_download.py --images 5000 --processes 4 --shard-size 250
    python benchmarks/bench_download.py --resize-mode keep_ratio --image-size 384   # fairsets download

The loopback server is one Python process for both contenders: it is a ceiling for both (the
"server" line prints its own rate), so on a small or busy machine the ratio is pulled towards 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

try:
    import fairsets  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CONTENDERS = ("img2dataset", "fairsets")


# ------------------------------------------------------------------------------------------ images
def make_images(n: int, seed: int = 0, size: tuple[int, int] = (64, 48)) -> list[bytes]:
    """``n`` distinct JPEGs of ``size`` (a colour gradient and noise; 64x48 is ~2 kB)."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    w, h = size
    x = np.arange(w)[None, :] * 4 % 256
    y = np.arange(h)[:, None] * 5 % 256
    out = []
    for i in range(n):
        arr = np.empty((h, w, 3), np.uint8)
        arr[..., 0] = (x + i) % 256
        arr[..., 1] = (y + i // 256) % 256
        arr[..., 2] = rng.integers(0, 256, (h, w), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr, "RGB").save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


class _Handler(BaseHTTPRequestHandler):
    images: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        body = self.images.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def serve(images: list[bytes]) -> tuple[ThreadingHTTPServer, str]:
    """A loopback server of ``/img/<i>.jpg`` in a daemon thread; returns it and its base URL."""
    _Handler.images = {f"/img/{i}.jpg": data for i, data in enumerate(images)}
    ThreadingHTTPServer.request_queue_size = 1024  # the default 5 refuses connections under load
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, name="bench-server", daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def server_rate(urls: list[str], threads: int) -> float:
    """Images/s of plain ``urllib`` fetches with ``threads`` threads in this process: the server's ceiling."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    def get(url: str) -> int:
        with urllib.request.urlopen(url, timeout=20) as r:
            return len(r.read())

    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(get, urls))
    return len(urls) / (time.perf_counter() - t)


# ------------------------------------------------------------------------------- one run (a child)
def _vm_hwm_kib(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class ChildPeaks:
    """Polls the peak RSS (VmHWM) of this process's children every ``interval`` seconds."""

    def __init__(self, interval: float = 0.1) -> None:
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def _children(self) -> list[int]:
        me, out = os.getpid(), []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == me:
                out.append(int(entry))
        return out

    def _poll(self) -> None:
        for pid in self._children():
            self.peaks[pid] = max(self.peaks.get(pid, 0), _vm_hwm_kib(pid))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._poll()

    def __enter__(self) -> ChildPeaks:
        if os.path.isdir("/proc"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def run_img2dataset(spec: dict[str, Any], t0: float) -> tuple[float, int]:
    """Seconds from ``t0`` (before the import) to the end of the download, and the images downloaded."""
    import img2dataset

    if spec["resize_mode"] == "no":
        case: dict[str, Any] = {
            "save_additional_columns": ["fairsets_key"],
            "resize_mode": "no",
            "skip_reencode": True,
        }
    else:  # the fairsets download case: img2dataset's defaults for resizing, a caption and a column kept
        case = {
            "caption_col": "caption",
            "save_additional_columns": ["similarity"],
            "resize_mode": spec["resize_mode"],
            "image_size": spec["image_size"],
        }
    img2dataset.download(
        url_list=spec["input"],
        input_format="parquet",
        url_col="url",
        output_folder=spec["out"],
        output_format="webdataset",
        processes_count=spec["processes"],
        thread_count=spec["threads"],
        number_sample_per_shard=spec["shard_size"],
        encode_format="jpg",
        extract_exif=False,
        compute_hash=None,
        timeout=spec["timeout"],
        retries=0,
        enable_wandb=False,
        **case,
    )
    seconds = time.perf_counter() - t0
    import pyarrow.parquet as pq

    ok = 0
    for p in Path(spec["out"]).glob("*.parquet"):
        ok += sum(s == "success" for s in pq.read_table(p, columns=["status"]).column("status").to_pylist())
    return seconds, ok


def run_fairsets(spec: dict[str, Any], t0: float) -> tuple[float, int]:
    """Seconds from ``t0`` (before the import) to the end of the download, and the images downloaded."""
    if spec["resize_mode"] != "no":
        from fairsets.fetch.download.images import ImageSpec
        from fairsets.fetch.guard import FetchPolicy
        from fairsets.fetch.shards import download_listing

        rows = download_listing(
            spec["input"],
            spec["out"],
            FetchPolicy(
                allow_loopback=True, timeout=spec["timeout"], per_host_rate=0, per_host_connections=0
            ),
            processes=spec["processes"],
            threads=spec["threads"],
            image=ImageSpec(spec["resize_mode"], spec["image_size"]),
            shard_size=spec["shard_size"],
        )
        return time.perf_counter() - t0, sum(r["status"] == "ok" for r in rows)

    from fairsets.fetch.download import download_urls
    from fairsets.fetch.guard import FetchPolicy

    status = download_urls(
        spec["rows"],
        spec["out"],
        FetchPolicy(allow_loopback=True, timeout=spec["timeout"], per_host_rate=0, per_host_connections=0),
        processes=spec["processes"],
        threads=spec["threads"],
        shard_size=spec["shard_size"],
    )
    return time.perf_counter() - t0, sum(r["status"] == "ok" for r in status)


def _sizes(out: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(shard, key): (width, height)}`` of the images a run stored (img2dataset's status Parquets)."""
    import pyarrow.parquet as pq

    got = {}
    for p in out.rglob("*.parquet"):
        if p.name[0].isdigit() and ".fairsets" not in p.parts:  # not the status cache
            for r in pq.read_table(p, columns=["key", "status", "width", "height"]).to_pylist():
                if r["status"] == "success":
                    got[(p.stem, r["key"])] = (r["width"], r["height"])
    return got


def child(which: str, spec_path: str) -> int:
    """One run in this (fresh) interpreter; writes its measurements to ``spec["result"]``."""
    spec = json.loads(Path(spec_path).read_text())
    spec["rows"] = json.loads(Path(spec["rows"]).read_text())  # fairsets' input, read before the clock
    with ChildPeaks() as peaks:
        run = run_img2dataset if which == "img2dataset" else run_fairsets
        seconds, ok = run(spec, time.perf_counter())
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "seconds": seconds,
        "ok": ok,
        "cpu": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        "main_kib": _vm_hwm_kib("self") or own.ru_maxrss,
        "workers_kib": max(peaks.peaks.values(), default=0),
        "children": len(peaks.peaks),
    }
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------- driver
def run_one(which: str, spec: dict[str, Any], work: Path, idx: int, verbose: bool) -> dict[str, Any]:
    spec = dict(spec, out=str(work / f"out-{which}-{idx}"), result=str(work / f"result-{which}-{idx}.json"))
    spec_path = work / f"spec-{which}-{idx}.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1", WANDB_MODE="disabled")
    res = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", which, str(spec_path)],
        capture_output=not verbose,
        text=True,
        env=env,
        cwd=work,
    )
    if res.returncode != 0:
        raise SystemExit(f"{which} run failed (exit {res.returncode}):\n{(res.stderr or '')[-4000:]}")
    return json.loads(Path(spec["result"]).read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=2000, help="images in the listing (default 2000)")
    ap.add_argument("--processes", type=int, default=2, help="download processes (default 2)")
    ap.add_argument("--threads", type=int, default=16, help="download threads per process (default 16)")
    ap.add_argument("--shard-size", type=int, default=100, help="samples per shard (default 100)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each; the best counts (default 2)")
    ap.add_argument("--timeout", type=float, default=20, help="seconds per connect / read (default 20)")
    ap.add_argument("--quick", action="store_true", help="300 images, one run each")
    ap.add_argument(
        "--resize-mode",
        default="no",
        choices=("no", "keep_ratio", "center_crop"),
        help="no: download_urls as stored by recipes (default); else the fairsets download case",
    )
    ap.add_argument("--image-size", type=int, default=384, help="resized side (default 384)")
    ap.add_argument(
        "--image-px", default=None, help="served JPEG size WxH (default 64x48; 640x480 with --resize-mode)"
    )
    ap.add_argument("--verbose", action="store_true", help="show the runs' own output")
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(*args.child)
    if args.quick:
        args.images, args.repeat = 300, 1

    resizing = args.resize_mode != "no"
    px = args.image_px or ("640x480" if resizing else "64x48")
    size = tuple(int(v) for v in px.lower().split("x"))
    images = make_images(args.images, size=(size[0], size[1]))
    srv, base = serve(images)
    urls = [f"{base}/img/{i}.jpg" for i in range(len(images))]
    with tempfile.TemporaryDirectory(prefix="bench-download-") as tmp:
        work = Path(tmp)
        import pyarrow as pa
        import pyarrow.parquet as pq

        keys = [f"s{i:06d}" for i in range(len(urls))]
        if resizing:  # a LAION-style listing: a caption and a column to keep
            listing = {
                "url": urls,
                "caption": [f"image number {i}" for i in range(len(urls))],
                "similarity": [i / len(urls) for i in range(len(urls))],
            }
        else:
            listing = {"url": urls, "fairsets_key": keys}
        pq.write_table(pa.table(listing), work / "listing.parquet")
        (work / "rows.json").write_text(
            json.dumps([{"key": k, "url": u} for k, u in zip(keys, urls, strict=True)])
        )
        spec = {
            "input": str(work / "listing.parquet"),
            "rows": str(work / "rows.json"),
            "processes": args.processes,
            "threads": args.threads,
            "shard_size": args.shard_size,
            "timeout": args.timeout,
            "resize_mode": args.resize_mode,
            "image_size": args.image_size,
        }
        ceiling = server_rate(urls, args.processes * args.threads)
        best: dict[str, dict[str, Any]] = {}
        for i in range(args.repeat):
            for which in CONTENDERS:
                r = run_one(which, spec, work, i, args.verbose)
                print(f"  run {i + 1} {which:<12} {r['seconds']:7.2f} s  {r['ok']} ok", flush=True)
                if which not in best or r["seconds"] < best[which]["seconds"]:
                    best[which] = r
        same_sizes = _sizes(work / "out-img2dataset-0") == _sizes(work / "out-fairsets-0")
    srv.shutdown()

    n = len(images)
    print()
    print(
        f"{n} JPEGs of {px} (~{sum(map(len, images)) // n} bytes) from a loopback http.server thread; "
        f"{args.processes} processes x {args.threads} threads, shards of {args.shard_size}, "
        f"best of {args.repeat}, {os.cpu_count()} CPUs"
    )
    print(
        f"server: plain urllib, {args.processes * args.threads} threads, one process  {ceiling:8.1f} images/s"
    )
    print(
        f"{'run':<16} {'seconds':>8} {'images/s':>9} {'ok':>6} {'CPU s':>7} "
        f"{'main MiB':>9} {'workers MiB':>12} {'children':>9}"
    )
    for which in CONTENDERS:
        r = best[which]
        print(
            f"{which:<16} {r['seconds']:>8.2f} {n / r['seconds']:>9.1f} {r['ok']:>6} {r['cpu']:>7.1f} "
            f"{r['main_kib'] / 1024:>9.0f} {r['workers_kib'] / 1024:>12.0f} {r['children']:>9}"
        )
    a, b = best["img2dataset"], best["fairsets"]
    ratio = a["seconds"] / b["seconds"]
    print()
    target = 1.0 if resizing else 1.7
    verdict = "OK" if ratio >= target else "MISSED"
    print(f"fairsets / img2dataset images/s   {ratio:6.2f}x  target >= {target:.2f}  {verdict}")
    if resizing:
        print(
            f"resize {args.resize_mode} {args.image_size}: every image's width x height as img2dataset's  "
            f"{'OK' if same_sizes else 'MISSED'}"
        )
    for label, key in (("main process", "main_kib"), ("largest worker", "workers_kib")):
        r = b[key] / a[key] if a[key] else float("nan")
        print(
            f"fairsets / img2dataset peak RSS, {label:<15} {r:5.2f}  target < 1.00  "
            f"{'OK' if r < 1 else 'MISSED'}"
        )
    if a["ok"] != n or b["ok"] != n:
        print(f"note: not every image downloaded (img2dataset {a['ok']}, fairsets {b['ok']} of {n})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
