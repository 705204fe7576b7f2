"""`fairsets debias apply` streams files in blocks: the whole-array results, the same bytes whatever
the block size, the other Parquet columns kept, and bad input refused in one line."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import fairsets.audit.debias_stream as stream
from cli_helpers import assert_one_line_error, run_cli
from fairsets.audit.debiasing import apply_to_file
from fairsets.debias import DebiasTransform

D = 24
N = 203  # not a multiple of either block size: the last blocks are short


@pytest.fixture(scope="module")
def transform(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An affine eraser (b != 0) with SLERP and compensation: every step of the maths runs."""
    rng = np.random.default_rng(7)
    W = np.linalg.qr(rng.standard_normal((D, 4)))[0]
    t = rng.standard_normal(D)
    tr = DebiasTransform("leace", np.eye(D) - W @ W.T, 0.2 * W[:, 0], 0.6, t / np.linalg.norm(t), 0.15)
    path = tmp_path_factory.mktemp("t") / "t.npz"
    tr.save(path)
    return path


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    return (np.random.default_rng(8).standard_normal((N, D)) * 3 + 1).astype(np.float32)


def _reference(transform: Path, X: np.ndarray) -> np.ndarray:
    return DebiasTransform.load(transform).apply(X)


def _close(got: np.ndarray, ref: np.ndarray, X: np.ndarray) -> None:
    """Within the documented tolerance: 1e-5 * |x| per row."""
    err = np.linalg.norm(got.astype(np.float64) - ref, axis=1)
    assert np.all(err <= 1e-5 * np.linalg.norm(X.astype(np.float64), axis=1))


def test_npy_streams_to_the_whole_array_result(tmp_path: Path, transform: Path, X: np.ndarray) -> None:
    src = tmp_path / "x.npy"
    np.save(src, X)
    outs = []
    for rows in (7, 64):
        dst = tmp_path / f"y{rows}.npy"
        assert apply_to_file(transform, src, dst, block_rows=rows) == dst
        outs.append(dst.read_bytes())
        got = np.load(dst)
        assert got.dtype == np.float32 and got.shape == (N, D)
        _close(got, _reference(transform, X), X)
    assert outs[0] == outs[1]  # the block size does not change a byte
    # one header and the rows: the bytes np.save writes for the whole array
    whole = io.BytesIO()
    np.save(whole, np.load(tmp_path / "y7.npy"))
    assert outs[0] == whole.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", "y64.npy", "y7.npy"]  # no temps


@pytest.mark.parametrize("kind", ["float64", "big-endian", "fortran", "int"])
def test_other_npy_layouts(tmp_path: Path, transform: Path, X: np.ndarray, kind: str) -> None:
    arr = {
        "float64": X.astype(np.float64),
        "big-endian": X.astype(">f4"),
        "fortran": np.asfortranarray(X),
        "int": np.rint(X).astype(np.int16),
    }[kind]
    np.save(tmp_path / "x.npy", arr)
    apply_to_file(transform, tmp_path / "x.npy", tmp_path / "y.npy", block_rows=50)
    x32 = np.ascontiguousarray(arr, dtype=np.float32)
    _close(np.load(tmp_path / "y.npy"), _reference(transform, x32), x32)


def _parquet(path: Path, X: np.ndarray, *, fixed: bool = True, group: int = 60) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fixed:
        emb = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), D)
    else:  # variable-size lists of float64
        emb = pa.array([row.astype(np.float64).tolist() for row in X], pa.list_(pa.float64()))
    table = pa.table({"key": [f"k{i}" for i in range(len(X))], "embedding": emb, "n": np.arange(len(X))})
    pq.write_table(table, path, row_group_size=group)


