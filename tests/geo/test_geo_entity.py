"""Entity-presence filter (GeoProfiler §3.2, A.3): planted images, a real random-weight CLIP, the SVM.

The "entity" is a large red disc drawn on textured backgrounds; images without it show the
background alone or a smaller square in another colour. Eight countries: six in-distribution ones
share one background palette, the two held out (CHL, NZL) use another, so the OOD test set is
really out of distribution. open_clip ViT-B-32 with random weights (``--pretrained none``, nothing
is downloaded) embeds every image once per module (into an embedding cache the CLI test reuses).
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageDraw
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.geo.entity import (
    DEFAULT_C_GRID,
    FORMAT,
    AnnotatedEmbeddings,
    EntityPresenceClassifier,
    TrainResult,
    binary_metrics,
    embed_annotations,
    embed_images,
    embedding_cache,
    filter_dataset,
    fit_classifier,
    fit_entity_classifier,
    load_annotations,
    parse_present,
    split_annotations,
)

runner = CliRunner()

ID_COUNTRIES = ("FRA", "KEN", "IND", "BRA", "USA", "JPN")
OOD_COUNTRIES = ("CHL", "NZL")
# How the CSV names the countries (codes and names, any case): all normalise to ISO3.
WRITTEN = {"FRA": "France", "KEN": "Kenya", "IND": "IND", "BRA": "brazil", "USA": "United States",
           "JPN": "JPN", "CHL": "Chile", "NZL": "nzl"}  # fmt: skip
PER_ID_COUNTRY = 20
PER_OOD_COUNTRY = 16
ID_TEST_SIZE = 40
ID_PALETTE = [(40, 90, 40), (60, 60, 120), (120, 100, 70), (30, 110, 110)]
OOD_PALETTE = [(110, 60, 120), (100, 100, 100), (150, 140, 50)]


def _image(rng: np.random.Generator, present: bool, ood: bool) -> Image.Image:
    palette = OOD_PALETTE if ood else ID_PALETTE
    base = np.array(palette[rng.integers(len(palette))], float) + rng.normal(0, 20, 3)
    pixels = np.clip(base + rng.normal(0, 25, (64, 64, 3)), 0, 255).astype(np.uint8)
    im = Image.fromarray(pixels)
    draw = ImageDraw.Draw(im)
    if present:
        r = int(rng.integers(14, 22))
        cx, cy = (int(v) for v in rng.integers(r, 64 - r, 2))
        red = tuple(int(v) for v in np.clip(np.array([220, 30, 30]) + rng.normal(0, 12, 3), 0, 255))
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=red)
    elif rng.random() < 0.6:
        s = int(rng.integers(10, 18))
        x, y = (int(v) for v in rng.integers(0, 64 - s, 2))
        draw.rectangle(
            [x, y, x + s, y + s], fill=[(30, 30, 220), (240, 240, 240), (20, 20, 20)][rng.integers(3)]
        )
    return im


def _png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def vlm() -> Any:
    """open_clip ViT-B-32 with random weights: real code, no download."""
    for module in ("torch", "open_clip", "sklearn"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install 'fairsets[vlm]')")
    from fairsets.models import load_vlm

    return load_vlm("ViT-B-32", "none")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The annotation CSV (152 good rows + 4 bad ones) and the truth about each image."""
    root = tmp_path_factory.mktemp("entity")
    (root / "imgs").mkdir()
    rng = np.random.default_rng(7)
    spellings = [("1", "0"), ("yes", "no"), ("True", "false")]
    lines = ["image,present,country,entity"]
    truth: dict[str, bool] = {}
    for iso3 in ID_COUNTRIES + OOD_COUNTRIES:
        ood = iso3 in OOD_COUNTRIES
        for i in range(PER_OOD_COUNTRY if ood else PER_ID_COUNTRY):
            present = i % 2 == 0
            rel = f"imgs/{iso3}_{i:02d}.png"
            (root / rel).write_bytes(_png(_image(rng, present, ood)))
            truth[rel] = present
            yes, no = spellings[i % 3]
            shown = str(root / rel) if i == 3 else rel  # an absolute path too
            lines.append(f"{shown},{yes if present else no},{WRITTEN[iso3]},balloon")
    (root / "imgs" / "broken.png").write_bytes(b"this is not an image")
    shutil.copy(root / "imgs" / "FRA_00.png", root / "imgs" / "copy_of_FRA_00.png")
    lines += [
        "imgs/missing.png,1,France,balloon",
        "imgs/broken.png,0,Kenya,balloon",
        "imgs/copy_of_FRA_00.png,1,France,balloon",
        ",0,Kenya,balloon",
    ]
    csv_path = root / "annotations.csv"
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"root": root, "csv": csv_path, "truth": truth, "lines": len(lines)}


