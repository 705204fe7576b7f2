"""One-file profiling streams: any batch size gives the same bytes, columns and order as one batch."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairsets.geo.methods import GeoMethod, Prediction
from fairsets.geo.profile import ProfileError, profile_file, read_table


class Keyword(GeoMethod):
    """A method whose answers are known: Paris → FRA (0.8765432109), Delhi → IND (no confidence),
    "boom" fails, anything else → none (0.25)."""

    name = "keyword"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return [p.country for p in self.predict_detailed(captions)]

    def predict_detailed(self, captions: Sequence[str]) -> list[Prediction]:
        self.calls.append(len(captions))
        out = []
        for c in captions:
            if "boom" in c:
                out.append(Prediction(None, None, "", None, None, "server said no"))
            elif "Paris" in c:
                out.append(Prediction("FRA", 0.8765432109, "Paris: city", "FRA", 0.8765432109))
            elif "Delhi" in c:
                out.append(Prediction("IND", None, "Delhi: city", "IND", None))
            else:
                out.append(Prediction(None, 0.25, "", None, None))
        return out


CAPS = ["Paris at night", "", "a cat", "New Delhi market", "", "Paris, again", "a dog", "Paris?"]


def _expected(caps: Sequence[str]) -> list[tuple[str, str, str]]:
    """(country, confidence as CSV text, evidence) per caption, from one direct method call."""
    return [
        (p.country or "", "" if p.confidence is None else f"{p.confidence:.4f}", p.evidence)
        for p in Keyword().predict_detailed(caps)
    ]


def _write_input(path, caps: Sequence[str]) -> None:
    suffix = path.suffix
    keys = [f"k{i}" for i in range(len(caps))]
    if suffix == ".txt":
        path.write_text("".join(c + "\n" for c in caps), encoding="utf-8")
    elif suffix in (".csv", ".tsv"):
        with path.open("w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh, delimiter="\t" if suffix == ".tsv" else ",", lineterminator="\n")
            w.writerow(["key", "caption", "country"])  # an input "country" is replaced, not kept twice
            w.writerows([k, c, "XXX"] for k, c in zip(keys, caps, strict=True))
    elif suffix == ".jsonl":
        path.write_text(
            "".join(json.dumps({"key": k, "caption": c}) + "\n" for k, c in zip(keys, caps, strict=True)),
            encoding="utf-8",
        )
    else:
        pq.write_table(pa.table({"key": keys, "caption": caps}), path, row_group_size=3)


@pytest.mark.parametrize("src_suffix", [".txt", ".csv", ".tsv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("out_suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_streaming_in_small_batches_equals_one_batch(tmp_path, src_suffix, out_suffix):
    src = tmp_path / f"caps{src_suffix}"
    _write_input(src, CAPS)
    small, whole = tmp_path / f"small{out_suffix}", tmp_path / f"whole{out_suffix}"
    method = Keyword()
    s1 = profile_file(src, method, small, read_batch=3, batch_size=2)
    assert max(method.calls) == 2 and len(method.calls) > 3  # really in batches
    s2 = profile_file(src, Keyword(), whole, read_batch=10_000)
    assert small.read_bytes() == whole.read_bytes()
    assert {k: v for k, v in s1.items() if k != "output"} == {k: v for k, v in s2.items() if k != "output"}
    assert s1["captions"] == len(CAPS) and s1["countries"] == {"FRA": 3, "IND": 1}
    rows, columns = read_table(small)
    base = ["caption", "country", "confidence", "evidence"]
    assert columns == (base if src_suffix == ".txt" else [*base, "key"])
    assert [r["caption"] for r in rows] == CAPS
    got = [
        (
            r["country"],
            r["confidence"] if isinstance(r["confidence"], str) else _fmt(r["confidence"]),
            r["evidence"],
        )
        for r in rows
    ]
    assert got == _expected(CAPS)
    if src_suffix != ".txt":
        assert [r["key"] for r in rows] == [f"k{i}" for i in range(len(CAPS))]
    if out_suffix == ".parquet":
        schema = pq.read_schema(small)
        assert schema.field("confidence").type == pa.float64()
        assert pq.read_table(small).column("confidence").to_pylist()[:4] == [
            0.876543,
            0.25,
            0.25,
            None,
        ]  # 6 decimals


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def test_text_lines_are_kept_whole_empty_ones_included(tmp_path):
    src = tmp_path / "caps.txt"
    src.write_bytes(b"Paris\r\n\n\n  spaced  \nlast line without newline")
    out = tmp_path / "o.csv"
    summary = profile_file(src, Keyword(), out, read_batch=2)
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["caption"] for r in rows] == ["Paris", "", "", "  spaced  ", "last line without newline"]
    assert summary["captions"] == 5


def test_a_bad_csv_line_after_written_batches_leaves_no_output(tmp_path):
    src = tmp_path / "c.csv"
    lines = ["caption,id"] + [f"Paris {i},{i}" for i in range(20)] + ["hello, from Rome,21"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "res" / "o.parquet"
    with pytest.raises(ProfileError, match=r"c\.csv: line 22: 3 fields where the header has 2"):
        profile_file(src, Keyword(), out, read_batch=4)
    assert list(out.parent.iterdir()) == []  # neither the output nor a temporary file


def test_a_bad_byte_names_its_line_and_offset_and_leaves_no_output(tmp_path):
    src = tmp_path / "c.txt"
    src.write_bytes(b"Paris\n" * 10 + b"caf\xe9\n")
    out = tmp_path / "o.jsonl"
    with pytest.raises(ProfileError, match=r"c\.txt: not UTF-8 text \(line 11, byte offset 63"):
        profile_file(src, Keyword(), out, read_batch=3)
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_an_error_column_appears_when_a_caption_failed(tmp_path):
    src = tmp_path / "c.jsonl"
    caps = ["Paris", "a cat"] * 5 + ["boom"] + ["Paris"] * 3
    _write_input(src, caps)
    for suffix in (".csv", ".jsonl", ".parquet"):
        out = tmp_path / f"o{suffix}"
        summary = profile_file(src, Keyword(), out, read_batch=4)
        rows, columns = read_table(out)
        assert columns == ["caption", "country", "confidence", "evidence", "error", "key"]
        assert [r["error"] or "" for r in rows] == ["server said no" if c == "boom" else "" for c in caps]
        assert [r["caption"] for r in rows] == caps
        assert summary["errors"] == 1
    # without a failure the column is not there
    clean = tmp_path / "clean.jsonl"
    _write_input(clean, caps[:10])
    profile_file(clean, Keyword(), tmp_path / "ok.csv", read_batch=4)
    assert "error" not in read_table(tmp_path / "ok.csv")[1]


def test_jsonl_with_varying_keys_keeps_every_key_and_its_type(tmp_path):
    src = tmp_path / "v.jsonl"
    rows = [{"caption": "Paris"}] * 5 + [
        {"caption": "cat", "n": 3, "tags": ["a"]},
        {"text": "x", "caption": "y"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "v.parquet"
    profile_file(src, Keyword(), out, read_batch=2)
    t = pq.read_table(out)
    assert t.column_names == ["caption", "country", "confidence", "evidence", "n", "tags", "text"]
    assert t.schema.field("n").type == pa.int64()
    assert t.column("n").to_pylist() == [None] * 5 + [3, None]
    assert t.column("tags").to_pylist()[5] == ["a"]
    profile_file(src, Keyword(), tmp_path / "v.csv", read_batch=2)
    with (tmp_path / "v.csv").open(encoding="utf-8", newline="") as fh:
        header = next(csv.reader(fh))
    assert header == ["caption", "country", "confidence", "evidence", "n", "tags", "text"]


def test_a_rerun_writes_the_same_bytes(tmp_path):
    src = tmp_path / "caps.parquet"
    _write_input(src, CAPS * 50)
    for suffix in (".csv", ".parquet"):
        a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
        profile_file(src, Keyword(), a, read_batch=7)
        profile_file(src, Keyword(), b, read_batch=7)
        assert a.read_bytes() == b.read_bytes()