@pytest.mark.parametrize("fixed", [True, False])
def test_parquet_keeps_the_other_columns(
    tmp_path: Path, transform: Path, X: np.ndarray, fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    monkeypatch.setattr(stream, "ROW_GROUP_ROWS", 50)
    src = tmp_path / "x.parquet"
    _parquet(src, X, fixed=fixed)
    outs = []
    for rows in (7, 64):
        dst = tmp_path / f"y{rows}.parquet"
        apply_to_file(transform, src, dst, block_rows=rows)
        outs.append(dst.read_bytes())
        table = pq.read_table(dst)
        assert table.column_names == ["key", "embedding", "n"]
        assert table.column("key").to_pylist() == [f"k{i}" for i in range(N)]
        assert table.column("n").to_pylist() == list(range(N))
        got = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
        _close(got, _reference(transform, X), X)
        meta = pq.ParquetFile(dst).metadata
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [50, 50, 50, 50, 3]
    assert outs[0] == outs[1]


def test_between_npy_and_parquet(tmp_path: Path, transform: Path, X: np.ndarray) -> None:
    import pyarrow.parquet as pq

    np.save(tmp_path / "x.npy", X)
    apply_to_file(transform, tmp_path / "x.npy", tmp_path / "y.parquet")
    table = pq.read_table(tmp_path / "y.parquet")
    assert table.column_names == ["embedding"]
    from_npy = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    _parquet(tmp_path / "x.parquet", X)
    apply_to_file(transform, tmp_path / "x.parquet", tmp_path / "z.npy")
    assert np.load(tmp_path / "z.npy").tobytes() == from_npy.tobytes()
    _close(from_npy, _reference(transform, X), X)


def test_empty_npy(tmp_path: Path, transform: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((0, D), np.float32))
    apply_to_file(transform, tmp_path / "x.npy", tmp_path / "y.npy")
    assert np.load(tmp_path / "y.npy").shape == (0, D)


def _bad_inputs(d: Path, X: np.ndarray) -> dict[str, str]:
    nan = X.copy()
    nan[150, 3] = np.nan
    np.save(d / "nan.npy", nan)
    np.save(d / "big.npy", np.full((3, D), 1e300))
    np.save(d / "dim.npy", X[:, :5])
    np.save(d / "cube.npy", np.zeros((2, 2, D), np.float32))
    np.save(d / "obj.npy", np.array([["a"] * D], dtype=object), allow_pickle=True)
    np.save(d / "cut.npy", X)
    (d / "cut.npy").write_bytes((d / "cut.npy").read_bytes()[:-100])
    (d / "x.txt").write_text("1 2 3\n")
    (d / "junk.parquet").write_bytes(b"not parquet at all")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"vec": [[1.0] * D]}), d / "nocol.parquet")
    pq.write_table(pa.table({"embedding": ["a string"]}), d / "strings.parquet")
    return {
        "nan.npy": "nan.npy: row 150 holds non-finite values",
        "big.npy": "row 0 holds values beyond float32's range",
        "dim.npy": "embedding dimension 5 does not match the transform's dimension 24",
        "cube.npy": "expected a 2-D array",
        "obj.npy": "not a readable .npy array",
        "cut.npy": "cut.npy",
        "x.txt": "embeddings must be .npy or .parquet",
        "junk.parquet": "not a readable Parquet file",
        "nocol.parquet": "no 'embedding' column (columns: vec)",
        "strings.parquet": "'embedding' must be a list of numbers",
    }


def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path,
    transform: Path,
    X: np.ndarray,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream, "BLOCK_ROWS", 64)
    cases = _bad_inputs(tmp_path, X)
    for name, needle in cases.items():
        out = tmp_path / "out" / "y.npy"
        code, _, err = run_cli(
            ["debias", "apply", str(transform), str(tmp_path / name), "-o", str(out)], capsys
        )
        assert_one_line_error(code, err, needle)
        assert not out.parent.exists() or list(out.parent.iterdir()) == [], name  # no output, no temp


def test_the_command_writes_what_the_function_writes(
    tmp_path: Path, transform: Path, X: np.ndarray, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "x.npy", X)
    code, out, _ = run_cli(
        ["debias", "apply", str(transform), str(tmp_path / "x.npy"), "-o", str(tmp_path / "a.npy")], capsys
    )
    assert code == 0 and "wrote" in out
    apply_to_file(transform, tmp_path / "x.npy", tmp_path / "b.npy", block_rows=5)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_memory_is_a_few_blocks_not_the_file(
    tmp_path: Path, transform: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    import pyarrow as pa

    X = np.random.default_rng(9).standard_normal((40_000, D)).astype(np.float32)  # 3.8 MB
    np.save(tmp_path / "x.npy", X)
    tracemalloc.start()  # numpy reports its buffers to tracemalloc
    try:
        apply_to_file(transform, tmp_path / "x.npy", tmp_path / "y.npy", block_rows=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X.nbytes / 4, peak  # blocks of 1,000 rows are 96 kB

    _parquet(tmp_path / "x.parquet", X, group=2000)
    seen: list[int] = []
    real = stream._batch_vectors

    def watched(col: object, src: Path) -> np.ndarray:
        seen.append(pa.total_allocated_bytes())
        return real(col, src)

    monkeypatch.setattr(stream, "_batch_vectors", watched)
    monkeypatch.setattr(stream, "ROW_GROUP_ROWS", 2000)
    apply_to_file(transform, tmp_path / "x.parquet", tmp_path / "y.parquet", block_rows=1000)
    # the file is 3.8 MB; a few row groups of 2,000 rows stay well under it (pre-buffering: ~7 MB)
    assert len(seen) == 40 and max(seen) < X.nbytes, max(seen)