@pytest.fixture(scope="module")
def cache_dir(planted: dict[str, Any]) -> Path:
    return planted["root"] / "cache"


@pytest.fixture(scope="module")
def embedded(planted: dict[str, Any], vlm: Any, cache_dir: Path) -> AnnotatedEmbeddings:
    """Every annotated image embedded once (and cached for the CLI test)."""
    ann = load_annotations(planted["csv"])
    return embed_annotations(ann, vlm, batch_size=32, cache=embedding_cache(cache_dir, vlm))


@pytest.fixture(scope="module")
def trained(embedded: AnnotatedEmbeddings) -> TrainResult:
    return fit_entity_classifier(
        embedded, ood_countries=list(OOD_COUNTRIES), id_test_size=ID_TEST_SIZE, seed=0
    )


# ------------------------------------------------------------------------------------ annotations
def test_parse_present_accepts_the_documented_spellings_only() -> None:
    for text in ("1", "true", "TRUE", "yes", " Yes "):
        assert parse_present(text) is True
    for text in ("0", "false", "no", "No"):
        assert parse_present(text) is False
    for bad in ("", "maybe", "2", "present"):
        with pytest.raises(ValueError, match="present must be"):
            parse_present(bad)


def test_load_annotations_normalises_countries_and_rejects_missing_images(planted: dict[str, Any]) -> None:
    ann = load_annotations(planted["csv"])
    n_good = len(ID_COUNTRIES) * PER_ID_COUNTRY + len(OOD_COUNTRIES) * PER_OOD_COUNTRY
    assert ann.entity == "balloon" and ann.has_country
    # broken.png and the copy exist as files: they are rejected later, when read
    assert len(ann.rows) == n_good + 2
    assert {r.country for r in ann.rows} == set(ID_COUNTRIES + OOD_COUNTRIES)
    by_image = {r.image: r for r in ann.rows}
    for rel, present in planted["truth"].items():
        assert by_image[planted["root"] / rel].present is present
    reasons = {r["image"]: r["reason"] for r in ann.rejected}
    assert reasons["imgs/missing.png"].startswith("image not found")
    assert reasons[""] == "no image path"
    assert len(ann.rejected) == 2
    assert all(r["line"] > 1 for r in ann.rejected)


