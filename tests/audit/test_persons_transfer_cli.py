"""`fairsets audit transfer` end to end on a planted annotation folder with real shard images.

The folder (:func:`person_tables.write_person_tables`) plants, per category, known numbers of
female-only and male-only images whose alt-text names it (plus images that must not count: mixed
ones, ``nursery``, unclear ones); tar shards beside it hold an image for every key, whose person box
is painted warm for women and cool for men, so the probe crops are cut, embedded (random-weight
CLIP, ``--pretrained none``) and cached for real. Every number is checked against a computation
written here: the counts from the plan, the probe sample from MD5s, ``d(c)`` with numpy from the
cached embeddings, the relations with numpy, the generated shares from the files written.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from person_tables import ImageSpec, write_person_tables
from PIL import Image
from typer.testing import CliRunner

from fairsets.cli import app

runner = CliRunner()

#: category → (female-only images, male-only images) naming it.
PLAN = {
    "nurse": (70, 30),
    "engineer": (12, 88),
    "teacher": (55, 60),
    "pilot": (25, 80),
    "baker": (3, 2),  # dropped by --min-count 100
}
CATEGORIES_TOML = """# test categories
[occupations]
categories = ["nurse", "engineer", "teacher"]

[more]
categories = ["pilot", "baker", "astronaut"]
"""
W, H = 640, 480
AREA = 0.05
SIDE = int((AREA * W * H) ** 0.5)


def _specs() -> list[ImageSpec]:
    specs = []
    for cat, (f, m) in PLAN.items():
        for i in range(f):
            alt = f"Portrait of a {cat} at work" if i % 2 else f"two {cat}s smiling"
            specs.append(ImageSpec(boxes=[("female", "white", AREA), ("unclear", None, 0.02)], alt=alt))
        for _ in range(m):
            specs.append(ImageSpec(boxes=[("male", "black", AREA)], alt=f"the {cat.upper()} of the year"))
    # must not count: mixed images, a word that only contains the category, unclear-only images
    specs += [ImageSpec(boxes=[("female", None, AREA), ("male", None, AREA)], alt="nurse and engineer")] * 9
    specs += [ImageSpec(boxes=[("female", None, AREA)], alt="a nursery school")] * 7
    specs += [ImageSpec(boxes=[("unclear", None, AREA)], alt="a pilot")] * 5
    specs += [ImageSpec(boxes=[("female", None, AREA)], alt=None)] * 3
    return specs


def _jpeg(colour: tuple[int, int, int], side: int) -> bytes:
    arr = np.full((H, W, 3), 235, np.uint8)
    arr[:side, :side] = colour
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _write_shards(ann: Path) -> dict[str, str]:
    """A tar per shard at the manifest's paths, an image per key; returns item → gender of kept boxes."""
    import pyarrow.parquet as pq

    manifest = json.loads((ann / "manifest.json").read_text())
    genders = {}
    for ref in manifest["inputs"]:
        shard = ref["name"]
        boxes = pq.read_table(ann / "boxes" / f"{shard}.parquet").to_pylist()
        attrs = {
            (r["key"], r["box_id"]): r["perceived_gender"]
            for r in pq.read_table(ann / "attributes" / "gender" / f"{shard}.parquet").to_pylist()
        }
        with tarfile.open(ref["path"], "w", format=tarfile.PAX_FORMAT) as tf:
            for n, key in enumerate(dict.fromkeys(b["key"] for b in boxes)):
                g = attrs.get((key, 0))
                tint = (n * 7) % 40
                colour = (220, 60 + tint, 40) if g == "female" else (30, 60 + tint, 210)
                for ext, data in (("jpg", _jpeg(colour, SIDE)), ("txt", b"alt")):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size, info.mtime = len(data), 1_700_000_000
                    tf.addfile(info, io.BytesIO(data))
        for b in boxes:
            g = attrs.get((b["key"], b["box_id"]))
            if b["kept"] and g in ("female", "male"):
                genders[f"{shard}/{b['key']}/{b['box_id']}"] = g
    return genders


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("transfer")
    ann = write_person_tables(base / "ann", _specs(), shard_size=200)
    genders = _write_shards(ann)
    cats = base / "cats.toml"
    cats.write_text(CATEGORIES_TOML)
    return base, ann, cats, genders


