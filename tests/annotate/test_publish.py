"""``fairsets publish ANN``: the prepared folder (tables with the attributes joined, card, manifest),
the dry run, a full publish to the recording Hub stand-in of ``tests/publish/test_hub.py``, refusals
and no leaked secret or local path.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from publish_ann import GENDER, RACE, SHARDS, make_ann, write_marker

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.publish.card import check_annotation_card
from fairsets.annotate.publish.dataset import PUBLISHED_KIND, prepare, prepared_dir, verify_prepared
from fairsets.core.atomic import sha256_file
from fairsets.publish import hub
from publish.test_hub import RecordingApi

SECRET = "hf_test_SECRET_annotations_4f9a0b1c2d"
OTHER_SECRET = "s3cr3t-password-in-env-77"
REPO = "fairsets-test/person-annotations"
SECRET_DIR = "/home/alice/private"


@pytest.fixture()
def ann(tmp_path: Path) -> tuple[Path, dict]:
    root = tmp_path / "ANN"
    return root, make_ann(root, secret_dir=SECRET_DIR)


def _plan(out: str) -> list[str]:
    """The paths of a ``format_plan`` table."""
    lines = out.strip().splitlines()
    return [ln.split()[0] for ln in lines[2:-1]]


def _expected_files() -> list[str]:
    tables = [f"data/{kind}/{s}.parquet" for kind in ("boxes", "images") for s in SHARDS]
    return sorted(["README.md", "croissant.json", "manifest.json", *tables])


def _all_bytes(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# --- dry run ---------------------------------------------------------------------------------------


def test_dry_run_lists_exactly_the_tables_card_and_manifest(
    ann: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = ann
    code, out, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert code == 0, err
    assert out.startswith("Dry run: would upload 7 files") and REPO in out
    plan = _plan(out)
    assert plan == _expected_files()
    assert not any(".fairsets" in p or p.endswith((".jpg", ".tar", ".npy")) for p in plan)

    folder = prepared_dir(root)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == PUBLISHED_KIND and manifest["license"] == "cc-by-4.0"
    assert sorted(manifest["files"]) == [p for p in plan if p != "manifest.json"]
    for rel, entry in manifest["files"].items():
        assert (
            sha256_file(folder / rel) == entry["sha256"] and (folder / rel).stat().st_size == entry["bytes"]
        )
    assert verify_prepared(folder) == []
    # the sizes printed are the files' sizes
    rows = {ln.split()[0]: int(ln.split()[-1]) for ln in out.strip().splitlines()[2:-1]}
    assert rows == {rel: (folder / rel).stat().st_size for rel in plan}


def test_tables_carry_the_joined_attributes_in_box_order(ann: tuple[Path, dict]) -> None:
    root, expected = ann
    folder = prepare(root, repo_id=REPO).folder
    for shard in SHARDS:
        src = pq.read_table(layout.boxes_path(root, shard)).to_pylist()
        out = pq.read_table(folder / f"data/boxes/{shard}.parquet")
        rows = out.to_pylist()
        assert [(r["key"], r["box_id"]) for r in rows] == [(r["key"], r["box_id"]) for r in src]
        for attr, classes in (("gender", GENDER), ("race", RACE)):
            labels = {
                (r["key"], r["box_id"]): r
                for r in pq.read_table(layout.attribute_path(root, attr, shard)).to_pylist()
            }
            for r in rows:
                want = labels.get((r["key"], r["box_id"]))
                if not r["kept"]:
                    assert want is None and r[f"perceived_{attr}"] is None
                    continue
                assert r[f"perceived_{attr}"] == want[f"perceived_{attr}"]
                assert [r[f"p_{attr}_{c}"] for c in classes] == [want[f"p_{attr}_{c}"] for c in classes]
                assert r[f"{attr}_reason"] is None
        assert (
            out.schema.field("p_gender_female").type == "float" and out.schema.field("box_id").type == "int32"
        )
        assert pq.read_table(folder / f"data/images/{shard}.parquet").schema == layout.IMAGE_SCHEMA
    counts = json.loads((folder / "manifest.json").read_text())["counts"]
    assert counts["boxes"] == {
        "total": expected["boxes"],
        "kept": expected["kept"],
        "dropped": expected["boxes"] - expected["kept"],
        "drop_reasons": {"min side N px < N": expected["boxes"] - expected["kept"]},
    }
    assert (
        counts["images"]["rejected"] == expected["rejected"]
        and counts["images"]["total"] == expected["images"]
    )
    assert counts["attributes"]["gender"] == {"classes": expected["gender"], "unlabelled": 0}


def test_datasets_reads_the_prepared_folder(ann: tuple[Path, dict], tmp_path: Path) -> None:
    from datasets import load_dataset

    root, expected = ann
    folder = prepare(root, repo_id=REPO).folder
    header = yaml.safe_load((folder / "README.md").read_text().split("---", 2)[1])
    files = {c["config_name"]: c["data_files"][0]["path"] for c in header["configs"]}
    boxes = load_dataset(
        "parquet",
        data_files={"train": str(folder / files["boxes"])},
        split="train",
        cache_dir=str(tmp_path / "c"),
    )
    assert len(boxes) == expected["boxes"]
    assert {"perceived_gender", "p_gender_female", "perceived_race", "p_race_white", "kept"} <= set(
        boxes.column_names
    )
    kept = boxes.filter(lambda r: r["kept"])
    assert len(kept) == expected["kept"] and all(g in GENDER for g in kept["perceived_gender"])
    images = load_dataset(
        "parquet",
        data_files={"train": str(folder / files["images"])},
        split="train",
        cache_dir=str(tmp_path / "c"),
    )
    assert len(images) == expected["images"] and "url" in images.column_names

    # the card's configs, as the Hub reads them: the folder itself, the boxes config by default
    default = load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "c"))
    assert default.column_names == boxes.column_names and len(default) == expected["boxes"]
    named = load_dataset(str(folder), "images", split="train", cache_dir=str(tmp_path / "c"))
    assert named.column_names == images.column_names and len(named) == expected["images"]


def test_card_is_gated_has_configs_and_the_numbers(ann: tuple[Path, dict]) -> None:
    root, expected = ann
    folder = prepare(root, repo_id=REPO, license="cc-by-nc-4.0").folder
    text = (folder / "README.md").read_text()
    assert check_annotation_card(text, folder) == []
    header = yaml.safe_load(text.split("---", 2)[1])
    assert header["license"] == "cc-by-nc-4.0"
    assert "protected attributes" in header["extra_gated_prompt"]
    fields = header["extra_gated_fields"]
    assert "Affiliation" in fields and any("identify" in k and v == "checkbox" for k, v in fields.items())
    assert any("purpose" in k.lower() for k in fields)
    configs = {c["config_name"]: c for c in header["configs"]}
    assert configs["boxes"]["default"] is True
    assert configs["boxes"]["data_files"] == [{"split": "train", "path": "data/boxes/*.parquet"}]
    assert configs["images"]["data_files"] == [{"split": "train", "path": "data/images/*.parquet"}]
    assert header["size_categories"] == ["n<1K"]
    body = text.split("---", 2)[2]
    assert "None" not in body.split() and "{{" not in body
    assert "b" * 64 in body and "c" * 64 in body and "d" * 64 in body  # detector and head hashes
    # the human agreement that fairsets annotate verify recorded: κ and accuracy with CIs, κ by box size
    assert "| human (h1) vs classifier | 200 | 0.93 \\[0.9, 0.96\\] | 0.86 \\[0.8, 0.91\\] |" in body
    assert "| human (h1) vs classifier | 0.71 | 0.75 | 0.86 |" in body and "1000 bootstrap resamples" in body
    assert "No comparison with human labels" not in body
    # the heads' test metrics: scalars, per class, the confusion matrix
    assert "| accuracy | 0.91 |" in body and "| kappa | 0.85 |" in body and "| test.accuracy | 0.7 |" in body
    assert "| `female` | 0.9 | 0.92 | 0.91 | 30 |" in body and "| `male` | 2 | 27 | 1 |" in body
    assert f"Person boxes: {expected['boxes']} detected, {expected['kept']} kept" in body
    for cls, n in expected["gender"].items():
        assert f"| `{cls}` | {n} |" in body
    assert (
        "not self-identified" in body
        and "social constructs" in body
        and "not assert that gender is binary" in body
    )
    assert "small boxes" in body
    assert "Detector confidence ≥ 0.25" in body and "shorter than 30 px" in body
    assert f'load_dataset("{REPO}", "boxes", split="train")' in body and "duckdb.sql(" in body
    assert "@inproceedings" in body
    assert json.loads((folder / "manifest.json").read_text())["license"] == "cc-by-nc-4.0"


def test_no_local_path_in_the_prepared_folder(ann: tuple[Path, dict]) -> None:
    root, _ = ann
    folder = prepare(root, repo_id=REPO).folder
    for rel, data in _all_bytes(folder).items():
        if rel.startswith("."):
            continue  # the upload lock, never uploaded
        assert b"/home/alice" not in data and str(root).encode() not in data, rel
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [i["file"] for i in manifest["inputs"]] == [f"{s}.tar" for s in SHARDS]
    assert manifest["attributes"]["gender"]["head"]["pretrained"] == "mobilenet_v2.pth"
    assert manifest["detector"]["weights"] == "yolo11n.pt"
    assert manifest["shards"]["00001"]["problems"] == ["tar truncated after 9 members: 00001.tar"]
    reasons = pq.read_table(folder / "data/images/00001.parquet").column("reason").to_pylist()
    assert [r for r in reasons if r] == ["cannot identify image file 00001.tar:00100005.jpg"]
    urls = pq.read_table(folder / "data/images/00001.parquet").column("url").to_pylist()
    assert urls[0] == "https://images.example.invalid/00001/0.jpg"  # URLs are kept as they are


# --- full publish ----------------------------------------------------------------------------------


def test_full_publish_uploads_the_plan_and_leaks_no_secret(
    ann: tuple[Path, dict],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    root, _ = ann
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("DATABASE_PASSWORD", OTHER_SECRET)
    api = RecordingApi()
    monkeypatch.setattr(hub, "_make_api", lambda token: api)
    caplog.set_level(logging.DEBUG)
    code, out, err = run_cli(
        ["publish", root, "--repo-id", REPO, "--private", "--revision", "v1", "--allow-placeholders"], capsys
    )
    assert code == 0, err
    assert api.names == ["create_repo", "create_branch", "upload_large_folder"] and api.unexpected == []
    calls = dict(api.calls)
    assert calls["create_repo"]["private"] is True and calls["create_repo"]["repo_type"] == "dataset"
    up = calls["upload_large_folder"]
    assert Path(up["folder_path"]) == prepared_dir(root).resolve()
    assert up["allow_patterns"] == _expected_files() == _plan(out)
    assert set(hub.IGNORE_PATTERNS) <= set(up["ignore_patterns"])
    assert out.startswith("Uploaded 7 files") and f"https://huggingface.co/datasets/{REPO}/tree/v1" in out

    for secret in (SECRET, OTHER_SECRET):
        assert secret not in out and secret not in err and secret not in caplog.text
        assert secret not in repr(api.calls)
        for rel, data in _all_bytes(root).items():
            assert secret.encode() not in data, rel


def test_real_client_on_a_closed_loopback_port_is_one_line(
    ann: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import constants

    root, _ = ann
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    code, out, err = run_cli(["publish", root, "--repo-id", REPO, "--allow-placeholders"], capsys)
    assert_one_line_error(code, err, "create_repo failed")
    assert SECRET not in out + err


# --- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["data/boxes/00001.parquet", "README.md"])
def test_a_tampered_prepared_file_is_refused(
    ann: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], rel: str
) -> None:
    root, _ = ann
    folder = prepare(root, repo_id=REPO).folder
    want = json.loads((folder / "manifest.json").read_text())["files"][rel]["sha256"]
    data = bytearray((folder / rel).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / rel).write_bytes(bytes(data))
    tampered = bytes(data)

    monkeypatch.setenv("HF_TOKEN", SECRET)
    api = RecordingApi()
    monkeypatch.setattr(hub, "_make_api", lambda token: api)
    for extra in ([], ["--dry-run"]):
        code, out, err = run_cli(["publish", root, "--repo-id", REPO, *extra], capsys)
        assert_one_line_error(code, err, rel, want, "nothing was uploaded", "delete")
        assert out == ""
    assert api.calls == []
    assert (folder / rel).read_bytes() == tampered  # refused, not silently overwritten


def test_the_prepared_folder_itself_points_to_its_annotation_folder(ann: tuple[Path, dict], capsys) -> None:
    root, _ = ann
    folder = prepare(root, repo_id=REPO).folder
    code, _, err = run_cli(["publish", folder, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, f"run fairsets publish {root} --repo-id {REPO}")


def test_a_stray_file_in_the_prepared_folder_is_refused(ann: tuple[Path, dict], capsys) -> None:
    root, _ = ann
    folder = prepare(root, repo_id=REPO).folder
    (folder / "data" / "images" / "00000.jpg").write_bytes(b"\xff\xd8 an image")
    code, _, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, "data/images/00000.jpg", "not listed in the manifest")


def test_missing_attribute_table_and_bad_license_are_one_line_errors(ann: tuple[Path, dict], capsys) -> None:
    root, _ = ann
    code, _, err = run_cli(
        ["publish", root, "--repo-id", REPO, "--dry-run", "--license", "cc-by-9.9"], capsys
    )
    assert_one_line_error(code, err, "cc-by-9.9", "cc-by-4.0")
    layout.attribute_path(root, "race", "00001").unlink()
    code, _, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, "00001.parquet", "fairsets annotate classify for race")
    code, _, err = run_cli(["publish", root, "--repo-id", "not a repo", "--dry-run"], capsys)
    assert_one_line_error(code, err, "repository id")


def test_duplicated_attribute_rows_are_refused(ann: tuple[Path, dict]) -> None:
    from fairsets.annotate.layout import AnnotationError
    from fairsets.core.tables import write_table

    root, _ = ann
    path = layout.attribute_path(root, "gender", "00000")
    rows = pq.read_table(path).to_pylist()
    write_table(path, rows + rows[:1], layout.attribute_schema("gender", GENDER))
    with pytest.raises(AnnotationError, match=r"not the table annotate classify \(gender head\) recorded"):
        prepare(root, repo_id=REPO)  # changed behind classify's back
    boxes = layout.boxes_path(root, "00000")
    write_marker(root, "classify-gender", "00000", {"labels": path}, boxes_sha256=sha256_file(boxes))
    with pytest.raises(AnnotationError, match="1 duplicated"):
        prepare(root, repo_id=REPO)  # as written by the classify stage itself


def test_annotation_tables_must_be_what_their_markers_recorded(
    ann: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    from fairsets.core.tables import write_table

    root, _ = ann
    boxes = layout.boxes_path(root, "00001")
    rows = pq.read_table(boxes).to_pylist()
    rows[0]["x1"] += 1.0
    write_table(boxes, rows, layout.BOX_SCHEMA)  # edited after annotate persons wrote it
    code, _, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, "boxes/00001.parquet", "annotate persons recorded", "annotate persons")
    assert not prepared_dir(root).joinpath("manifest.json").exists()

    # persons ran again (its marker is current) but the labels are of the old boxes
    write_marker(root, "persons", "00001", {"boxes": boxes, "images": layout.images_path(root, "00001")})
    code, _, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, "shard 00001", "boxes changed after annotate classify (gender head)")

    layout.marker_path(root, "classify-gender", "00001").unlink()  # classify did not finish the shard
    code, _, err = run_cli(["publish", root, "--repo-id", REPO, "--dry-run"], capsys)
    assert_one_line_error(code, err, "shard 00001", "has not finished it", "annotate classify")


def test_license_option_is_for_annotation_folders_only(tmp_path: Path, capsys) -> None:
    out = tmp_path / "OUT"  # a built dataset's folder (refused before its layout is even read)
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"files": {}, "counts": {"published": {"x": 1}}}))
    code, _, err = run_cli(["publish", out, "--repo-id", REPO, "--dry-run", "--license", "mit"], capsys)
    assert_one_line_error(code, err, "--license is for annotation folders")


# --- resuming --------------------------------------------------------------------------------------


def test_rerun_reuses_shards_and_an_interrupted_run_ends_byte_identical(
    ann: tuple[Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from fairsets.annotate.publish import tables as publish_tables

    root, _ = ann
    twin = tmp_path / "elsewhere" / "ANN2"
    shutil.copytree(root, twin)
    first = prepare(root, repo_id=REPO)
    assert first.reused == []
    reference = _all_bytes(first.folder)
    again = prepare(root, repo_id=REPO)
    assert again.reused == list(SHARDS) and _all_bytes(again.folder) == reference

    # killed while writing the second shard's images: one shard done, a temp file left behind
    real = publish_tables._write_query
    calls = {"n": 0}

    def dying(con, sql, params, schema, target):
        calls["n"] += 1
        if calls["n"] == 4:
            (target.parent / f".{target.name}.tmp-1-deadbeef").write_bytes(b"partial")
            raise KeyboardInterrupt
        return real(con, sql, params, schema, target)

    monkeypatch.setattr(publish_tables, "_write_query", dying)
    with pytest.raises(KeyboardInterrupt):
        prepare(twin, repo_id=REPO)
    assert not (prepared_dir(twin) / "manifest.json").exists()
    monkeypatch.setattr(publish_tables, "_write_query", real)
    resumed = prepare(twin, repo_id=REPO)
    assert resumed.reused == ["00000"]
    assert {k: v for k, v in _all_bytes(resumed.folder).items() if not k.startswith(".")} == {
        k: v for k, v in reference.items() if not k.startswith(".")
    }


def test_a_changed_input_is_prepared_again(ann: tuple[Path, dict]) -> None:
    from fairsets.core.tables import write_table

    root, _ = ann
    prepare(root, repo_id=REPO)
    path = layout.attribute_path(root, "gender", "00001")
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r["perceived_gender"] = "female"
    write_table(path, rows, layout.attribute_schema("gender", GENDER))
    boxes = layout.boxes_path(root, "00001")
    write_marker(root, "classify-gender", "00001", {"labels": path}, boxes_sha256=sha256_file(boxes))
    again = prepare(root, repo_id=REPO)
    assert again.reused == ["00000"]
    labels = pq.read_table(again.folder / "data/boxes/00001.parquet").column("perceived_gender").to_pylist()
    assert {g for g in labels if g is not None} == {"female"}
    assert verify_prepared(again.folder) == []


def test_table_bytes_do_not_depend_on_duckdb_threads_or_batches(tmp_path: Path) -> None:
    import duckdb
    import pyarrow as pa

    from fairsets.annotate.publish import tables as publish_tables

    schema = pa.schema([pa.field("a", pa.int32()), pa.field("s", pa.string())])
    sql = "SELECT i::INTEGER a, 'row ' || (i * 7919 % 1000) s FROM range(200000) t(i) ORDER BY i"
    digests = []
    for threads in (1, 2):
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        entry = publish_tables._write_query(con, sql, {}, schema, tmp_path / f"t{threads}.parquet")
        digests.append(entry["sha256"])
        assert entry["rows"] == 200_000
    groups = pq.ParquetFile(tmp_path / "t1.parquet").metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [65536, 65536, 65536, 3392]
    assert digests[0] == digests[1]


def test_card_sets_the_human_ceiling_beside_the_classifier_over_the_same_boxes() -> None:
    from fairsets.annotate.publish.card import _agreement

    v = {
        "human_vs_classifier": {"h1": {"n": 300, "accuracy": 0.9, "kappa": 0.8}},  # every box h1 labelled
        "human_vs_human": {"n": 120, "accuracy": 0.85, "kappa": 0.7},
        "same_boxes": {"n": 120, "human_vs_classifier": {"h1": {"n": 120, "accuracy": 0.8, "kappa": 0.65}}},
    }
    text = str(_agreement(v))
    assert "| human (h1) vs classifier, same boxes | 120 | 0.8 | 0.65 |" in text
    assert "| human vs human | 120 | 0.85 | 0.7 |" in text
    assert "| 300 |" not in text  # the all-boxes comparison is not set beside the same-box ceiling