def test_bad_present_value_is_an_error_naming_the_row(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(Image.new("RGB", (8, 8))))
    csv_path = tmp_path / "ann.csv"
    csv_path.write_text("image,present\na.png,1\na.png,maybe\na.png,perhaps\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"line 3 \(image 'a.png'\): present must be .* got 'maybe' \(and 1 more"
    ):
        load_annotations(csv_path)


def test_unknown_country_and_missing_columns_are_errors(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(Image.new("RGB", (8, 8))))
    bad_country = tmp_path / "c.csv"
    bad_country.write_text("image,present,country\na.png,1,Atlantis\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 .*unknown country 'Atlantis'"):
        load_annotations(bad_country)
    no_label = tmp_path / "n.csv"
    no_label.write_text("image,label\na.png,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing column.*present"):
        load_annotations(no_label)
    two = tmp_path / "two.csv"
    two.write_text("image,present,entity\na.png,1,house\na.png,0,car\n", encoding="utf-8")
    with pytest.raises(ValueError, match="several entities"):
        load_annotations(two)
    ann = load_annotations(two, entity="Car")
    assert [r.present for r in ann.rows] == [False] and ann.other_entity == 1


def test_embedding_rejects_undecodable_and_duplicate_images(
    embedded: AnnotatedEmbeddings, planted: dict[str, Any], vlm: Any, cache_dir: Path
) -> None:
    n_good = len(planted["truth"])
    assert embedded.X.shape == (n_good, vlm.embed_dim) and np.isfinite(embedded.X).all()
    reasons = {r["image"]: r["reason"] for r in embedded.rejected}
    assert reasons["imgs/broken.png"].startswith("image does not decode")
    fra0_line = next(r.line for r in embedded.rows if r.image.name == "FRA_00.png")
    assert reasons["imgs/copy_of_FRA_00.png"] == f"same image as line {fra0_line}"
    # every row of the CSV is either used or rejected with a reason: nothing is lost silently
    assert len(embedded.rows) + len(embedded.rejected) == planted["lines"] - 1
    assert all(r["reason"] for r in embedded.rejected)
    # the cache gives back the same vectors without running the model
    again = embed_images(
        [r.image for r in embedded.rows], vlm, cache=embedding_cache(cache_dir, vlm), batch_size=32
    )
    assert again.computed == 0 and not again.errors
    np.testing.assert_array_equal(again.vectors, embedded.X)


# ------------------------------------------------------------------------------------------- split
def _synthetic(n_countries: int = 12, seed: int = 3) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    codes = ["FRA", "KEN", "IND", "BRA", "USA", "JPN", "CHN", "CHL", "NZL", "PHL", "ESP", "EGY"][:n_countries]
    countries = [codes[i] for i in rng.integers(0, n_countries, 600)]
    labels = rng.random(600) < 0.4
    return labels, countries


def test_split_holds_out_named_countries_and_stratifies_the_id_test() -> None:
    y, cs = _synthetic()
    s = split_annotations(
        y, cs, ood_countries=["China", "chl", "NZL", "Philippines", "ESP"], id_test_size=100
    )
    assert s.ood_countries == ("CHL", "CHN", "ESP", "NZL", "PHL")
    held = {"CHL", "CHN", "ESP", "NZL", "PHL"}
    assert set(s.ood_test.tolist()) == {i for i, c in enumerate(cs) if c in held}
    assert len(s.id_test) == 100 and not any(cs[i] in held for i in s.id_test)
    everything = np.concatenate([s.train, s.id_test, s.ood_test])
    assert sorted(everything.tolist()) == list(range(len(y)))  # disjoint and complete
    pool = np.setdiff1d(np.arange(len(y)), s.ood_test)
    assert abs(y[s.id_test].mean() - y[pool].mean()) <= 0.01  # stratified by label
    again = split_annotations(y, cs, ood_countries=["CHN", "CHL", "NZL", "PHL", "ESP"], id_test_size=100)
    np.testing.assert_array_equal(again.id_test, s.id_test)
    other = split_annotations(y, cs, ood_countries=list(held), id_test_size=100, seed=1)
    assert not np.array_equal(other.id_test, s.id_test)


def test_split_seeded_choice_of_countries_holds_15_to_20_percent() -> None:
    y, cs = _synthetic()
    for k in (None, 2):
        s = split_annotations(y, cs, n_ood_countries=k, id_test_size=100, seed=5)
        share = len(s.ood_test) / len(y)
        assert 0.15 <= share <= 0.20, (k, share, s.ood_countries)
        assert k is None or len(s.ood_countries) == k
        assert 0 < y[s.ood_test].sum() < len(s.ood_test)
        np.testing.assert_array_equal(
            split_annotations(y, cs, n_ood_countries=k, id_test_size=100, seed=5).ood_test, s.ood_test
        )
    no_country = split_annotations(y, None, id_test_size=100)
    assert no_country.ood_test.size == 0 and no_country.ood_countries == ()
    assert split_annotations(y, cs, ood_countries=[], id_test_size=100).ood_test.size == 0


def test_split_refuses_impossible_requests() -> None:
    y, cs = _synthetic()
    with pytest.raises(ValueError, match="not both"):
        split_annotations(y, cs, ood_countries=["CHN"], n_ood_countries=1)
    with pytest.raises(ValueError, match="unknown held-out country 'Atlantis'"):
        split_annotations(y, cs, ood_countries=["Atlantis"])
    with pytest.raises(ValueError, match="none of the held-out countries"):
        split_annotations(y, cs, ood_countries=["AUS"])
    with pytest.raises(ValueError, match="too few rows for training"):
        split_annotations(y, cs, id_test_size=599)
    with pytest.raises(ValueError, match="n_ood_countries must be between 1 and 11"):
        split_annotations(y, cs, n_ood_countries=12)


def test_binary_metrics_counts_and_f1_of_positives() -> None:
    m = binary_metrics([1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0])
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (2, 1, 1, 2)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3) and m["balanced_accuracy"] == pytest.approx(2 / 3)
    assert binary_metrics([1, 0], [0, 0])["f1"] == 0.0