def _solid(colour, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 64), colour).save(path)


RED, BLUE = (220, 30, 30), (30, 30, 220)
#: category folder → (red images, blue images); the head says red = female, blue = male.
GEN = {"Nurse": (7, 3), "engineer": (2, 8), "teacher": (5, 5), "pilot": (1, 9)}


@pytest.fixture(scope="module")
def gender_head(planted, clip_vlm):
    from fairsets.annotate.heads.store import Head, write_head

    base = planted[0]
    e = np.asarray(clip_vlm.embed_images([Image.new("RGB", (64, 64), RED), Image.new("RGB", (64, 64), BLUE)]))
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    w = e[0] - e[1]
    head = Head("gender", ["female", "male"], "ViT-B-32", "none", np.stack([w / 2, -w / 2]), np.zeros(2))
    write_head(base / "gender-head.npz", head)
    return base / "gender-head.npz"


@pytest.fixture(scope="module")
def generated(planted):
    root = planted[0] / "generated"
    for folder, (red, blue) in GEN.items():
        for i in range(red):
            _solid(RED, root / folder / f"r{i:02d}.png")
        for i in range(blue):
            _solid(BLUE, root / folder / f"b{i:02d}.png")
    (root / "teacher" / "broken.png").write_bytes(b"not a png")
    return root


def _args(ann, cats, out, *extra):
    return ["audit", "transfer", str(ann), "--categories", str(cats), "--model", "ViT-B-32",
            "--pretrained", "none", "--min-count", "100", "--max-probe", "20", "--seed", "3",
            "--out", str(out), "-q", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def audited(planted, gender_head, generated, clip_vlm):
    base, ann, cats, _ = planted
    out = base / "out"
    extra = ["--generated", str(generated), "--gender-head", str(gender_head)]
    result = runner.invoke(app, _args(ann, cats, out, *extra))
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "transfer.json").read_text())


