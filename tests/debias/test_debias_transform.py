"""DebiasTransform: apply, compensation, the .npz file (round trip, checksums, numpy-only use)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from debias_helpers import Planted, mean_cos, reference_apply

from fairsets.debias import FORMAT, METHODS, DebiasTransform, fit_transform, slerp

Transform = DebiasTransform

# --- compensation -------------------------------------------------------------------------------


def test_compensation_restores_similarity(planted_tilted: Planted, fitted: dict[str, Transform]) -> None:
    p = planted_tilted
    for name in ("inlp", "inlp-half"):
        tf = fitted[name]
        plain = DebiasTransform(method=tf.method, A=tf.A, b=tf.b, alpha=tf.alpha, target=tf.target, beta=0.0)
        # beta = 2 * (mean cos before - mean cos after SLERP), recomputed here independently.
        v = reference_apply(tf.A, tf.b, tf.alpha, None, 0.0, p.X_train)
        delta = mean_cos(p.X_train, p.target) - mean_cos(v, p.target)
        assert delta > 0  # erasing the tilted subspace costs similarity to t
        assert tf.beta == pytest.approx(2 * delta, rel=1e-9, abs=1e-12)
        assert tf.meta["compensation"]["beta"] == tf.beta
        with_c, without = tf.apply(p.X_train), plain.apply(p.X_train)
        assert mean_cos(with_c, p.target) >= mean_cos(without, p.target) + 0.5 * delta
        # The same global shift for every row: c = beta * t in the unit-norm space.
        norms = np.linalg.norm(p.X_train, axis=1, keepdims=True)
        np.testing.assert_allclose(with_c.astype(np.float64) - without, tf.beta * norms * p.target, atol=1e-5)


def test_compensation_off_or_without_target(planted_tilted: Planted, fitted: dict[str, Transform]) -> None:
    p = planted_tilted
    off = fit_transform(p.X_train, p.y_train, method="leace", target=p.target, compensate=False)
    assert off.beta == 0.0 and off.target is not None
    assert off.meta["compensation"]["enabled"] is False
    assert fitted["inlp-plain"].target is None and fitted["inlp-plain"].beta == 0.0
    # LEACE: beta follows the same rule whatever its sign.
    tf = fitted["leace"]
    v = reference_apply(tf.A, tf.b, 1.0, None, 0.0, p.X_train)
    assert tf.beta == pytest.approx(2 * (mean_cos(p.X_train, p.target) - mean_cos(v, p.target)), abs=1e-9)
    np.testing.assert_allclose(np.linalg.norm(tf.target), 1.0)


# --- apply ------------------------------------------------------------------------------------


def test_apply_shapes_dtypes_determinism(planted_tilted: Planted, fitted: dict[str, Transform]) -> None:
    tf = fitted["inlp"]
    X = planted_tilted.X_test
    out = tf.apply(X)
    assert out.dtype == np.float32 and out.shape == X.shape
    assert tf.apply(X).tobytes() == out.tobytes()
    assert tf.apply(X.astype(np.float32)).shape == X.shape
    row = tf.apply(X[0])
    assert row.shape == (64,) and row.dtype == np.float32
    np.testing.assert_allclose(row, out[0], rtol=1e-6, atol=1e-7)
    assert tf.dim == 64
    # float64 maths, float32 result: matches the numpy formula.
    ref = reference_apply(tf.A, tf.b, tf.alpha, tf.target, tf.beta, X)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_alpha_zero_is_identity(planted_tilted: Planted, fitted: dict[str, Transform]) -> None:
    tf = fitted["inlp"]
    ident = DebiasTransform(method="inlp", A=tf.A, b=tf.b, alpha=0.0)
    X = planted_tilted.X_test
    np.testing.assert_allclose(ident.apply(X), X.astype(np.float32), rtol=1e-6, atol=1e-7)


def test_apply_errors(fitted: dict[str, Transform]) -> None:
    tf = fitted["inlp"]
    with pytest.raises(ValueError, match=r"dimension 32 .* dimension 64"):
        tf.apply(np.ones((3, 32)))
    with pytest.raises(ValueError, match="non-finite"):
        tf.apply(np.full((2, 64), np.nan))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        tf.apply(np.ones((2, 2, 64)))


# --- fit_transform ------------------------------------------------------------------------------


def test_meta_and_registry(fitted: dict[str, Transform]) -> None:
    assert set(METHODS) == {"inlp", "leace"}
    m = fitted["inlp"].meta
    assert m["model_id"] == "synthetic/clip-64" and m["attribute"] == "state"
    assert m["n"] == 450 and m["dim"] == 64
    assert m["groups"] == [f"state-{g:02d}" for g in range(6)]
    assert sum(m["group_counts"].values()) == 450
    assert m["iterations"] == len(m["accuracies"]) >= 1
    assert m["final_accuracy"] <= m["chance"] + 0.02
    assert m["removed_rank"] == 64 - round(float(np.trace(fitted["inlp"].A)))
    assert m["fit_params"] == {}
    json.dumps(m)  # JSON-serialisable
    assert fitted["leace"].meta["erased_rank"] == 5  # C - 1 for one-hot labels of 6 classes


def test_registry_is_the_extension_point(planted_tilted: Planted, monkeypatch: pytest.MonkeyPatch) -> None:
    def erase_mean(X: np.ndarray, y, **kwargs):  # type: ignore[no-untyped-def]
        d = X.shape[1]
        return np.eye(d), -X.mean(0), {"note": "centres"}

    monkeypatch.setitem(METHODS, "centre", erase_mean)
    tf = fit_transform(planted_tilted.X_train, planted_tilted.y_train, method="centre")
    assert tf.method == "centre" and tf.meta["note"] == "centres"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "nope"}, r"unknown debiasing method 'nope'.*\['inlp', 'leace'\]"),
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"target": np.ones(10)}, r"shape \(64,\)"),
        ({"target": np.zeros(64)}, "non-zero"),
        ({"meta": {"x": object()}}, "JSON"),
        ({"meta": {"x": float("nan")}}, "JSON"),
    ],
)
def test_fit_transform_errors(planted_tilted: Planted, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit_transform(planted_tilted.X_train[::8], planted_tilted.y_train[::8], max_iter=1, **kwargs)


def test_labels_may_be_an_iterator(planted_tilted: Planted) -> None:
    p = planted_tilted
    tf = fit_transform(p.X_train, iter(p.y_train.tolist()), method="leace")
    ref = fit_transform(p.X_train, p.y_train, method="leace")
    assert tf.A.tobytes() == ref.A.tobytes() and tf.meta == ref.meta


def test_fit_transform_input_errors() -> None:
    with pytest.raises(ValueError, match="at least 2 classes"):
        fit_transform(np.ones((4, 3)), ["a"] * 4)
    with pytest.raises(ValueError, match="3 rows but y has 2"):
        fit_transform(np.ones((3, 3)), ["a", "b"], method="leace")
    with pytest.raises(ValueError, match="non-finite"):
        fit_transform(np.array([[np.inf, 1.0], [1.0, 2.0]]), ["a", "b"])


def test_constructor_validation(fitted: dict[str, Transform]) -> None:
    tf = fitted["inlp"]
    with pytest.raises(ValueError, match="square"):
        DebiasTransform(method="inlp", A=np.ones((3, 4)), b=np.zeros(3))
    with pytest.raises(ValueError, match="b must"):
        DebiasTransform(method="inlp", A=np.eye(3), b=np.zeros(4))
    with pytest.raises(ValueError, match="unit norm"):
        DebiasTransform(method="inlp", A=np.eye(3), b=np.zeros(3), target=np.ones(3))
    with pytest.raises(ValueError, match="alpha"):
        DebiasTransform(method="inlp", A=np.eye(3), b=np.zeros(3), alpha=2.0)
    with pytest.raises(AttributeError):
        tf.alpha = 0.3  # type: ignore[misc]
    assert not tf.A.flags.writeable


# --- the file ----------------------------------------------------------------------------------

NAMES = ["inlp", "leace", "inlp-half", "inlp-plain", "leace-plain"]


@pytest.mark.parametrize("name", NAMES)
def test_save_load_bit_identical(
    tmp_path: Path, planted_tilted: Planted, fitted: dict[str, Transform], name: str
) -> None:
    tf = fitted[name]
    path = tf.save(tmp_path / "sub" / f"{name}.npz")
    assert path == tmp_path / "sub" / f"{name}.npz" and path.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    back = DebiasTransform.load(path)
    for attr in ("method", "alpha", "beta", "meta"):
        assert getattr(back, attr) == getattr(tf, attr), attr
    assert back.A.tobytes() == tf.A.tobytes() and back.b.tobytes() == tf.b.tobytes()
    assert (back.target is None) == (tf.target is None)
    if tf.target is not None:
        assert back.target is not None and back.target.tobytes() == tf.target.tobytes()
    X = planted_tilted.X_test
    a, b = tf.apply(X), back.apply(X)
    assert np.array_equal(a, b) and a.tobytes() == b.tobytes()
    # Deterministic file bytes.
    again = tf.save(tmp_path / "again.npz")
    assert again.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", ["inlp", "leace", "leace-plain"])
def test_file_is_usable_with_numpy_alone(
    tmp_path: Path, planted_tilted: Planted, fitted: dict[str, Transform], name: str
) -> None:
    tf = fitted[name]
    path = tf.save(tmp_path / "t.npz")
    with np.load(path, allow_pickle=False) as z:
        assert set(z.files) == {"header", "A", "b", "target"}
        h = json.loads(str(z["header"]))
        A, b, t = z["A"], z["b"], z["target"]
    assert h["format"] == FORMAT and h["method"] == tf.method and h["dim"] == 64
    assert h["has_target"] == (tf.target is not None) and (t.shape == (0,)) == (not h["has_target"])
    assert set(h["sha256"]) == {"A", "b", "target"}
    ref = reference_apply(A, b, h["alpha"], t if h["has_target"] else None, h["beta"], planted_tilted.X_test)
    np.testing.assert_allclose(tf.apply(planted_tilted.X_test), ref, rtol=1e-6, atol=1e-6)


def _rewrite(path: Path, out: Path, **changes: np.ndarray) -> Path:
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    members.update(changes)
    np.savez(out, **members)
    return out


def test_modified_file_fails_checksum(tmp_path: Path, fitted: dict[str, Transform]) -> None:
    path = fitted["inlp"].save(tmp_path / "t.npz")
    with np.load(path) as z:
        A, b, t = z["A"].copy(), z["b"].copy(), z["target"].copy()
    A[3, 5] += 1e-9
    with pytest.raises(ValueError, match=r"corrupt or modified.*'A'"):
        DebiasTransform.load(_rewrite(path, tmp_path / "a.npz", A=A))
    with pytest.raises(ValueError, match=r"'b'"):
        DebiasTransform.load(_rewrite(path, tmp_path / "b.npz", b=b + 1.0))
    with pytest.raises(ValueError, match=r"'target'"):
        DebiasTransform.load(_rewrite(path, tmp_path / "c.npz", target=-t))
    with pytest.raises(ValueError, match="float64"):
        DebiasTransform.load(_rewrite(path, tmp_path / "d.npz", A=A.astype(np.float32)))
    # Flipped bytes inside the archive (corruption, not a rewrite).
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError):
        DebiasTransform.load(bad)


def test_not_a_transform(tmp_path: Path, fitted: dict[str, Transform]) -> None:
    rnd = tmp_path / "random.npz"
    np.savez(rnd, x=np.random.default_rng(0).standard_normal((3, 3)))
    with pytest.raises(ValueError, match=r"not a fairsets debias transform.*missing member"):
        DebiasTransform.load(rnd)
    path = fitted["inlp"].save(tmp_path / "t.npz")
    with np.load(path) as z:
        header = json.loads(str(z["header"]))
    header["format"] = "something-else/9"
    with pytest.raises(ValueError, match="something-else"):
        DebiasTransform.load(_rewrite(path, tmp_path / "f.npz", header=np.array(json.dumps(header))))
    text = tmp_path / "text.npz"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a fairsets debias transform"):
        DebiasTransform.load(text)
    single = tmp_path / "single.npy"
    np.save(single, np.ones(3))
    with pytest.raises(ValueError, match="single array"):
        DebiasTransform.load(single)
    obj = tmp_path / "obj.npz"
    np.savez(obj, header=np.array([{"a": 1}], dtype=object), A=np.eye(2), b=np.zeros(2), target=np.zeros(0))
    with pytest.raises(ValueError, match="not a fairsets debias transform"):
        DebiasTransform.load(obj)
    with pytest.raises(FileNotFoundError):
        DebiasTransform.load(tmp_path / "missing.npz")


def test_failed_save_leaves_previous_file(tmp_path: Path, fitted: dict[str, Transform]) -> None:
    path = fitted["inlp"].save(tmp_path / "t.npz")
    before = path.read_bytes()
    broken = DebiasTransform(method="inlp", A=np.eye(64), b=np.zeros(64))
    object.__setattr__(broken, "meta", {"bad": object()})  # not JSON: save fails half-way
    with pytest.raises(TypeError):
        broken.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]


def test_slerp_is_what_apply_uses(planted_tilted: Planted, fitted: dict[str, Transform]) -> None:
    tf = fitted["leace-plain"]
    X = planted_tilted.X_test
    expected = slerp(X, X @ tf.A.T + tf.b, tf.alpha).astype(np.float32)
    assert np.array_equal(tf.apply(X), expected)


def test_import_is_light() -> None:
    code = (
        "import sys, fairsets.debias\n"
        "heavy = [m for m in ('torch', 'sklearn', 'concept_erasure') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