# ------------------------------------------------------------------------------------- classifier
def test_f1_on_id_and_ood_is_far_above_a_label_shuffled_control(
    trained: TrainResult, embedded: AnnotatedEmbeddings
) -> None:
    split = trained.split
    assert split.ood_countries == tuple(sorted(OOD_COUNTRIES))
    assert len(split.id_test) == ID_TEST_SIZE
    assert len(split.ood_test) == len(OOD_COUNTRIES) * PER_OOD_COUNTRY
    m_id, m_ood = trained.metrics["id"], trained.metrics["ood"]
    assert m_id is not None and m_ood is not None

    X, y = embedded.X, embedded.labels
    rng = np.random.default_rng(0)
    shuffled: dict[str, list[dict[str, Any]]] = {"id": [], "ood": []}
    for seed in range(10):
        y_shuffled = rng.permutation(y[split.train])
        control = fit_classifier(X[split.train], y_shuffled, entity="balloon", seed=seed)
        pred = control.predict(X)
        for key, idx in (("id", split.id_test), ("ood", split.ood_test)):
            shuffled[key].append(binary_metrics(y[idx], pred[idx]))
    ctrl = {
        key: {m: float(np.mean([r[m] for r in runs])) for m in ("f1", "balanced_accuracy")}
        for key, runs in shuffled.items()
    }
    print(
        f"\nentity F1: ID {m_id['f1']:.3f} (bal. acc. {m_id['balanced_accuracy']:.3f}), "
        f"OOD {m_ood['f1']:.3f} (bal. acc. {m_ood['balanced_accuracy']:.3f}); shuffled-label control: "
        f"ID F1 {ctrl['id']['f1']:.3f} / bal. acc. {ctrl['id']['balanced_accuracy']:.3f}, "
        f"OOD F1 {ctrl['ood']['f1']:.3f} / bal. acc. {ctrl['ood']['balanced_accuracy']:.3f}; "
        f"C={trained.classifier.C:g}"
    )
    # the control (mean of 10 label shuffles) is at chance: balanced accuracy and F1 about 0.5 (the
    # classes are balanced)
    for key in ("id", "ood"):
        assert abs(ctrl[key]["balanced_accuracy"] - 0.5) <= 0.1, ctrl
        assert ctrl[key]["f1"] <= 0.65, ctrl
    assert m_id["f1"] >= 0.85 and m_id["f1"] - ctrl["id"]["f1"] >= 0.25
    assert m_ood["f1"] >= 0.75 and m_ood["f1"] - ctrl["ood"]["f1"] >= 0.25
    # the report agrees with the classifier's record and with its own predictions
    meta = trained.classifier.meta
    assert meta["metrics"] == trained.metrics
    assert meta["split"]["train"]["n"] == len(split.train)
    assert meta["cv"]["grid"] == list(DEFAULT_C_GRID) and len(meta["cv"]["scores"]) == len(DEFAULT_C_GRID)
    preds = [p for p in trained.report["predictions"] if p["set"] == "id"]
    assert binary_metrics([p["present"] for p in preds], [p["predicted"] for p in preds]) == m_id


def test_saved_classifier_loads_with_identical_decisions_and_bytes(
    trained: TrainResult, embedded: AnnotatedEmbeddings, vlm: Any, tmp_path: Path
) -> None:
    clf = trained.classifier
    path = clf.save(tmp_path / "balloon.npz")
    loaded = EntityPresenceClassifier.load(path)
    np.testing.assert_array_equal(loaded.decision_function(embedded.X), clf.decision_function(embedded.X))
    np.testing.assert_array_equal(loaded.predict(embedded.X), clf.predict(embedded.X))
    assert loaded.header() == clf.header()
    assert loaded.entity == "balloon" and loaded.dim == vlm.embed_dim
    assert loaded.encoder["model_id"] == vlm.model_id and loaded.encoder["spec"] == "open_clip:ViT-B-32"
    assert loaded.encoder["pretrained"] == "none"
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["header"]))
        assert header["format"] == FORMAT and header["fairsets_version"]
        x = embedded.X.astype(np.float64)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        by_hand = ((x - z["mean"]) / z["scale"]) @ z["coef"] + z["intercept"][0]  # the documented recipe
    np.testing.assert_allclose(by_hand, clf.decision_function(embedded.X), rtol=0, atol=1e-9)
    # deterministic: saving again, and fitting again with the same seed, give the same bytes
    assert clf.save(tmp_path / "again.npz").read_bytes() == path.read_bytes()
    refit = fit_entity_classifier(
        embedded, ood_countries=list(OOD_COUNTRIES), id_test_size=ID_TEST_SIZE, seed=0
    )
    assert refit.classifier.save(tmp_path / "refit.npz").read_bytes() == path.read_bytes()
    assert not list(tmp_path.glob(".*tmp-*"))


