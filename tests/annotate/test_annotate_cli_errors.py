"""The annotate commands as a careful new user meets them: every mistake is one line (the problem and
the fix), exit code 2, no traceback, before any work starts; and the list options of ``train`` and
``verify`` take names comma-separated, repeated, or both.

Wrong paths, a folder that is not an annotation folder, a head that does not fit, LABELS and human
CSVs that are empty or lack columns, out-of-range numbers, a device this machine lacks, blank values.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_classify import ENCODER, make_ann, make_head
from test_classify_resume import _outputs
from test_verify import make_ann as make_labelled_ann
from test_verify import write_labels as write_human_labels

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.heads.store import Head, write_head


def _cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def ann(tmp_path_factory: pytest.TempPathFactory, shard_writer: Any) -> dict[str, Path]:
    """An annotation folder with boxes (no labels yet), a head for it, a LABELS CSV, other files."""
    root = tmp_path_factory.mktemp("cli-errors")
    made = make_ann(root, shard_writer, shards=1, images=3)
    make_head(root / "head.npz")
    labels = root / "labels.csv"
    labels.write_text(
        "shard,key,box_id,label\n"
        + "".join(f"{s},{k},{b},{('female', 'male')[i % 2]}\n" for i, (s, k, b, _) in enumerate(made["kept"]))
    )
    (root / "empty.csv").write_text("")
    (root / "nocols.csv").write_text("shard,key\n00000,00000000\n")
    (root / "not-ann").mkdir()
    return {"root": root, "ann": made["ann"], "head": root / "head.npz", "labels": labels}


# ------------------------------------------------------------------------------------------ classify


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--workers", "-1"], ["--workers -1", "0"]),
        (["--batch", "0"], ["--batch 0", "at least 1"]),
        (["--executor", "spark"], ["--executor", "local"]),
        (["--device", ""], ["--device is empty"]),
        (["--device", "gpu7"], ["--device gpu7", "cuda"]),
    ],
)
def test_classify_bad_options_are_one_line(
    ann: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], needles: list[str]
) -> None:
    code, _, err = run_cli(["annotate", "classify", ann["ann"], "--head", ann["head"], *args], capsys)
    assert_one_line_error(code, err, *needles)
    assert not (ann["ann"] / "attributes").exists()  # nothing was labelled


@pytest.mark.skipif("_cuda_here()")
@pytest.mark.parametrize("workers", ["0", "1"])
def test_classify_on_a_missing_gpu_is_one_line_before_any_worker(
    ann: dict[str, Path], capsys: pytest.CaptureFixture[str], workers: str
) -> None:
    args = [
        "annotate",
        "classify",
        ann["ann"],
        "--head",
        ann["head"],
        "--device",
        "cuda",
        "--workers",
        workers,
    ]
    code, _, err = run_cli(args, capsys)
    line = assert_one_line_error(code, err, "--device cuda", "CUDA is not available", "use --device cpu")
    assert "task" not in line  # refused before any worker started, not once per shard


def test_classify_wrong_paths_are_one_line(ann: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root = ann["root"]
    cases = [
        ([root / "nowhere", "--head", ann["head"]], ["not an annotation folder", "annotate persons"]),
        ([root / "not-ann", "--head", ann["head"]], ["not an annotation folder", "annotate persons"]),
        ([ann["ann"], "--head", root / "nohead.npz"], ["head not found", "annotate train"]),
        ([ann["ann"], "--head", root / "labels.csv"], ["not a fairsets attribute head", "annotate train"]),
        ([ann["ann"], "--head", root / "empty.csv"], ["not a fairsets attribute head"]),
    ]
    for args, needles in cases:
        code, _, err = run_cli(["annotate", "classify", *args], capsys)
        assert_one_line_error(code, err, *needles)


def test_a_head_for_another_encoder_or_an_encoder_not_here_is_one_line(
    ann: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ann"
    shutil.copytree(ann["ann"], folder)
    code, _out, err = run_cli(["annotate", "classify", folder, "--head", ann["head"], "-q"], capsys)
    assert code == 0, err
    other = write_head(
        tmp_path / "resnet.npz",
        Head(
            attribute="gender",
            classes=["female", "male", "unclear"],
            encoder="torchvision:resnet18",
            pretrained="none",
            coef=np.zeros((3, 512)),
            intercept=np.zeros(3),
            normalise=True,
            metrics={},
        ),
    )
    code, _, err = run_cli(["annotate", "classify", folder, "--head", tmp_path / "resnet.npz"], capsys)
    assert_one_line_error(code, err, "another head", "--replace")
    missing = tmp_path / "gone.pth"
    gone = write_head(
        tmp_path / "gone.npz",
        Head(
            attribute="age",
            classes=["young", "old"],
            encoder=ENCODER,
            pretrained=str(missing),
            coef=np.zeros((2, 576)),
            intercept=np.zeros(2),
            normalise=True,
            metrics={},
        ),
    )
    code, _, err = run_cli(["annotate", "classify", folder, "--head", tmp_path / "gone.npz"], capsys)
    assert_one_line_error(code, err, str(missing))
    assert other.sha256 != gone.sha256


# --------------------------------------------------------------------------------------------- train


# Each case: the LABELS file (a name in the fixture's folder) and options over the defaults; a
# value starting with "@" is a name in that folder.
TRAIN_CASES = [
    ("nowhere.csv", {}, ["no such LABELS file", "shard, key, box_id, label"]),
    ("empty.csv", {}, ["shard, key, box_id, label"]),
    ("nocols.csv", {}, ["missing box_id, label"]),
    ("labels.csv", {"--ann": "@not-ann"}, ["not an annotation folder", "annotate persons"]),
    ("labels.csv", {"--ann": "@nowhere"}, ["not an annotation folder"]),
    ("labels.csv", {"--batch": "0"}, ["--batch 0", "at least 1"]),
    ("labels.csv", {"--split": "0.5,0.5"}, ["0.5,0.5", "e.g. 0.7,0.15,0.15"]),
    ("labels.csv", {"--classes": "female"}, ["at least two"]),
    ("labels.csv", {"--drop-labels": ","}, ["--drop-labels", "names nothing", "unclear,invalid"]),
    ("labels.csv", {"--encoder": " "}, ["--encoder is empty"]),
    ("labels.csv", {"--pretrained": "@nowhere.pth"}, ["nowhere.pth", "does not exist"]),
    ("labels.csv", {"--out": "@labels.csv/head.npz"}, ["labels.csv is a file", "choose another path"]),
    ("labels.csv", {"--out": "@not-ann"}, ["not-ann: a folder", "gender.npz"]),
]


@pytest.mark.parametrize(("labels", "change", "needles"), TRAIN_CASES)
def test_train_mistakes_are_one_line(
    ann: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    labels: str,
    change: dict[str, str],
    needles: list[str],
) -> None:
    root = ann["root"]
    opts = {"--ann": str(ann["ann"]), "--encoder": ENCODER, "--pretrained": "none", "--out": "@h.npz"}
    opts.update(change)
    flat = [x for k, v in opts.items() for x in (k, str(root / v[1:]) if v.startswith("@") else v)]
    code, _, err = run_cli(["annotate", "train", root / labels, *flat], capsys)
    assert_one_line_error(code, err, *needles)
    assert not (root / "h.npz").exists()


@pytest.mark.skipif("_cuda_here()")
def test_train_on_a_missing_gpu_is_one_line(ann: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["annotate", "train", ann["labels"], "--ann", ann["ann"], "--encoder", ENCODER, "--out"]
    args += [ann["root"] / "h.npz", "--device", "cuda:1"]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "--device cuda:1", "use --device cpu")


def test_train_list_options_comma_separated_repeated_or_both(
    ann: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fairsets.annotate.heads.train as train

    seen: list[list[str]] = []

    def record(labels: Any, **kw: Any) -> Any:
        seen.append(kw["drop_labels"])
        classes.append(kw["classes"])
        raise ValueError("recorded")

    classes: list[list[str] | None] = []

    monkeypatch.setattr(train, "train_head", record)
    base = ["annotate", "train", ann["labels"], "--ann", ann["ann"], "--encoder", ENCODER, "--out", "h.npz"]
    for given in (
        ["--drop-labels", "unclear,invalid"],
        ["--drop-labels", "unclear", "--drop-labels", "invalid"],
        ["--drop-labels", " unclear , invalid,unclear"],
        ["--drop-labels", "unclear,", "--drop-labels", "invalid"],
    ):
        code, _, err = run_cli([*base, *given], capsys)
        assert_one_line_error(code, err, "recorded")
    assert seen == [["unclear", "invalid"]] * 4
    assert classes == [None] * 4
    for given in (["--classes", "male,female"], ["--classes", "male", "--classes", "female"]):
        code, _, err = run_cli([*base, *given], capsys)
        assert_one_line_error(code, err, "recorded")
    assert classes[4:] == [["male", "female"]] * 2  # the order given is the head's class order
    code, out, _ = run_cli(["annotate", "train", "--help"], capsys)
    assert "comma-separated, repeatable or both" in " ".join(re.sub("[│╭╮╰╯─]", " ", out).split())


# -------------------------------------------------------------------------------------------- verify


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("verify-cli")
    truth = make_labelled_ann(root / "ann", n_per_shard=20)
    write_human_labels(root / "human.csv", truth)
    (root / "empty.csv").write_text("")
    (root / "nocols.csv").write_text("shard,key\n00000,00000000\n")
    (root / "not-ann").mkdir()
    (root / "a-file").write_text("x")
    return {"root": root, "ann": root / "ann", "human": root / "human.csv"}


def test_verify_mistakes_are_one_line(labelled: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, ann, human = labelled["root"], labelled["ann"], labelled["human"]
    out = ["--out", root / "report"]
    cases = [
        ([root / "nowhere", "--human", human, "-a", "gender"], ["not an annotation folder"]),
        (
            [root / "not-ann", "--human", human, "-a", "gender"],
            ["not an annotation folder", "annotate persons"],
        ),
        ([ann, "--human", root / "nowhere.csv", "-a", "gender"], ["no such file", "shard, key, box_id"]),
        ([ann, "--human", root / "empty.csv", "-a", "gender"], ["shard, key, box_id"]),
        ([ann, "--human", root / "nocols.csv", "-a", "gender"], ["no column box_id"]),
        ([ann, "--human", human, "-a", "age"], ["no age labels", "annotate classify"]),
        (
            [ann, "--human", human, "-a", "gender", "--human-col", "rater9"],
            ["no human label column 'rater9'"],
        ),
        ([ann, "--human", human, "-a", "gender", "--min-sides", "a,b"], ["--min-sides", "e.g. 0,10"]),
        ([ann, "--human", human, "-a", "gender", "--bootstrap", "-1"], ["--bootstrap", "--help"]),
        ([ann, "--human", human, "-a", "gender", "--drop-labels", " , "], ["--drop-labels", "names nothing"]),
        ([ann, "--human", human, "-a", ""], ["is empty"]),
    ]
    for args, needles in cases:
        code, _, err = run_cli(["annotate", "verify", *args, *out], capsys)
        assert_one_line_error(code, err, *needles)
    code, _, err = run_cli(
        ["annotate", "verify", ann, "--human", human, "-a", "gender", "--out", root / "a-file"], capsys
    )
    assert_one_line_error(code, err, "a-file", "another --out")


def test_verify_list_options_comma_separated_repeated_or_both(
    labelled: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, ann, human = labelled["root"], labelled["ann"], labelled["human"]
    reports = []
    for i, given in enumerate(
        (
            ["--drop-labels", "not sure,unclear", "--human-col", "h1,h2"],
            [
                "--drop-labels",
                "not sure",
                "--drop-labels",
                "unclear",
                "--human-col",
                "h1",
                "--human-col",
                "h2",
            ],
        )
    ):
        out = root / f"both{i}"
        args = ["annotate", "verify", ann, "--human", human, "-a", "gender", "--out", out, "--no-plot", "-q"]
        code, _, err = run_cli([*args, "--bootstrap", "20", *given], capsys)
        assert code == 0, err
        reports.append(json.loads((out / "verify_gender.json").read_text()))
    assert reports[0] == reports[1]
    assert set(reports[0]["human_vs_classifier"]) == {"h1", "h2"}
    assert reports[0]["human_vs_human"]["columns"] == ["h1", "h2"]
    code, out, _ = run_cli(["annotate", "verify", "--help"], capsys)
    assert "comma-separated, repeatable or both" in " ".join(re.sub("[│╭╮╰╯─]", " ", out).split())


def test_verify_takes_the_only_labelled_attribute_and_asks_when_there_are_several(
    labelled: dict[str, Path], ann: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairsets.annotate import layout

    human = labelled["human"]
    args = ["--human", human, "--out", tmp_path / "report", "--drop-labels", "not sure", "--no-plot", "-q"]
    code, _, err = run_cli(["annotate", "verify", labelled["ann"], *args], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "report" / "verify_gender.json").read_text())["attribute"] == "gender"
    code, _, err = run_cli(["annotate", "verify", ann["ann"], *args], capsys)
    assert_one_line_error(code, err, "no labels to verify", "annotate classify")
    two = tmp_path / "two"
    shutil.copytree(labelled["ann"], two)
    manifest = layout.read_manifest(two)
    manifest["attributes"]["age"] = manifest["attributes"]["gender"]
    layout.write_manifest(two, manifest)
    code, _, err = run_cli(["annotate", "verify", two, *args], capsys)
    assert_one_line_error(code, err, "labels of age, gender", "--attribute")


def test_a_folder_for_a_file_or_a_file_for_the_folder_is_one_line(
    ann: dict[str, Path], labelled: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, folder = ann["root"], ann["root"] / "not-ann"
    train = ["annotate", "train", ann["labels"], "--encoder", ENCODER, "--pretrained", "none"]
    train += ["--out", root / "h.npz"]
    cases = [
        (["annotate", "classify", ann["ann"], "--head", folder], ["not-ann: a folder", "head .npz"]),
        (["annotate", "classify", ann["labels"], "--head", ann["head"]], ["ANN", "a file, not a folder"]),
        ([*train[:2], folder, *train[3:], "--ann", ann["ann"]], ["not-ann: a folder", "LABELS file"]),
        ([*train, "--ann", ann["labels"]], ["--ann", "labels.csv: a file, not a folder"]),
        (
            ["annotate", "verify", labelled["ann"], "--human", folder, "--out", root / "r"],
            ["not-ann: a folder", "human labels"],
        ),
        (
            ["annotate", "verify", labelled["human"], "--human", labelled["human"], "--out", root / "r"],
            ["human.csv: a file, not a folder", "annotation folder"],
        ),
    ]
    for args, needles in cases:
        code, _, err = run_cli(args, capsys)
        assert_one_line_error(code, err, *needles)
    assert not (root / "h.npz").exists() and not (root / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "1"])
def test_ctrl_c_stops_classify_quietly_and_the_same_command_finishes_it(
    shard_writer: Any, tmp_path: Path, workers: str
) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) once a shard is done:
    exit 130, no traceback; the same command again gives the bytes of an uninterrupted run."""
    from fairsets.annotate import layout
    from fairsets.annotate.heads.classify import classify_boxes, stage

    made = make_ann(tmp_path, shard_writer, shards=6, images=3)
    head = tmp_path / "head.npz"
    make_head(head)
    reference = tmp_path / "reference"
    shutil.copytree(made["ann"], reference)
    classify_boxes(reference, head, batch=4, workers=0)
    ann, markers = made["ann"], layout.marker_path(made["ann"], stage("gender"), "x").parent
    cmd = [sys.executable, "-m", "fairsets", "annotate", "classify", str(ann), "--head", str(head)]
    cmd += ["--workers", workers, "--batch", "4", "-q"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < 120:
        if markers.is_dir() and any(markers.glob("*.json")):
            os.killpg(proc.pid, signal.SIGINT)
            break
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run ended before it could be interrupted")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len([ln for ln in err.splitlines() if ln.strip()]) <= 1, err
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _outputs(ann) == _outputs(reference)
