"""How ``fairsets geo profile`` scales: method start-up, shard workers, and memory of one long file.

Captions: the labelled development and validation sets in ``benchmarks/data`` (``geo-dev.csv``,
``geo-val.csv``; the held-out set is not read), repeated in order to the sizes below. The method is
``offline`` (its gazetteer cached on disk by a first, unmeasured start). Printed:

(a) **start-up**: seconds from a fresh Python process to a built ``offline`` method with the
    gazetteer cache warm (the import of fairsets included), median of 3 processes.
    Target ≤ 1 s.
(b) **shards**: ``--captions`` captions (default 100,000) in 8 Parquet shards, profiled by
    :func:`fairsets.geo.profile.profile_shards` on the local executor with 1 then 2 workers (process
    start, imports, the method's build and the workers' exit included: what a user waits for; best
    of ``--repeat`` alternating runs, as other processes on the machine slow some); the speed-up
    ``t(1) / t(2)`` (target ≥ 1.7×; it needs 2 free cores, and the output of both runs must be
    byte-identical).
(c) **memory**: peak RSS (``RUSAGE_CHILDREN`` in a small launcher process) of ``fairsets geo
    profile`` on one file of ``--file-captions`` captions (default 1,000,000) as ``.txt`` and
    ``.parquet`` → ``.csv``, next to the peak RSS of a process that only builds the method (the
    baseline, measured in the same run). Target ≤ 1 GB: a streamed file adds little to the method.

    python benchmarks/bench_geo_scale.py                      # the targets' sizes (a few minutes)
    python benchmarks/bench_geo_scale.py --captions 20000 --file-captions 100000
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

SRC = Path(__file__).resolve().parents[1] / "src"
try:
    import fairsets  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(SRC))

DATA = Path(__file__).resolve().parent / "data"
SETS = (DATA / "geo-dev.csv", DATA / "geo-val.csv")
SHARDS = 8
_START = (
    "import time; t = time.perf_counter(); "
    "from fairsets.geo.methods import get_method; get_method('offline'); "
    "print(time.perf_counter() - t)"
)


#: Runs its arguments as a child and prints the child's peak RSS (KiB). A small process of its own:
#: a child's ``ru_maxrss`` also counts the memory of the process it was started from (Linux keeps
#: the high-water mark across ``exec``), so the bench's own memory must not be that process.
_LAUNCH = (
    "import resource, subprocess, sys; "
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _captions(n: int) -> list[str]:
    pool: list[str] = []
    for path in SETS:
        with path.open(encoding="utf-8", newline="") as fh:
            pool.extend(row["caption"] for row in csv.DictReader(fh))
    return [pool[i % len(pool)] for i in range(n)]


def _run(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of one subprocess."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} failed:\n{p.stderr[-2000:]}")
    return seconds, p.stdout


def _peak(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes, ``RUSAGE_CHILDREN`` of a small launcher) of ``cmd``."""
    seconds, out = _run([sys.executable, "-c", _LAUNCH, *cmd])
    return seconds, int(out.split()[-1]) * 1024


def startup() -> float:
    _run([sys.executable, "-c", _START])  # warms the gazetteer cache (unmeasured)
    times = [float(_run([sys.executable, "-c", _START])[1].strip()) for _ in range(3)]
    print(
        f"(a) start-up of offline, warm cache: median {statistics.median(times):.2f} s "
        f"(runs: {', '.join(f'{t:.2f}' for t in times)}; target ≤ 1 s)"
    )
    return statistics.median(times)


def shards(n: int, tmp: Path, repeat: int = 3) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.core.progress import Progress
    from fairsets.geo.profile import method_spec, profile_shards

    caps = _captions(n)
    folder = tmp / "shards"
    folder.mkdir()
    per = -(-n // SHARDS)
    for s in range(SHARDS):
        part = caps[s * per : (s + 1) * per]
        keys = [f"{s}-{i}" for i in range(len(part))]
        pq.write_table(pa.table({"key": keys, "caption": part}), folder / f"part-{s:05d}.parquet")
    runs: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(max(1, repeat)):  # alternating, so that a busy moment of the machine hits both
        for workers in (1, 2):
            out = tmp / f"out{workers}"
            shutil.rmtree(out, ignore_errors=True)  # a fresh run, not a resumed one
            t0 = time.perf_counter()
            summary = profile_shards(
                [folder], method_spec("offline"), out, workers=workers, progress=Progress(False)
            )
            runs[workers].append(time.perf_counter() - t0)
            assert summary["captions"] == n and summary["skipped"] == 0, summary
    seconds = {w: min(t) for w, t in runs.items()}
    for workers, t in runs.items():
        print(
            f"(b) {n:,} captions in {SHARDS} shards, {workers} worker(s): {seconds[workers]:.2f} s, best of "
            f"{len(t)} ({', '.join(f'{x:.2f}' for x in t)}; {n / seconds[workers]:,.0f} captions/s)"
        )
    same = all(
        (tmp / "out1" / p.name).read_bytes() == (tmp / "out2" / p.name).read_bytes()
        for p in sorted(folder.glob("*.parquet"))
    )
    ratio = seconds[1] / seconds[2]
    print(
        f"    1 → 2 workers: {ratio:.2f}× (target ≥ 1.7×; {os.cpu_count()} cores); outputs identical: {same}"
    )
    return ratio


def memory(n: int, tmp: Path) -> dict[str, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    caps = [c.replace("\n", " ").replace("\r", " ") for c in _captions(n)]
    txt = tmp / "big.txt"
    txt.write_text("".join(c + "\n" for c in caps), encoding="utf-8")
    par = tmp / "big.parquet"
    pq.write_table(pa.table({"caption": caps, "key": [str(i) for i in range(n)]}), par)
    del caps
    peak: dict[str, int] = {}
    _, peak["method only"] = _peak([sys.executable, "-c", _START])
    print(f"(c) peak RSS, building offline only (baseline): {peak['method only'] / 2**20:,.0f} MiB")
    for src in (txt, par):
        out = tmp / f"{src.stem}-{src.suffix[1:]}.csv"
        cmd = [sys.executable, "-m", "fairsets", "geo", "profile", str(src), "-o", str(out), "-q"]
        secs, rss = _peak(cmd)
        with out.open("rb") as fh:
            rows = sum(1 for _ in csv.reader(line.decode() for line in fh)) - 1
        assert rows == n, (rows, n)
        peak[src.suffix] = rss
        print(
            f"    one file of {n:,} captions ({src.suffix} → .csv): peak RSS {rss / 2**20:,.0f} MiB "
            f"(+{(rss - peak['method only']) / 2**20:,.0f} MiB over the baseline), {secs:.1f} s "
            f"(target ≤ 1 GB)"
        )
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--captions", type=int, default=100_000, help="captions in the shards run")
    ap.add_argument("--file-captions", type=int, default=1_000_000, help="captions in the one-file runs")
    ap.add_argument("--repeat", type=int, default=3, help="shards runs per worker count (the best is kept)")
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out: startup,shards,memory")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="bench-geo-scale-") as d:
        tmp = Path(d)
        if "startup" not in skip:
            startup()
        if "shards" not in skip:
            shards(args.captions, tmp, args.repeat)
        if "memory" not in skip:
            memory(args.file_captions, tmp)


if __name__ == "__main__":
    main()