def _rewrite_member(path: Path, name: str, array: np.ndarray) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    members[f"{name}.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


def test_modified_or_foreign_files_are_refused(trained: TrainResult, tmp_path: Path) -> None:
    path = trained.classifier.save(tmp_path / "c.npz")
    coef = trained.classifier.coef.copy()
    coef[0] += 1e-6
    _rewrite_member(path, "coef", coef)
    with pytest.raises(ValueError, match="corrupt or modified: sha256 of array 'coef'"):
        EntityPresenceClassifier.load(path)
    other = tmp_path / "other.npz"
    np.savez(other, header=np.array(json.dumps({"format": "fairsets.debias/1"})), A=np.eye(2))
    with pytest.raises(ValueError, match="not a fairsets entity classifier"):
        EntityPresenceClassifier.load(other)
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a fairsets entity classifier"):
        EntityPresenceClassifier.load(tmp_path / "junk.npz")
    with pytest.raises(FileNotFoundError):
        EntityPresenceClassifier.load(tmp_path / "absent.npz")


def test_other_dimensions_and_encoders_are_refused(
    trained: TrainResult, embedded: AnnotatedEmbeddings, vlm: Any, planted: dict[str, Any], tmp_path: Path
) -> None:
    clf = trained.classifier
    with pytest.raises(
        ValueError, match=rf"takes {vlm.embed_dim}-dim embeddings .* got {vlm.embed_dim - 1}-dim"
    ):
        clf.decision_function(embedded.X[:, :-1])
    with pytest.raises(ValueError, match="trained on embeddings of open_clip:ViT-B-32:none, not hf:other"):
        clf.decision_function(embedded.X, model_id="hf:other")
    with pytest.raises(ValueError, match="non-finite"):
        clf.decision_function(np.full((1, vlm.embed_dim), np.nan))
    foreign = EntityPresenceClassifier(
        entity="balloon", mean=clf.mean, scale=clf.scale, coef=clf.coef, intercept=clf.intercept,
        encoder={**clf.encoder, "model_id": "open_clip:ViT-B-16:openai"},
    )  # fmt: skip
    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"image_path": [str(planted["root"] / "imgs" / "FRA_00.png")]}), data)
    with pytest.raises(ValueError, match="trained on embeddings of open_clip:ViT-B-16:openai"):
        filter_dataset(data, foreign, vlm, tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()
    res = filter_dataset(data, foreign, vlm, tmp_path / "o.parquet", allow_other_encoder=True)
    assert res.rows == 1 and res.errors == 0


# ----------------------------------------------------------------------------------------- filter
def _filter_input(planted: dict[str, Any], n: int = 10) -> tuple[list[str], list[bool]]:
    """``n`` good images, half from KEN and half from held-out CHL, and their labels."""
    rels = [f"imgs/KEN_{i:02d}.png" for i in range(n // 2)]
    rels += [f"imgs/CHL_{i:02d}.png" for i in range(n - n // 2)]
    return rels, [planted["truth"][r] for r in rels]


def test_filter_keeps_every_row_and_marks_unreadable_images(
    trained: TrainResult, embedded: AnnotatedEmbeddings, vlm: Any, planted: dict[str, Any]
) -> None:
    rels, labels = _filter_input(planted)
    root = planted["root"]
    # Hugging Face's Image struct: bytes for some rows, a path relative to the file for others
    cells: list[dict[str, Any] | None] = [
        {"bytes": (root / r).read_bytes(), "path": None} if i % 2 else {"bytes": None, "path": r}
        for i, r in enumerate(rels)
    ]
    cells += [{"bytes": b"\x89PNG broken", "path": None}, {"bytes": None, "path": "imgs/gone.png"}, None]
    n = len(cells)
    src = root / "to_filter.parquet"
    pq.write_table(pa.table({"caption": [f"caption {i}" for i in range(n)], "image": cells}), src)
    out = root / "filtered.parquet"
    res = filter_dataset(src, trained.classifier, vlm, out, chunk_rows=4, batch_size=3)
    table = pq.read_table(out)
    assert table.column_names == ["caption", "image", "entity_present", "entity_score", "entity_error"]
    assert table.column("caption").to_pylist() == [f"caption {i}" for i in range(n)]  # all rows, in order
    present = table.column("entity_present").to_pylist()
    errors = table.column("entity_error").to_pylist()
    scores = table.column("entity_score").to_pylist()
    assert present[-3:] == [None, None, None] and scores[-3:] == [None, None, None]
    assert errors[-3].startswith("image does not decode")
    assert errors[-2].startswith("image not found") and "gone.png" in errors[-2]
    assert errors[-1] == "no image"
    assert all(e is None for e in errors[:-3]) and all(p is not None for p in present[:-3])
    assert (res.rows, res.errors, res.present + res.absent) == (n, 3, n - 3)
    assert res.computed == n - 3  # no cache: every readable image went through the model
    # the scores are the classifier's on these images' embeddings
    x_by_name = {r.image.name: x for r, x in zip(embedded.rows, embedded.X, strict=True)}
    want = trained.classifier.decision_function(np.stack([x_by_name[Path(r).name] for r in rels]))
    np.testing.assert_allclose(np.array(scores[:-3]), want, atol=1e-4)
    assert present[:-3] == [bool(s >= 0.0) for s in scores[:-3]]
    correct = sum(p == t for p, t in zip(present[:-3], labels, strict=True))
    assert correct >= 0.8 * len(labels)


def test_filter_drop_writes_rejects_with_reasons(
    trained: TrainResult, vlm: Any, planted: dict[str, Any], cache_dir: Path
) -> None:
    rels, _ = _filter_input(planted)
    paths = [*rels, "imgs/broken.png", "imgs/gone.png", None]
    src = planted["root"] / "to_filter.csv"
    lines = ["id,image_path"] + [f"{i},{p or ''}" for i, p in enumerate(paths)]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = planted["root"] / "kept.parquet"
    res = filter_dataset(src, trained.classifier, vlm, out, drop=True, cache=embedding_cache(cache_dir, vlm))
    assert res.rejects == planted["root"] / "kept.rejects.parquet"
    kept, rejects = pq.read_table(out), pq.read_table(res.rejects)
    assert kept.column("entity_present").to_pylist() == [True] * kept.num_rows
    assert kept.num_rows == res.present and rejects.num_rows == res.absent + res.errors
    assert sorted(kept.column("id").to_pylist() + rejects.column("id").to_pylist()) == list(range(len(paths)))
    assert rejects.column("source_row").to_pylist() == rejects.column("id").to_pylist()
    reasons = dict(
        zip(rejects.column("id").to_pylist(), rejects.column("reject_reason").to_pylist(), strict=True)
    )
    assert all(r.startswith(("entity absent: score", "unreadable image: ")) for r in reasons.values())
    n = len(rels)
    assert reasons[n] == "unreadable image: image does not decode: not a recognised image format"
    assert reasons[n + 1].startswith("unreadable image: image not found: ") and "gone.png" in reasons[n + 1]
    assert reasons[n + 2] == "unreadable image: no image"  # the empty CSV cell
    absent = [i for i in reasons if i < n]
    assert len(absent) == res.absent
    for i in absent:
        assert reasons[i].startswith("entity absent: score -") and reasons[i].endswith("< threshold 0")
    assert res.absent >= 1 and res.present >= 1
    assert res.computed == 0  # every readable image came from the module's cache


def test_filter_refuses_inputs_it_cannot_handle(trained: TrainResult, vlm: Any, tmp_path: Path) -> None:
    clf = trained.classifier
    no_image = tmp_path / "no_image.parquet"
    pq.write_table(pa.table({"url": ["http://127.0.0.1:9/a.png"]}), no_image)
    with pytest.raises(ValueError, match="no 'image' or 'image_path' column"):
        filter_dataset(no_image, clf, vlm, tmp_path / "o.parquet")
    done = tmp_path / "done.parquet"
    pq.write_table(pa.table({"image": ["a.png"], "entity_present": [True]}), done)
    with pytest.raises(ValueError, match=r"already has column.*entity_present"):
        filter_dataset(done, clf, vlm, tmp_path / "o.parquet")
    with pytest.raises(ValueError, match="must not overwrite the input"):
        filter_dataset(no_image, clf, vlm, no_image)
    with pytest.raises(ValueError, match=r"expected a \.parquet or \.csv file"):
        (tmp_path / "d.json").write_text("[]")
        filter_dataset(tmp_path / "d.json", clf, vlm, tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


# -------------------------------------------------------------------------------------------- CLI
def test_cli_entity_train_and_filter_end_to_end(
    trained: TrainResult, planted: dict[str, Any], cache_dir: Path, tmp_path: Path
) -> None:
    clf_path, report = tmp_path / "balloon.npz", tmp_path / "report.json"
    args = ["geo", "entity-train", str(planted["csv"]), "--entity", "balloon", "--model", "ViT-B-32",
            "--pretrained", "none", "--out", str(clf_path), "--ood-countries", "Chile,NZL",
            "--id-test-size", str(ID_TEST_SIZE), "--seed", "0", "--report", str(report),
            "--cache-dir", str(cache_dir)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "ID test" in result.stdout and "OOD test (CHL,NZL)" in result.stdout
    assert f"{trained.metrics['id']['f1']:.3f}" in result.stdout
    assert "4 annotated row(s) rejected" in result.stderr
    doc = json.loads(report.read_text())
    assert doc["metrics"] == trained.metrics and doc["entity"] == "balloon"
    assert {r["reason"].split(":")[0] for r in doc["rejected"]} >= {
        "image not found",
        "image does not decode",
    }
    # same annotations, embeddings (from the cache), split and seed: the same file, byte for byte
    assert clf_path.read_bytes() == trained.classifier.save(tmp_path / "api.npz").read_bytes()

    rels, _ = _filter_input(planted, n=4)
    cells = [str(planted["root"] / r) for r in (*rels, "imgs/broken.png", "imgs/gone.png")] + [None]
    data = tmp_path / "data.parquet"  # absolute paths: the data lives elsewhere
    pq.write_table(pa.table({"image": pa.array(cells, pa.string())}), data)
    out = tmp_path / "out.parquet"
    base = ["geo", "entity-filter", str(data), "--classifier", str(clf_path), "--cache-dir", str(cache_dir)]
    result = runner.invoke(app, [*base, "--out", str(out)])  # the encoder comes from the header
    assert result.exit_code == 0, result.output
    assert f"{len(cells)} row(s):" in result.stdout and "3 unreadable" in result.stdout
    assert pq.read_table(out).num_rows == len(cells)
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "kept.parquet"), "--drop"])
    assert result.exit_code == 0, result.output
    kept, rej = pq.read_table(tmp_path / "kept.parquet"), pq.read_table(tmp_path / "kept.rejects.parquet")
    assert kept.num_rows + rej.num_rows == len(cells) and rej.num_rows >= 3


def test_cli_bad_present_value_exits_with_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(Image.new("RGB", (8, 8))))
    csv_path = tmp_path / "ann.csv"
    csv_path.write_text("image,present,country\na.png,1,FRA\na.png,sometimes,FRA\n", encoding="utf-8")
    args = ["geo", "entity-train", str(csv_path), "--entity", "x", "--model", "ViT-B-32",
            "--pretrained", "none", "--out", str(tmp_path / "c.npz")]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert "line 3" in lines[0] and "'sometimes'" in lines[0] and lines[0].startswith("error:")
    assert not (tmp_path / "c.npz").exists()
    result = runner.invoke(app, [*args, "--ood-countries", "FRA", "--n-ood-countries", "1"])
    assert result.exit_code != 0 and "not both" in result.stderr


@pytest.mark.timeout(20)
def test_image_paths_that_are_not_regular_files_are_reasons_not_hangs(tmp_path):
    import os

    from fairsets.geo.entity.embedding import _read_item

    os.mkfifo(tmp_path / "pipe.png")
    assert _read_item("pipe.png", tmp_path) == (
        None,
        f"cannot read {tmp_path / 'pipe.png'}: not a regular file: it is a FIFO",
    )
    data, err = _read_item("/dev/zero", None)
    assert data is None and err == "cannot read /dev/zero: not a regular file: it is a character device"


def test_load_annotations_refuses_a_row_with_surplus_fields(tmp_path: Path) -> None:
    # "b, c.png" unquoted: present would read " c.png" and the country the 0
    (tmp_path / "a.csv").write_text("image,present\na.png,1\nb, c.png,0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.csv: line 3: 3 fields where the header has 2"):
        load_annotations(tmp_path / "a.csv")
