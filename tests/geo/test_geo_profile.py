"""Profiling files and shards: one prediction per input, in order; resumable shard tasks."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.geo.methods import GEO_METHODS, GeoMethod, get_method
from fairsets.geo.profile import ProfileError, profile_file, profile_shards, read_table

CAPS = ["Hotel in Nice", "French fries", "", "Car on Rent in Vadodara with Driver", "Kitchen, with a comma"]
EXPECTED = ["FRA", "", "", "IND", ""]


def test_cli_profile_text_file_keeps_every_line_in_order(tmp_path):
    src = tmp_path / "caps.txt"
    src.write_text("\n".join(CAPS) + "\n", encoding="utf-8")
    out = tmp_path / "pred.csv"
    res = CliRunner().invoke(app, ["geo", "profile", "--method", "offline", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["caption"] for r in rows] == CAPS
    assert [r["country"] for r in rows] == EXPECTED


def test_cli_profile_to_a_folder_writes_predictions_csv(tmp_path):
    src = tmp_path / "caps.csv"
    with src.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["key", "caption"])
        w.writerows([[f"k{i}", c] for i, c in enumerate(CAPS)])
    out = tmp_path / "outdir"
    res = CliRunner().invoke(app, ["geo", "profile", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "predictions.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["country"] for r in rows] == EXPECTED
    assert [r["key"] for r in rows] == [f"k{i}" for i in range(len(CAPS))]  # input columns kept


def test_parquet_in_parquet_out(tmp_path, offline):
    src = tmp_path / "caps.parquet"
    pq.write_table(
        pa.table({"text": CAPS, "url": [f"http://127.0.0.1:9/{i}.jpg" for i in range(len(CAPS))]}), src
    )
    out = tmp_path / "pred.parquet"
    summary = profile_file(src, offline, out)
    t = pq.read_table(out)
    assert t.column("country").to_pylist() == EXPECTED
    assert t.column("caption").to_pylist() == CAPS
    assert summary["with_country"] == 2 and summary["countries"] == {"FRA": 1, "IND": 1}


def test_bad_inputs_are_clear_errors(tmp_path, offline):
    bad = tmp_path / "x.csv"
    bad.write_text("title\nfoo\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="no caption column"):
        profile_file(bad, offline, tmp_path / "o.csv")
    with pytest.raises(ProfileError, match="unsupported format"):
        read_table(tmp_path / "missing.xlsx") if (tmp_path / "missing.xlsx").touch() is None else None
    res = CliRunner().invoke(
        app, ["geo", "profile", "-m", "telepathy", str(bad), "--out", str(tmp_path / "o.csv")]
    )
    assert res.exit_code != 0 and "unknown geo method" in res.output


def _shards(tmp_path, n=3):
    folder = tmp_path / "shards"
    folder.mkdir()
    for s in range(n):
        caps = [f"{c} #{s}" if c else c for c in CAPS]
        pq.write_table(
            pa.table({"caption": caps, "key": [f"{s}-{i}" for i in range(len(caps))]}),
            folder / f"{s:05d}.parquet",
        )
    return folder


def test_shards_run_as_tasks_and_resume(tmp_path, offline):
    folder = _shards(tmp_path)
    out = tmp_path / "out"
    first = profile_shards([folder], offline, out, workers=0)
    assert first["captions"] == 15 and first["with_country"] == 6 and first["skipped"] == 0
    for s in range(3):
        t = pq.read_table(out / f"{s:05d}.parquet")
        assert t.column("country").to_pylist() == EXPECTED
        assert t.column("key").to_pylist() == [f"{s}-{i}" for i in range(5)]
    # an interrupted run: one output lost → only that shard is redone
    (out / "00001.parquet").unlink()
    again = profile_shards([folder], offline, out, workers=0)
    assert again["skipped"] == 2 and again["captions"] == 15
    assert json.loads((out / "profile.json").read_text())["countries"] == {"FRA": 3, "IND": 3}
    # a different method spec invalidates the markers
    other = get_method("offline", threshold=100.0)
    third = profile_shards([folder], other, out, workers=0)
    assert third["skipped"] == 0 and third["with_country"] == 0


def test_cli_profile_shards_with_local_workers(tmp_path):
    folder = _shards(tmp_path, n=2)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["geo", "profile", str(folder), "--out", str(out), "--workers", "2", "-q"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "profile.json").read_text())["captions"] == 10


def test_shards_on_ray(tmp_path, offline):
    pytest.importorskip("ray")
    folder = _shards(tmp_path, n=2)
    out = tmp_path / "out"
    summary = profile_shards([folder], offline, out, executor="ray", workers=1)
    assert summary["with_country"] == 4
    assert pq.read_table(out / "00000.parquet").column("country").to_pylist() == EXPECTED


def test_a_csv_row_with_surplus_fields_names_its_line(tmp_path):
    # "hello, from Rome" unquoted: the caption would be cut to "hello" and the columns shifted
    bad = tmp_path / "c.csv"
    bad.write_text("caption,id\nhello from Paris,1\nhello, from Rome,2\n", encoding="utf-8")
    with pytest.raises(ProfileError, match=r"c\.csv: line 3: 3 fields where the header has 2"):
        read_table(bad)


def test_file_output_columns_are_caption_country_confidence_evidence_then_the_input(tmp_path):
    src = tmp_path / "caps.csv"
    with src.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["key", "caption", "evidence"])
        w.writerows([[f"k{i}", c, "mine"] for i, c in enumerate(CAPS)])
    out = tmp_path / "pred.csv"
    res = CliRunner().invoke(app, ["geo", "profile", str(src), "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    with out.open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
        fh.seek(0)
        rows = list(csv.DictReader(fh))
    assert header == ["caption", "country", "confidence", "evidence", "key"]
    assert [r["country"] for r in rows] == EXPECTED
    for r in rows:  # offline gives a confidence for every answer, written with 4 decimals
        assert len(r["confidence"].split(".")[1]) == 4 and 0.0 <= float(r["confidence"]) <= 1.0
    assert rows[0]["evidence"] and "Nice" in rows[0]["evidence"]  # the words that decided, not the input's
    first = out.read_bytes()
    assert CliRunner().invoke(app, ["geo", "profile", str(src), "--out", str(out), "-q"]).exit_code == 0
    assert out.read_bytes() == first  # deterministic


def test_min_confidence_is_a_method_option_and_refused_where_there_is_none(tmp_path, capsys):
    from cli_helpers import assert_one_line_error, run_cli

    src = tmp_path / "caps.txt"
    src.write_text("\n".join(CAPS * 3) + "\n", encoding="utf-8")
    out = tmp_path / "o.csv"
    code, _, err = run_cli(
        ["geo", "profile", src, "-o", out, "-m", "string", "--min-confidence", "0.5"], capsys
    )
    assert_one_line_error(
        code, err, "--min-confidence: method string gives no confidence; use offline or hybrid"
    )
    assert not out.exists()
    code, _, err = run_cli(["geo", "profile", src, "-o", out, "--min-confidence", "1.5"], capsys)
    assert_one_line_error(code, err, "--min-confidence must be between 0 and 1")
    kept = {}
    for m in (0.0, 0.97):
        code, _, err = run_cli(["geo", "profile", src, "-o", out, "-q", "--min-confidence", str(m)], capsys)
        assert code == 0, err
        with out.open(encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        kept[m] = [r["country"] for r in rows]
        assert all(float(r["confidence"]) >= m for r in rows if r["country"])
    assert sum(map(bool, kept[0.97])) <= sum(map(bool, kept[0.0]))
    assert all(a == b for a, b in zip(kept[0.97], kept[0.0], strict=True) if a)


def test_the_shard_driver_never_builds_the_method(tmp_path, monkeypatch):
    from fairsets.geo.methods import GEO_METHODS
    from fairsets.geo.profile import method_spec

    cls = GEO_METHODS.get("offline")
    built = []
    real = cls.__init__

    def counting(self, **options):
        built.append(options)
        real(self, **options)

    monkeypatch.setattr(cls, "__init__", counting)
    folder = _shards(tmp_path, n=3)
    # inline: the tasks run here, and build the method once for all three shards
    summary = profile_shards([folder], method_spec("offline"), tmp_path / "a", workers=0)
    assert summary["captions"] == 15 and len(built) == 1
    assert summary["method"]["method"] == "offline"  # provenance from a task
    # the CLI checks the spec without building it: workers in other processes build it
    built.clear()
    res = CliRunner().invoke(
        app, ["geo", "profile", str(folder), "-o", str(tmp_path / "b"), "--workers", "2"]
    )
    assert res.exit_code == 0, res.output
    assert built == []
    assert json.loads((tmp_path / "b" / "profile.json").read_text())["with_country"] == 6


def test_shard_outputs_add_country_confidence_and_evidence(tmp_path):
    folder = _shards(tmp_path, n=1)
    out = tmp_path / "out"
    profile_shards([folder], {"method": "offline"}, out, workers=0)
    t = pq.read_table(out / "00000.parquet")
    assert t.column_names == ["caption", "key", "country", "country_confidence", "country_evidence"]
    assert t.schema.field("country_confidence").type == pa.float64()
    conf = t.column("country_confidence").to_pylist()
    assert all(c is not None and 0.0 <= c <= 1.0 for c in conf)
    ev = t.column("country_evidence").to_pylist()
    assert [bool(e) for e, c in zip(ev, EXPECTED, strict=True) if c] == [True, True]


def test_wrong_method_options_fail_in_one_line_before_any_work(tmp_path, capsys):
    from cli_helpers import assert_one_line_error, run_cli
    from fairsets.geo.profile import method_spec

    folder = _shards(tmp_path, n=2)
    out = tmp_path / "out"
    code, _, err = run_cli(["geo", "profile", folder, "-o", out, "-O", "treshold=2"], capsys)
    assert_one_line_error(code, err, "method offline has no option 'treshold'", "threshold")
    code, _, err = run_cli(
        ["geo", "profile", folder, "-o", out, "-m", "hybrid", "-O", "first=offline", "-O", "llm.modle=x"],
        capsys,
    )
    assert_one_line_error(code, err, "method llm has no option 'modle'")
    code, _, err = run_cli(
        ["geo", "profile", folder, "-o", out, "-m", "hybrid", "-O", "first=telepathy"], capsys
    )
    assert_one_line_error(code, err, "unknown geo method 'telepathy'")
    assert not out.exists()
    assert method_spec("hybrid", {"first": "offline", "llm": {"model": "m"}}) == {
        "method": "hybrid",
        "first": "offline",
        "llm": {"model": "m"},
    }


class _Relay(GeoMethod):
    """Answers FRA for "Nice" and counts the other captions as sent on (like hybrid's LLM)."""

    name = "relay-profile-fixture"

    def __init__(self, **options):
        super().__init__(**options)
        self.sent_to_llm = 0

    def predict(self, captions):
        self.sent_to_llm += sum("Nice" not in c for c in captions)
        return ["FRA" if "Nice" in c else None for c in captions]


def test_captions_sent_to_an_llm_are_counted_per_file_and_per_shard(tmp_path, monkeypatch, capsys):
    from cli_helpers import run_cli

    monkeypatch.setitem(GEO_METHODS._items, _Relay.name, _Relay)
    src = tmp_path / "caps.txt"
    src.write_text("\n".join(CAPS) + "\n", encoding="utf-8")
    code, _, err = run_cli(["geo", "profile", src, "-o", tmp_path / "o.csv", "-m", _Relay.name, "-q"], capsys)
    assert code == 0, err
    assert "4 sent to the LLM (80.0%)" in err
    folder = _shards(tmp_path, n=3)
    out = tmp_path / "out"
    summary = profile_shards([folder], {"method": _Relay.name}, out, workers=0)
    assert summary["sent_to_llm"] == 12  # 4 a shard, though one method served all three
    assert [s["sent_to_llm"] for s in summary["shards"].values()] == [4, 4, 4]
    (out / "00002.parquet").unlink()
    assert profile_shards([folder], {"method": _Relay.name}, out, workers=0)["sent_to_llm"] == 12  # resumed


def test_hybrid_min_confidence_needs_a_first_method_with_one(tmp_path, capsys):
    from cli_helpers import assert_one_line_error, run_cli

    folder = _shards(tmp_path, n=2)
    out = tmp_path / "out"
    args = ["geo", "profile", folder, "-o", out, "-m", "hybrid", "-O", "first=ner", "--min-confidence", "0.5"]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "min_confidence needs a first method with a confidence, not 'ner'")
    assert not out.exists()
