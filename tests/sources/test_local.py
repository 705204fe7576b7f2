"""Local source: listings and folders, required columns, clear errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairsets.core.data import KEY_RE
from fairsets.sources import SourceError, SourceReadError, SourceRejected, build_source


def make(tmp_path: Path, **params) -> object:
    return build_source("local", params, tmp_path, ["state", "gender"])


def test_csv_listing(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / "l.csv").write_text(
        "path,state,gender,license,identity,author,extra\na.jpg,Goa,female,CC0-1.0,p1,Ann,42\n"
    )
    rows = make(tmp_path, path="l.csv").scan()
    assert len(rows) == 1
    r = rows[0]
    assert KEY_RE.match(r["key"]) and "." not in r["key"]
    assert (r["state"], r["gender"], r["license"], r["identity"], r["author"], r["extra"]) == (
        "Goa",
        "female",
        "CC0-1.0",
        "p1",
        "Ann",
        "42",
    )
    assert r["source_url"] is None
    assert make(tmp_path, path="l.csv").read(r) == b"x"


def test_parquet_listing_with_rename_and_defaults(tmp_path: Path) -> None:
    pq.write_table(pa.table({"file": ["a.jpg"], "region": ["Goa"], "sex": ["male"]}), tmp_path / "l.parquet")
    rows = make(
        tmp_path,
        path="l.parquet",
        image_column="file",
        rename={"state": "region", "gender": "sex"},
        defaults={"license": "CC-BY-4.0"},
    ).scan()
    assert rows[0]["state"] == "Goa" and rows[0]["gender"] == "male" and rows[0]["license"] == "CC-BY-4.0"
    assert rows[0]["identity"] is None


def test_missing_required_column_is_named(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,license\na.jpg,Goa,CC0-1.0\n")
    with pytest.raises(SourceError, match=r"missing required column\(s\) gender"):
        make(tmp_path, path="l.csv").scan()


def test_folder_with_layout(tmp_path: Path) -> None:
    for s, g in [("Goa", "male"), ("Goa", "female"), ("Assam", "male")]:
        d = tmp_path / "imgs" / s / g
        d.mkdir(parents=True)
        (d / "1.jpg").write_bytes(b"x")
        (d / "notes.txt").write_text("not listed")
    rows = make(tmp_path, path="imgs", layout="{state}/{gender}", defaults={"license": "CC0-1.0"}).scan()
    assert sorted((r["state"], r["gender"]) for r in rows) == [
        ("Assam", "male"),
        ("Goa", "female"),
        ("Goa", "male"),
    ]
    assert len({r["key"] for r in rows}) == 3


def test_unreadable_folder_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file or folder"):
        make(tmp_path, path="nope").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no images"):
        make(tmp_path, path="empty", defaults={"license": "CC0-1.0"}).scan()


def test_unknown_param_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="unknown key 'pth'"):
        make(tmp_path, pth="x")


def test_missing_file_is_a_read_error(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,gender,license\ngone.jpg,Goa,male,CC0-1.0\n")
    src = make(tmp_path, path="l.csv")
    with pytest.raises(SourceReadError, match=r"gone\.jpg"):
        src.read(src.scan()[0])


def test_duplicate_listing_rows_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,gender,license\na.jpg,Goa,male,CC0\na.jpg,Goa,male,CC0\n")
    with pytest.raises(SourceError, match="listed twice"):
        make(tmp_path, path="l.csv").scan()


# -- hostile listings (issue 11, defect 6) -----------------------------------------------------

HEADER = "path,state,gender,license"
ROW = "a.jpg,Goa,male,CC0-1.0"


@pytest.mark.parametrize(
    "column",
    ["_rejected", "_rejected_step", "_stage", "status", "step", "reason", "key", "split", "filename"],
)
def test_reserved_columns_are_refused_with_the_fix(tmp_path: Path, column: str) -> None:
    (tmp_path / "l.csv").write_text(f"{HEADER},{column}\n{ROW},x\n")
    with pytest.raises(SourceError, match=f"column '{column}' is a name fairsets uses itself.*rename"):
        make(tmp_path, path="l.csv").scan()
    # the fix the message gives works: the column is kept under the other name
    keep = "listing_" + column.lstrip("_")
    rows = make(tmp_path, path="l.csv", rename={keep: column}).scan()
    assert rows[0][keep] == "x" and not rows[0].get("_rejected")


def test_a_rejected_column_cannot_reject_through_the_urls_listing(tmp_path: Path) -> None:
    (tmp_path / "u.csv").write_text(
        "url,state,gender,license,_rejected\nhttp://127.0.0.1/a.jpg,Goa,m,CC0,no\n"
    )
    with pytest.raises(SourceError, match="'_rejected' is a name fairsets uses itself"):
        build_source("urls", {"path": "u.csv"}, tmp_path, ["state", "gender"]).scan()


def test_a_column_shadowed_by_rename_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text(f"{HEADER},pid,identity\n{ROW},p1,p2\n")
    with pytest.raises(SourceError, match="column 'identity' is not read because rename takes 'identity'"):
        make(tmp_path, path="l.csv", rename={"identity": "pid"}).scan()


@pytest.mark.parametrize(
    ("line", "fields"), [("a.jpg,Goa,male,CC0-1.0,surplus", 5), ("a.jpg,Goa", 2), ("a.jpg,Goa,male", 3)]
)
def test_ragged_rows_name_the_line(tmp_path: Path, line: str, fields: int) -> None:
    (tmp_path / "l.csv").write_text(f"{HEADER}\nb.jpg,Goa,male,CC0-1.0\n\n{line}\n")
    with pytest.raises(SourceError, match=rf"l\.csv, line 4: {fields} field\(s\) where the header has 4"):
        make(tmp_path, path="l.csv").scan()


def test_bom_and_blank_lines_are_harmless(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_bytes(f"\ufeff{HEADER}\r\n{ROW}\r\n\r\n".encode())
    rows = make(tmp_path, path="l.csv").scan()
    assert [r["source_path"] for r in rows] == ["a.jpg"]


def test_header_only_listing_says_it_has_no_rows(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text(f"{HEADER}\n")
    with pytest.raises(SourceError, match=r"has no rows \(columns: path, state, gender, license\)") as exc:
        make(tmp_path, path="l.csv").scan()
    assert "none" not in str(exc.value)
    (tmp_path / "e.csv").write_text("\n\n")
    with pytest.raises(SourceError, match="is empty; its first line must name the columns"):
        make(tmp_path, path="e.csv").scan()


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (f"{HEADER},state", "column 'state' appears 2 times"),
        ("path,,state,gender,license", "column 2 of the header has no name"),
    ],
)
def test_bad_headers_are_refused(tmp_path: Path, header: str, match: str) -> None:
    (tmp_path / "l.csv").write_text(
        f"{header}\n{','.join(['a.jpg', 'x', 'Goa', 'male', 'CC0'][: header.count(',') + 1])}\n"
    )
    with pytest.raises(SourceError, match=match):
        make(tmp_path, path="l.csv").scan()


def test_parquet_with_repeated_column_is_refused(tmp_path: Path) -> None:
    cols = ["path", "state", "gender", "license", "state"]
    table = pa.Table.from_arrays(
        [pa.array([v]) for v in ["a.jpg", "Goa", "male", "CC0", "Assam"]], names=cols
    )
    pq.write_table(table, tmp_path / "l.parquet")
    with pytest.raises(SourceError, match="column 'state' appears 2 times"):
        make(tmp_path, path="l.parquet").scan()


def test_undecodable_listings_name_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "latin.csv").write_bytes(f"{HEADER},author\n{ROW},Jos\xe9\n".encode("latin-1"))
    with pytest.raises(SourceError, match=r"latin\.csv: not UTF-8 text \(line 2, byte offset"):
        make(tmp_path, path="latin.csv").scan()
    (tmp_path / "nul.csv").write_bytes(f"{HEADER}\n{ROW}\nb.jpg,G\x00a,male,CC0\n".encode())
    with pytest.raises(SourceError, match=r"nul\.csv, line 3: contains a NUL byte"):
        make(tmp_path, path="nul.csv").scan()
    (tmp_path / "utf16.csv").write_bytes(f"{HEADER}\n{ROW}\n".encode("utf-16"))
    with pytest.raises(SourceError, match=r"utf16\.csv: not UTF-8"):
        make(tmp_path, path="utf16.csv").scan()


def test_unclosed_quote_and_long_fields(tmp_path: Path) -> None:
    long = "x" * 100_000  # under the csv module's field limit: kept whole
    (tmp_path / "l.csv").write_text(f"{HEADER},note\n{ROW},{long}\n")
    assert make(tmp_path, path="l.csv").scan()[0]["note"] == long
    rest = "\n".join(f"b{i}.jpg,Goa,male,CC0,{'y' * 1000}" for i in range(200))
    (tmp_path / "q.csv").write_text(f'{HEADER},note\n{ROW},"open\n{rest}\n')
    with pytest.raises(
        SourceError, match=r"q\.csv, line \d+: field larger than field limit .*unclosed quote"
    ):
        make(tmp_path, path="q.csv").scan()


@pytest.mark.timeout(20)
def test_a_fifo_listing_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "l.csv")
    with pytest.raises(SourceError, match="is not a regular file"):
        make(tmp_path, path="l.csv").scan()


# -- published paths (issue 11, defect 8) ------------------------------------------------------


def test_published_paths_never_hold_the_curators_file_system(tmp_path: Path) -> None:
    listing_dir = tmp_path / "listing"
    (listing_dir / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    for p in ("listing/a.jpg", "listing/sub/b.jpg", "elsewhere/c.jpg", "elsewhere/d.jpg"):
        (tmp_path / p).write_bytes(p.encode())
    lines = [
        "a.jpg",  # relative
        f"{listing_dir}/sub/b.jpg",  # absolute, inside the listing's folder
        f"{tmp_path}/elsewhere/c.jpg",  # absolute, outside
        "../elsewhere/d.jpg",  # escapes with ..
    ]
    (listing_dir / "l.csv").write_text(HEADER + "\n" + "".join(f"{p},Goa,male,CC0\n" for p in lines))
    src = make(tmp_path, path="listing/l.csv")
    rows = src.scan()
    published = [r["source_path"] for r in rows]
    assert published[:2] == ["a.jpg", "sub/b.jpg"]
    assert all(re.fullmatch(r"external/[0-9a-f]{12}/[cd]\.jpg", p) for p in published[2:]), published
    for r in rows:
        assert str(tmp_path) not in r["key"] + r["source_path"] and "tmp" not in r["key"]
        assert KEY_RE.match(r["key"])
        assert (
            src.read(r)
            == (tmp_path / ("listing" if r["source_path"][0] in "as" else "elsewhere"))
            .joinpath(
                Path(r["source_path"]).name if r["source_path"].startswith("external") else r["source_path"]
            )
            .read_bytes()
        )
    # stable: the same listing gives the same keys
    assert [r["key"] for r in make(tmp_path, path="listing/l.csv").scan()] == [r["key"] for r in rows]


def test_the_same_file_listed_two_ways_is_listed_twice(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text(f"{HEADER}\na.jpg,Goa,male,CC0\n{tmp_path}/sub/../a.jpg,Goa,male,CC0\n")
    with pytest.raises(SourceError, match=r"image 'a\.jpg' is listed twice"):
        make(tmp_path, path="l.csv").scan()


# -- bounded local reads (issue 11, defect 4) --------------------------------------------------


def _listing(tmp_path: Path, *paths: str) -> object:
    lines = "".join(f"{p},Goa,male,CC0-1.0\n" for p in paths)
    (tmp_path / "l.csv").write_text(f"path,state,gender,license\n{lines}")
    return make(tmp_path, path="l.csv")


def _read(src, name: str) -> bytes:
    row = next(r for r in src.scan() if r["path"].endswith(name))
    return src.read(row)


@pytest.mark.timeout(10)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_a_listing_is_rejected_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.jpg")
    src = _listing(tmp_path, "pipe.jpg")
    with pytest.raises(SourceRejected, match=r"cannot read pipe\.jpg: not a regular file: it is a FIFO"):
        _read(src, "pipe.jpg")


@pytest.mark.timeout(10)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_a_folder_is_a_rejected_candidate_not_a_hang_or_a_loss(tmp_path: Path) -> None:
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.jpg").write_bytes(b"\xff\xd8\xff jpeg")
    os.mkfifo(tmp_path / "imgs" / "b.jpg")
    src = make(tmp_path, path="imgs", defaults={"state": "Goa", "gender": "male", "license": "CC0-1.0"})
    assert sorted(Path(r["path"]).name for r in src.scan()) == ["a.jpg", "b.jpg"]
    assert _read(src, "a.jpg") == b"\xff\xd8\xff jpeg"
    with pytest.raises(SourceRejected, match="it is a FIFO"):
        _read(src, "b.jpg")


@pytest.mark.timeout(10)
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_device_files_and_links_to_them_are_never_read(tmp_path: Path) -> None:
    (tmp_path / "zero.jpg").symlink_to("/dev/zero")
    (tmp_path / "folder.jpg").mkdir()
    src = _listing(tmp_path, "/dev/zero", "zero.jpg", "folder.jpg")
    with pytest.raises(SourceRejected, match="it is a character device"):
        _read(src, "/dev/zero")
    with pytest.raises(SourceRejected, match="it is a character device"):
        _read(src, "zero.jpg")
    with pytest.raises(SourceRejected, match="it is a directory"):
        _read(src, "folder.jpg")


@pytest.mark.timeout(30)
def test_a_file_over_max_bytes_is_refused_from_stat_without_reading_it(tmp_path: Path) -> None:
    import tracemalloc

    big = tmp_path / "big.jpg"
    with big.open("wb") as fh:  # sparse: 1 GiB on paper, nothing on disk
        fh.truncate(1 << 30)
    src = _listing(tmp_path, "big.jpg")
    tracemalloc.start()
    try:
        with pytest.raises(SourceRejected, match=r"big\.jpg: too many bytes: 1073741824 > 20000000"):
            _read(src, "big.jpg")  # the default cap: the decode step's default max_bytes
        src.max_bytes = 1000
        with pytest.raises(SourceRejected, match="too many bytes: 1073741824 > 1000"):
            _read(src, "big.jpg")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000
    (tmp_path / "ok.jpg").write_bytes(b"x" * 1000)
    assert len(_read(_listing(tmp_path, "ok.jpg"), "ok.jpg")) == 1000  # exactly the cap is allowed


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="no procfs here")
def test_the_read_is_bounded_even_when_stat_reports_no_size() -> None:
    from fairsets.fetch.localfile import LocalFileRefused, read_local_file

    assert os.stat("/proc/self/status").st_size == 0  # procfs: size 0, yet content
    assert len(read_local_file("/proc/self/status", 100_000)) > 100
    with pytest.raises(LocalFileRefused, match="more than 100"):
        read_local_file("/proc/self/status", 100)


@pytest.mark.timeout(10)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_swapped_in_after_the_checks_cannot_block_the_open(tmp_path: Path, monkeypatch) -> None:
    import fairsets.fetch.localfile as localfile

    target = tmp_path / "a.jpg"
    target.write_bytes(b"x" * 10)
    real_open = os.open

    def swap_then_open(path, flags, *args, **kwargs):
        if os.fspath(path) == os.path.realpath(target):  # the checks passed; the attacker wins the race:
            target.unlink()  # a FIFO with no writer where the file was
            os.mkfifo(target)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(localfile.os, "open", swap_then_open)
    with pytest.raises(localfile.LocalFileRefused, match="it is a FIFO"):  # without O_NONBLOCK: a hang
        localfile.read_local_file(target, 100)


def test_the_source_cap_is_the_decode_steps_max_bytes(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    pytest.importorskip("cv2")
    import fairsets.vision  # noqa: F401  (registers the decode step)
    from fairsets.pipeline import tasks

    (tmp_path / "ok.jpg").write_bytes(b"x" * 600)
    (tmp_path / "big.jpg").write_bytes(b"x" * 601)
    src = _listing(tmp_path, "ok.jpg", "big.jpg")
    spec = {
        "source": {
            "type": "local",
            "params": {"path": "l.csv"},
            "base_dir": str(tmp_path),
            "groups": ["state", "gender"],
        },
        "steps": [{"name": "decode", "params": {"max_bytes": 600}}],
    }
    worker_source = tasks._source(spec)
    assert worker_source.max_bytes == 600
    assert len(_read(worker_source, "ok.jpg")) == 600
    with pytest.raises(SourceRejected, match="too many bytes: 601 > 600"):
        _read(worker_source, "big.jpg")
    assert src.max_bytes is None  # a source built outside a task keeps the default cap


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (f"{HEADER},Status", "column 'Status' is a name fairsets uses itself"),
        (f"{HEADER},State", r"column 'state' appears 2 times in the header \(ignoring case\)"),
        (f"{HEADER},Note,note", r"column 'Note' appears 2 times in the header \(ignoring case\)"),
    ],
)
def test_column_names_differing_only_in_case(tmp_path: Path, header: str, match: str) -> None:
    # DuckDB reads the pool case-insensitively: "Status" would shadow or be renamed "Status_1"
    extra = ",x" * (header.count(",") - HEADER.count(","))
    (tmp_path / "l.csv").write_text(f"{header}\n{ROW}{extra}\n")
    with pytest.raises(SourceError, match=match):
        make(tmp_path, path="l.csv").scan()


def test_a_column_that_differs_in_case_from_a_required_one_says_how_to_map_it(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,State,gender,license\na.jpg,Goa,male,CC0-1.0\n")
    with pytest.raises(
        SourceError, match=r"column 'State' differs only in case from 'state'.*\{state = \"State\"\}"
    ):
        make(tmp_path, path="l.csv").scan()
    assert make(tmp_path, path="l.csv", rename={"state": "State"}).scan()[0]["state"] == "Goa"


@pytest.mark.parametrize("column", ["sp ace", "tab\there", "new\nline", "{{ jinja }}", "bell\x07"])
def test_column_names_with_spaces_or_control_characters_are_refused(tmp_path: Path, column: str) -> None:
    # such names become invalid Croissant @ids ("imbalanced_train/sp ace")
    import csv

    with (tmp_path / "l.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows([[*HEADER.split(","), column], [*ROW.split(","), "x"]])
    with pytest.raises(SourceError, match="has spaces or control characters in its name") as exc:
        make(tmp_path, path="l.csv").scan()
    keep = re.search(r"rename = \{(\w+) = ", str(exc.value)).group(1)
    assert make(tmp_path, path="l.csv", rename={keep: column}).scan()[0][keep] == "x"


def test_every_column_error_is_one_line(tmp_path: Path) -> None:
    import csv

    for column in ["new\nline", "_x\ny", "Sta\ntus"]:
        with (tmp_path / "l.csv").open("w", newline="") as fh:
            csv.writer(fh).writerows([[*HEADER.split(","), column], [*ROW.split(","), "x"]])
        with pytest.raises(SourceError) as exc:
            make(tmp_path, path="l.csv").scan()
        assert "\n" not in str(exc.value), str(exc.value)


@pytest.mark.timeout(20)
def test_a_fifo_urls_listing_is_named_as_such(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "u.csv")
    with pytest.raises(SourceError, match=r"u\.csv is not a regular file"):
        build_source("urls", {"path": "u.csv"}, tmp_path, ["state", "gender"]).scan()


def test_folder_paths_are_used_exactly_as_found(tmp_path: Path) -> None:
    """Names with surrounding spaces or a leading ``~`` are read from the folder, never elsewhere."""
    root = tmp_path / "imgs"
    (root / "~root").mkdir(parents=True)
    names = {" lead.jpg": b"lead", "tail .jpg": b"tail", "~nosuchuser.jpg": b"tilde", "~root/x.jpg": b"home"}
    for name, data in names.items():
        (root / name).write_bytes(data)
    (root / "lead.jpg").write_bytes(b"other")  # what a stripped " lead.jpg" would read instead
    src = make(tmp_path, path="imgs", defaults={"license": "CC0-1.0", "state": "Goa", "gender": "male"})
    rows = src.scan()
    got = {r["source_path"]: src.read(r) for r in rows}
    assert got == names | {"lead.jpg": b"other"}
    assert len({r["key"] for r in rows}) == len(rows)


def test_listing_values_are_stripped_and_a_tilde_name_does_not_crash(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"a")
    (tmp_path / "~nosuchuser.jpg").write_bytes(b"t")
    (tmp_path / "list.csv").write_text(
        "path,state,gender,license\n a.jpg ,Goa,male,CC0-1.0\n~nosuchuser.jpg,Goa,male,CC0-1.0\n"
    )
    src = make(tmp_path, path="list.csv")
    rows = src.scan()
    assert {r["source_path"]: src.read(r) for r in rows} == {"a.jpg": b"a", "~nosuchuser.jpg": b"t"}