def test_data_bias_counts_match_the_plan(audited):
    _, doc = audited
    assert doc["schema"] == "fairsets.audit.transfer/2"
    data = doc["data_bias"]
    kept = {r["category"]: r for r in data["categories"]}
    assert list(kept) == ["nurse", "engineer", "teacher", "pilot"]  # the file's order
    for cat, row in kept.items():
        f, m = PLAN[cat]
        assert (row["female"], row["male"], row["n"]) == (f, m, f + m)
        assert row["bias"] == pytest.approx((f - m) / (f + m))
        assert row["share_female"] == pytest.approx(f / (f + m))
    f, m = PLAN["nurse"]  # the texts as _specs writes them, each phrase in its number of texts
    assert kept["nurse"]["matched_phrases"] == [
        {"phrase": "a nurse at", "count": f // 2},
        {"phrase": "two nurses smiling", "count": f - f // 2},
        {"phrase": "the nurse of", "count": m},
    ]
    dropped = {r["category"]: (r["female"], r["male"]) for r in data["dropped"]}
    assert dropped == {"baker": PLAN["baker"], "astronaut": (0, 0)}
    single = sum(f + m for f, m in PLAN.values()) + 7  # + the nursery images (female, with alt-text)
    assert data["n_single_gender"] == single
    s = doc["settings"]
    assert (
        s["categories"] == "cats.toml"
        and s["min_count"] == 100
        and s["template"] == "a photo of {a} {category}"
    )
    assert s["model"] == "ViT-B-32" and s["pretrained"] == "none"
    assert "/" not in json.dumps(s["categories"]) and doc["annotations"] == "ann"


def test_probe_is_the_seeded_md5_sample(audited, planted):
    _, doc = audited
    genders = planted[3]
    probe = doc["model_bias"]["probe"]
    for g in ("female", "male"):
        mine = sorted(
            (it for it, lab in genders.items() if lab == g),
            key=lambda it: (hashlib.md5(f"3/{it}".encode()).hexdigest(), it),
        )[:20]
        assert sorted(probe["items"][g]) == sorted(mine)
        assert probe["available"][g] == sum(1 for lab in genders.values() if lab == g)
        assert probe["used"][g] == 20
    assert probe["rejected"] == []


def test_model_bias_matches_numpy_on_the_cached_embeddings(audited, planted, clip_vlm):
    from fairsets.models.embedding_cache import EmbeddingCache

    _, doc = audited
    ann = planted[1]
    cache = EmbeddingCache.for_model(ann / ".fairsets" / "embeddings", clip_vlm)
    vecs = {item: v for (item, _sha), v in cache.load_images().items()}
    probe = doc["model_bias"]["probe"]
    F = np.array([vecs[i] for i in probe["items"]["female"]], dtype=np.float64)
    M = np.array([vecs[i] for i in probe["items"]["male"]], dtype=np.float64)
    F /= np.linalg.norm(F, axis=1, keepdims=True)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    rows = doc["model_bias"]["categories"]
    prompts = [r["prompt"] for r in rows]
    assert prompts == [
        "a photo of a nurse",
        "a photo of an engineer",
        "a photo of a teacher",
        "a photo of a pilot",
    ]
    t = np.asarray(clip_vlm.embed_texts(prompts), dtype=np.float64)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    for j, r in enumerate(rows):
        cf, cm = F @ t[j], M @ t[j]
        allc = np.concatenate([cf, cm])
        expected = (cf.mean() - cm.mean()) / np.sqrt(np.mean((allc - allc.mean()) ** 2))
        assert r["d"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    # the relation data → CLIP, by numpy
    x = np.array([r["bias"] for r in doc["data_bias"]["categories"]])
    y = np.array([r["d"] for r in rows])
    rel = doc["relations"]["data_clip"]["relation"]
    assert rel["n"] == 4 and rel["pearson_r"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)
    slope, icept = np.polyfit(x, y, 1)
    r2 = 1 - np.sum((y - slope * x - icept) ** 2) / np.sum((y - y.mean()) ** 2)
    assert rel["r2"] == pytest.approx(r2, abs=1e-9)
    cheb = rel["chebyshev"]
    assert [c["degree"] for c in cheb["in_sample"]] == [2]  # 4 points: degree 2 only (needs degree + 2)
    # leave-one-out (4 < 50 categories) trains on 3: the line is cross-validated, degree 2 is not
    loo = np.array([np.polyval(np.polyfit(np.delete(x, i), np.delete(y, i), 1), x[i]) for i in range(4)])
    assert cheb["cv"]["scheme"] == "leave-one-out" and cheb["cross_validated"] == []
    assert cheb["cv"]["r2_line"] == pytest.approx(1 - np.sum((y - loo) ** 2) / np.sum((y - y.mean()) ** 2))
    assert "4 categories" in cheb["warning"]


def test_generated_shares_and_relations(audited):
    _, doc = audited
    gen = doc["generated"]
    rows = {r["category"]: r for r in gen["prompts"]}
    assert set(rows) == {"nurse", "engineer", "teacher", "pilot"}
    assert rows["nurse"]["prompt"] == "Nurse"
    for folder, (red, blue) in GEN.items():
        r = rows[folder.lower()]
        assert (r["n"], r["female"], r["male"]) == (red + blue, red, blue)
        assert r["share_female"] == pytest.approx(red / (red + blue))
    assert gen["rejected"] == [
        {"path": "teacher/broken.png", "reason": "unreadable image (UnidentifiedImageError)"}
    ]
    assert gen["gender_head"]["encoder"] == "ViT-B-32"
    kept = doc["data_bias"]["categories"]
    x = np.array([r["bias"] for r in kept])
    share = np.array([rows[r["category"]]["share_female"] for r in kept])
    rel = doc["relations"]["data_generated"]["relation"]
    assert rel["pearson_r"] == pytest.approx(np.corrcoef(x, share)[0, 1], abs=1e-9)
    d = np.array([r["d"] for r in doc["model_bias"]["categories"]])
    rel2 = doc["relations"]["clip_generated"]["relation"]
    assert rel2["pearson_r"] == pytest.approx(np.corrcoef(d, share)[0, 1], abs=1e-9)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.links: list[str] = []
        self.cells: list[str] = []
        self.tags: set[str] = set()
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a.get("src") or "")
        for name in ("href", "src"):
            if a.get(name):
                self.links.append(a[name])
        self._in_cell = tag == "td"

    def handle_endtag(self, tag):
        self._in_cell = False

    def handle_data(self, data):
        if self._in_cell and data.strip():
            self.cells.append(data.strip())


def test_report_is_self_contained_with_every_table(audited):
    out, doc = audited
    assert (out / "scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = _Page()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    assert "script" not in page.tags and "link" not in page.tags
    assert page.srcs and all(s.startswith("data:image/png;base64,") for s in page.srcs)
    assert all(link.startswith("data:") for link in page.links)
    for cat in ("nurse", "engineer", "teacher", "pilot", "baker"):
        assert cat in page.cells, cat
    # a dropped category named in no image is counted, not listed row by row (the default list has
    # thousands of them); transfer.json lists it
    assert "astronaut" not in page.cells
    assert "1 of them are named in no single-gender" in " ".join((out / "report.html").read_text().split())
    assert any(r["category"] == "astronaut" and r["n"] == 0 for r in doc["data_bias"]["dropped"])
    for r in doc["data_bias"]["categories"]:
        assert f"{r['bias']:.3f}" in page.cells
    rel = doc["relations"]["data_clip"]["relation"]
    assert f"{rel['r2']:.3f}" in page.cells and f"{rel['pearson_r']:.3f}" in page.cells


def test_report_renders_in_headless_chromium(audited, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless Chromium on this machine (the report is checked by parsing above)")
    out, _ = audited
    shot = tmp_path / "report.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot}",
         "--window-size=1200,2400", (out / "report.html").as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    arr = np.asarray(Image.open(shot).convert("RGB"))
    assert arr.std() > 5  # text, tables and plots drew


def test_rerun_reuses_the_embedding_cache(audited, planted):
    base, ann, cats, _ = planted
    first = audited[1]["model_bias"]["probe"]
    parts = sorted((ann / ".fairsets" / "embeddings").rglob("part-*.parquet"))
    assert parts and first["computed"] == 40
    out = base / "again"
    result = runner.invoke(app, _args(ann, cats, out))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "transfer.json").read_text())
    assert doc["model_bias"]["probe"]["computed"] == 0
    assert sorted((ann / ".fairsets" / "embeddings").rglob("part-*.parquet")) == parts
    assert [r["d"] for r in doc["model_bias"]["categories"]] == [
        r["d"] for r in audited[1]["model_bias"]["categories"]
    ]
    assert doc["generated"] is None and set(doc["relations"]) == {"data_clip"}


@pytest.fixture
def no_model(monkeypatch):
    """Any model load fails loudly: the errors below must come before one."""
    import fairsets.models

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(fairsets.models, "load_vlm", boom)


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_errors_are_one_line_before_any_model_loads(planted, generated, gender_head, tmp_path, no_model):
    _, ann, cats, _ = planted
    out = tmp_path / "out"
    assert "not an annotation folder" in _error(runner.invoke(app, _args(tmp_path / "missing", cats, out)))
    bad = tmp_path / "bad.toml"
    bad.write_text("[jobs]\ncategories = []\n")
    assert "non-empty list" in _error(runner.invoke(app, _args(ann, bad, out)))
    assert "no such category file" in _error(runner.invoke(app, _args(ann, tmp_path / "none.toml", out)))
    msg = _error(runner.invoke(app, _args(ann, cats, out, "--template", "a photo of {job}")))
    assert "{category}" in msg
    msg = _error(runner.invoke(app, _args(ann, cats, out, "--template", "a {category} {x}")))
    assert "only {category} and {a}" in msg
    msg = _error(runner.invoke(app, _args(ann, cats, out, "--generated", str(generated))))
    assert "--gender-head" in msg
    wrong = tmp_path / "gen"
    _solid(RED, wrong / "astronauts" / "a.png")
    msg = _error(
        runner.invoke(
            app, _args(ann, cats, out, "--generated", str(wrong), "--gender-head", str(gender_head))
        )
    )
    assert "'astronauts' is named after no category" in msg
    (wrong / "astronauts").rename(wrong / "pilot")
    (wrong / "pilot" / "a.png").rename(wrong / "pilot" / "a.txt")
    msg = _error(
        runner.invoke(
            app, _args(ann, cats, out, "--generated", str(wrong), "--gender-head", str(gender_head))
        )
    )
    assert "holds no image" in msg
    not_head = tmp_path / "head.npz"
    not_head.write_bytes(b"nope")
    msg = _error(
        runner.invoke(
            app, _args(ann, cats, out, "--generated", str(generated), "--gender-head", str(not_head))
        )
    )
    assert "head" in msg
    unlabelled = write_person_tables(tmp_path / "nolabels", _specs()[:10], shard_size=200)
    shutil.rmtree(unlabelled / "attributes" / "gender")
    assert "no gender labels" in _error(runner.invoke(app, _args(unlabelled, cats, out)))
    assert "no gender labels" in _error(runner.invoke(app, _args(ann, cats, out, "--probe", str(unlabelled))))
    assert "neither an annotation folder" in _error(
        runner.invoke(app, _args(ann, cats, out, "--probe", str(tmp_path)))
    )
    assert not out.exists()


def test_generate_refuses_without_cuda_or_diffusers(planted, gender_head, tmp_path, no_model):
    import importlib.util

    import torch

    if importlib.util.find_spec("diffusers") is not None and torch.cuda.is_available():
        pytest.skip("diffusers and a CUDA device are both here: nothing to refuse")
    _, ann, cats, _ = planted
    msg = _error(runner.invoke(app, _args(ann, cats, tmp_path / "out", "--generate", "sd-model")))
    assert "--generated" in msg
    args = _args(ann, cats, tmp_path / "out", "--generate", "sd-model", "--generated", str(tmp_path / "gen"),
                 "--gender-head", str(gender_head))  # fmt: skip
    msg = _error(runner.invoke(app, args))
    assert re.search(r"--generate needs (diffusers|a CUDA device)", msg), msg
    assert not (tmp_path / "gen").exists()


def test_probe_from_a_published_dataset(planted, two_state_out, tmp_path, clip_vlm):
    """--probe DATASET: the dataset's gender column (any case) picks F and M; d(c) by numpy from its cache."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vlm_fixtures import copy_dataset

    from fairsets.audit.dataset import open_dataset
    from fairsets.models.embedding_cache import EmbeddingCache

    _, ann, cats, _ = planted
    ds_path = copy_dataset(two_state_out, tmp_path / "ds")
    truth = {}
    for table_path in (ds_path / "metadata").rglob("*.parquet"):
        rows = pq.read_table(table_path).to_pylist()
        for r in rows:  # one person per state: make Assam's the men
            r["gender"] = "Male" if r["state"] == "Assam" else "FEMALE"
            truth[r["key"]] = r["gender"].lower()
        pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(table_path)), table_path)
    out = tmp_path / "out"
    result = runner.invoke(app, _args(ann, cats, out, "--probe", str(ds_path)))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "transfer.json").read_text())
    probe = doc["model_bias"]["probe"]
    assert probe["kind"] == "dataset" and doc["settings"]["probe"] == "ds"
    ds = open_dataset(ds_path)
    rows = ds.rows(ds.default_variant(), ds.splits(ds.default_variant()))
    for g in ("female", "male"):
        have = [r["key"] for r in rows if truth[r["key"]] == g]
        assert probe["available"][g] == len(have) and 0 < probe["used"][g] == min(20, len(have))
        assert all(truth[k] == g for k in probe["items"][g])
    cache = EmbeddingCache.for_dataset(ds, clip_vlm)
    vecs = {key: v for (key, _sha), v in cache.load_images().items()}
    F = np.array([vecs[k] for k in probe["items"]["female"]], dtype=np.float64)
    M = np.array([vecs[k] for k in probe["items"]["male"]], dtype=np.float64)
    F /= np.linalg.norm(F, axis=1, keepdims=True)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    t = np.asarray(clip_vlm.embed_texts([r["prompt"] for r in doc["model_bias"]["categories"]]), np.float64)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    for j, r in enumerate(doc["model_bias"]["categories"]):
        allc = np.concatenate([F @ t[j], M @ t[j]])
        expected = ((F @ t[j]).mean() - (M @ t[j]).mean()) / allc.std()
        assert r["d"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    # a dataset without the column, or with one gender only, is refused before a model loads
    msg = _error(
        runner.invoke(app, _args(ann, cats, out, "--probe", str(ds_path), "--probe-attribute", "nope"))
    )
    assert "no column 'nope'" in msg
    msg = _error(
        runner.invoke(app, _args(ann, cats, out, "--probe", str(ds_path), "--probe-attribute", "state"))
    )
    assert "no female or male value" in msg


def test_a_probe_box_whose_image_is_gone_is_left_out_with_its_reason(audited, planted, tmp_path):
    _, ann, cats, _ = planted
    copy = tmp_path / "ann"
    shutil.copytree(ann, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    for ref in manifest["inputs"]:  # the copy's shards are its own
        ref["path"] = str(copy / Path(ref["path"]).name)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    gone = audited[1]["model_bias"]["probe"]["items"]["female"][0]
    shard, key, _ = gone.split("/")
    tar_path = copy / f"{shard}.tar"
    with tarfile.open(tar_path) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf.getmembers() if not m.name.startswith(key + ".")]
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tf:
        for m, data in members:
            tf.addfile(m, io.BytesIO(data))
    out = tmp_path / "out"
    result = runner.invoke(app, _args(copy, cats, out))
    assert result.exit_code == 0, result.output
    probe = json.loads((out / "transfer.json").read_text())["model_bias"]["probe"]
    assert [r["item"] for r in probe["rejected"]] == [gone]
    assert "not a readable image" in probe["rejected"][0]["reason"]
    assert probe["sampled"]["female"] == 20 and probe["used"]["female"] == 19
    assert gone not in probe["items"]["female"] and probe["used"]["male"] == 20


def test_too_few_kept_categories_give_a_reason_not_a_crash(audited, planted, tmp_path):
    _, ann, cats, _ = planted
    out = tmp_path / "out"
    args = [a if a != "100" else "101" for a in _args(ann, cats, out)]  # keeps teacher (115), pilot (105)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "transfer.json").read_text())
    assert [r["category"] for r in doc["data_bias"]["categories"]] == ["teacher", "pilot"]
    rel = doc["relations"]["data_clip"]
    assert rel["relation"] is None and "2 usable pairs" in rel["reason"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "not computed" in page and "2 usable pairs" in page


# --- issue 25: definitions, race transfer, the per-group table, exclusions ---------------------------


def test_definitions_block_states_every_rule(audited):
    from fairsets.audit.persons.words import default_exclusions_path

    out, doc = audited
    defs = doc["definitions"]
    for key in ("group_rule", "images", "denominator", "match", "exclusions", "min_count", "bias",
                "share_female", "d", "relation.r2", "relation.chebyshev.cross_validated",
                "relation.cv_scheme", "race.share", "race.d_g"):  # fmt: skip
        assert defs.get(key), key
    sha = hashlib.sha256(default_exclusions_path().read_bytes()).hexdigest()
    assert sha in defs["exclusions"] and doc["settings"]["exclusions_sha256"] == sha
    assert "blank" in defs["denominator"] and "squared Pearson" in defs["relation.r2"]
    assert "at least 100" in defs["min_count"] and "leave-one-out" in defs["relation.cv_scheme"]
    page = _Page()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    html = (out / "report.html").read_text(encoding="utf-8")
    assert sha in html and "cross-validated (leave-one-out)" in page.cells


def test_race_transfer_per_group_matches_numpy(audited, planted, clip_vlm):
    from fairsets.models.embedding_cache import EmbeddingCache

    _, doc = audited
    race = doc["race"]
    assert doc["settings"]["race"] is True and race["reason"] is None
    data = race["data_bias"]
    # planted: women's boxes are white, men's black; every other image has no race label
    assert data["groups"] == ["black", "white"]
    assert data["n_single_race"] == sum(f + m for f, m in PLAN.values())
    rows = {r["category"]: r for r in data["categories"]}
    assert list(rows) == ["nurse", "engineer", "teacher", "pilot"]
    for cat, row in rows.items():
        f, m = PLAN[cat]
        assert row["counts"] == {"black": m, "white": f}
        assert row["shares"]["white"] == pytest.approx(f / (f + m))
    cache = EmbeddingCache.for_model(planted[1] / ".fairsets" / "embeddings", clip_vlm)
    vecs = {item: v for (item, _sha), v in cache.load_images().items()}
    items = race["model_bias"]["probe"]["items"]
    assert race["model_bias"]["n_probes"] == {"black": 20, "white": 20}
    W = np.array([vecs[i] for i in items["white"]], dtype=np.float64)
    B = np.array([vecs[i] for i in items["black"]], dtype=np.float64)
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    B /= np.linalg.norm(B, axis=1, keepdims=True)
    prompts = [r["prompt"] for r in race["model_bias"]["categories"]]
    t = np.asarray(clip_vlm.embed_texts(prompts), dtype=np.float64)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    d_white = []
    for j, r in enumerate(race["model_bias"]["categories"]):
        both = np.concatenate([W @ t[j], B @ t[j]])
        expected = ((W @ t[j]).mean() - (B @ t[j]).mean()) / both.std()
        assert r["d"]["white"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert r["d"]["black"] == pytest.approx(-expected, rel=1e-4, abs=1e-6)  # two groups: mirror
        d_white.append(expected)
    rel = race["relations"]["white"]["relation"]
    x = [rows[c]["shares"]["white"] for c in rows]
    assert rel["pearson_r"] == pytest.approx(np.corrcoef(x, d_white)[0, 1], abs=1e-4)


def test_summary_prints_the_per_group_table(audited, planted):
    base, ann, cats, _ = planted
    _, doc = audited
    out = base / "summary"
    result = runner.invoke(app, [a for a in _args(ann, cats, out) if a != "-q"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("group "))
    table = {line.split()[0]: line for line in lines[head + 1 : head + 4]}
    assert set(table) == {"female", "black", "white"}
    rel = doc["relations"]["data_clip"]["relation"]
    assert f"{rel['pearson_r']:.3f}" in table["female"] and f"{rel['r2']:.3f}" in table["female"]
    white = doc["race"]["relations"]["white"]["relation"]
    assert f"{white['pearson_r']:.3f}" in table["white"] and "the other races" in table["white"]
    assert "leave-one-out" in table["female"] and any(line.startswith("warning (") for line in lines)


def test_exclusions_and_race_options_fail_in_one_line(planted, tmp_path, no_model):
    _, ann, cats, _ = planted
    out = tmp_path / "out"
    msg = _error(runner.invoke(app, _args(ann, cats, out, "--exclusions", str(tmp_path / "none.toml"))))
    assert "no such exclusion file" in msg
    mine = tmp_path / "mine.toml"
    mine.write_text('phrases = ["nurse shark"]\n')
    msg = _error(runner.invoke(app, _args(ann, cats, out, "--exclusions", str(mine), "--no-exclusions")))
    assert "--no-exclusions" in msg
    norace = write_person_tables(tmp_path / "norace", _specs()[:10], shard_size=200)
    shutil.rmtree(norace / "attributes" / "race")
    msg = _error(runner.invoke(app, _args(norace, cats, out, "--race")))
    assert "no race labels" in msg and "--race" in msg
    assert not out.exists()
