"""How ``fairsets debias apply`` scales: time against the ``X @ A.T`` floor, and peak memory.

Builds ``--rows`` (default 1,000,000) × ``--dim`` (512) float32 random embeddings in a ``.npy`` file
and fits a real transform with the project's own code (:func:`fairsets.debias.fit_transform`,
``--method`` inlp or leace, on 2,000 labelled rows with four planted groups, a target text vector
and the compensation, ``--alpha`` 1.0 as ``debias fit``'s default). Printed, measured in the same run:

* **floor**: seconds of one float32 product ``X @ A.T`` of the whole array already in memory
  (``A`` the transform's matrix), best of ``--repeat``;
* **apply**: seconds of :func:`fairsets.audit.debiasing.apply_to_file` (reading the file, the
  transform, writing the output and its fsync), in a fresh process, best of ``--repeat`` runs
  alternating with the floor's; the ratio apply ÷ floor (target ≤ 3×), and the same ratio of CPU
  seconds (all threads; steadier than wall time when other processes share the cores);
* **memory**: peak RSS of that process (``RUSAGE_CHILDREN`` of a small launcher; the interpreter
  and numpy included) ÷ the input file's size (target ≤ 2×);
* **agreement**: the largest distance of an output row from
  :meth:`~fairsets.debias.DebiasTransform.apply` (float64, whole array) on the first 20,000 rows,
  in units of the row's norm (the documented tolerance is 1e-5);
* with ``--parquet``: the same apply on the embeddings as a Parquet file (``embedding`` column plus a
  ``key`` column) → Parquet;
* with ``--reference``: the whole-array path the command took before (``np.load``,
  ``DebiasTransform.apply``, ``np.save``) timed and measured the same way (it needs ~10× the
  input in memory: use it with fewer rows).

The input file was just written, so it is read from the page cache, as on a second run.

    python benchmarks/bench_debias_apply.py                   # 1,000,000 rows (~2 GB; a few minutes)
    python benchmarks/bench_debias_apply.py --rows 200000 --reference --parquet
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"
try:
    import fairsets  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(SRC))

#: Runs its arguments as a child and prints the child's peak RSS (KiB). A small process of its own:
#: a child's ``ru_maxrss`` also counts the memory of the process it was started from (Linux keeps
#: the high-water mark across ``exec``), so the bench's own memory (the array) must not be that one.
_LAUNCH = (
    "import resource, subprocess, sys; "
    "r = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
)
_APPLY = (
    "import sys, time; from fairsets.audit.debiasing import apply_to_file; "
    "t, c = time.perf_counter(), time.process_time(); apply_to_file(sys.argv[1], sys.argv[2], sys.argv[3]); "
    "print(time.perf_counter() - t, time.process_time() - c)"
)
_WHOLE = (
    "import sys, time, numpy as np; from fairsets.debias import DebiasTransform; "
    "t = time.perf_counter(); tr = DebiasTransform.load(sys.argv[1]); "
    "np.save(sys.argv[3], tr.apply(np.load(sys.argv[2])))\n"
    "print(time.perf_counter() - t, time.process_time())"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _child(code: str, *args: Path) -> tuple[float, float, int]:
    """Seconds and CPU seconds the child reports, and its peak RSS in bytes."""
    cmd = [sys.executable, "-c", _LAUNCH, sys.executable, "-c", code, *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr[-2000:]}")
    seconds, cpu, kib = p.stdout.split()[-3:]
    return float(seconds), float(cpu), int(kib) * 1024


def fit(dim: int, method: str, alpha: float, path: Path) -> object:
    """A transform fitted by fairsets on 2,000 labelled rows with four planted group directions."""
    from fairsets.debias import fit_transform

    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(4), 500)
    planted = np.linalg.qr(rng.standard_normal((dim, 4)))[0].T * 3.0
    X = rng.standard_normal((len(groups), dim)) + planted[groups]
    target = rng.standard_normal(dim)
    kwargs = {"max_iter": 8, "seed": 0} if method == "inlp" else {}
    tr = fit_transform(X, groups.astype(str), method=method, alpha=alpha, target=target, **kwargs)
    tr.save(path)
    return tr


def write_input(path: Path, rows: int, dim: int) -> None:
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, dim))
    rng = np.random.default_rng(0)
    for i in range(0, rows, 65536):
        m = min(65536, rows - i)
        out[i : i + m] = rng.standard_normal((m, dim), dtype=np.float32) + 0.5
    out.flush()
    del out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--method", choices=("inlp", "leace"), default="inlp")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument(
        "--repeat", type=int, default=2, help="runs of the floor and the apply (the best is kept)"
    )
    ap.add_argument("--parquet", action="store_true", help="also apply to the embeddings as Parquet")
    ap.add_argument("--reference", action="store_true", help="also run the whole-array path")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-debias-") as d:
        tmp = Path(d)
        tr = fit(args.dim, args.method, args.alpha, tmp / "t.npz")
        print(f"transform: {tr!r}")
        src, dst = tmp / "x.npy", tmp / "y.npy"
        write_input(src, args.rows, args.dim)
        size = src.stat().st_size
        X = np.load(src)
        AT = np.ascontiguousarray(tr.A.T, dtype=np.float32)  # type: ignore[attr-defined]
        floor, runs = [], []
        for _ in range(args.repeat):  # alternating, so that a busy moment of the machine hits both
            t0, c0 = time.perf_counter(), time.process_time()
            Y = X @ AT
            floor.append((time.perf_counter() - t0, time.process_time() - c0))
            del Y
            runs.append(_child(_APPLY, tmp / "t.npz", src, dst))
        best_floor, cpu_floor = min(f[0] for f in floor), min(f[1] for f in floor)
        secs, cpu, rss = min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)
        print(f"input: {args.rows:,} × {args.dim} float32, {size / 2**30:.2f} GiB")
        print(
            f"floor X @ A.T (float32, in memory): {best_floor:.2f} s, {cpu_floor:.2f} CPU s "
            f"(runs {', '.join(f'{t[0]:.2f}' for t in floor)})"
        )
        print(
            f"apply .npy → .npy: {secs:.2f} s, {cpu:.2f} CPU s "
            f"(runs {', '.join(f'{r[0]:.2f}' for r in runs)}) "
            f"= {secs / best_floor:.2f}× the floor (target ≤ 3×; CPU {cpu / cpu_floor:.2f}×); peak RSS "
            f"{rss / 2**20:,.0f} MiB = {rss / size:.2f}× the input (target ≤ 2×)"
        )
        k = min(args.rows, 20_000)
        ref = tr.apply(X[:k])  # type: ignore[attr-defined]
        got = np.load(dst, mmap_mode="r")[:k]
        err = np.linalg.norm(got.astype(np.float64) - ref, axis=1) / np.linalg.norm(
            X[:k].astype(np.float64), axis=1
        )
        print(
            f"agreement with DebiasTransform.apply (first {k:,} rows): "
            f"max |Δ| / |x| = {err.max():.2e} (tolerance 1e-5)"
        )
        del X, got
        if args.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            par, pout = tmp / "x.parquet", tmp / "y.parquet"
            arr = np.load(src, mmap_mode="r")
            with pq.ParquetWriter(
                par, pa.schema([("key", pa.string()), ("embedding", pa.list_(pa.float32(), args.dim))])
            ) as w:
                for i in range(0, args.rows, 65536):
                    block = np.asarray(arr[i : i + 65536])
                    col = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), args.dim)
                    keys = pa.array([str(j) for j in range(i, i + len(block))])
                    w.write_table(pa.table({"key": keys, "embedding": col}))
            del arr
            psecs, _, prss = _child(_APPLY, tmp / "t.npz", par, pout)
            psize = par.stat().st_size
            print(
                f"apply .parquet → .parquet: {psecs:.2f} s = {psecs / best_floor:.2f}× the floor; peak RSS "
                f"{prss / 2**20:,.0f} MiB = {prss / psize:.2f}× the input ({psize / 2**30:.2f} GiB)"
            )
        if args.reference:
            wsecs, _, wrss = _child(_WHOLE, tmp / "t.npz", src, tmp / "w.npy")
            print(
                f"whole-array path (before): {wsecs:.2f} s = {wsecs / best_floor:.2f}× the floor; peak RSS "
                f"{wrss / 2**20:,.0f} MiB = {wrss / size:.2f}× the input"
            )


if __name__ == "__main__":
    main()
