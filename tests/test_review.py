"""Manual review: HTML contact sheet + CSV export, CSV import with validation, decisions table."""

from __future__ import annotations

import base64
import csv
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from PIL import Image

from fairsets.pipeline.review import (
    DECISION_COLUMNS,
    ReviewError,
    export_review,
    import_review,
    load_decisions,
    write_decisions,
)

COLUMNS = ["state", "gender"]
CC_BY_SA = "https://creativecommons.org/licenses/by-sa/4.0/"


def _image(w: int, h: int, fmt: str = "JPEG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (180, 140, 100)).save(buf, format=fmt)
    return buf.getvalue()


def _rows() -> list[dict[str, Any]]:
    def row(key: str, state: str, gender: str, hint: str, **extra: Any) -> dict[str, Any]:
        return {
            "key": key,
            "state": state,
            "gender": gender,
            "url": f"https://img.example.org/{key}.jpg",
            "source_url": f"https://page.example.org/{key}",
            "license_hint": hint,
            "query": f"{state} {'man' if gender == 'male' else 'woman'} face",
            "title": f"<b>{key}</b> & co",
            **extra,
        }

    return [
        row("serpapi_a", "Mizoram", "male", CC_BY_SA),
        row("serpapi_b", "Mizoram", "female", "Creative Commons licences (filter cl)"),
        row("serpapi_c", "Tripura", "female", "https://creativecommons.org/licenses/by-nc/2.0/"),
        row("serpapi_d", "Tripura", "male", "", license="CC0-1.0"),
        row("serpapi_e", "Ladakh", "female", "javascript:alert(1)"),
    ]


IMAGES = {
    "serpapi_a": _image(1200, 800),
    "serpapi_b": _image(300, 500, "PNG"),
    "serpapi_c": None,  # not downloadable
    "serpapi_d": _image(100, 80),
    "serpapi_e": b"not an image",
}


class _Sheet(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[str] = []
        self.links: list[str] = []
        self.external: list[tuple[str, str]] = []
        self.cards = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"] or "")
        if tag == "a":
            self.links.append(a["href"] or "")
        if tag in ("script", "link", "iframe") or (tag == "img" and not (a["src"] or "").startswith("data:")):
            self.external.append((tag, str(a)))
        if tag == "div" and a.get("class") == "card":
            self.cards += 1


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict[str, str]], header: list[str] | None = None) -> None:
    header = header or list(rows[0])
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def exported(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    asked: list[str] = []

    def image_bytes(key: str) -> bytes | None:
        asked.append(key)
        return IMAGES[key]

    out = export_review(_rows(), image_bytes, tmp_path / "review", columns=COLUMNS)
    assert asked == [r["key"] for r in _rows()]
    return out, tmp_path / "review"


def test_export_contact_sheet(exported: tuple[dict[str, Any], Path]) -> None:
    out, folder = exported
    assert out == {
        "html": str(folder / "review.html"),
        "csv": str(folder / "review.csv"),
        "rows": 5,
        "images": 3,
        "missing_images": 2,
    }
    assert sorted(p.name for p in folder.iterdir()) == ["review.csv", "review.html"]  # no temp files left
    text = (folder / "review.html").read_text(encoding="utf-8")
    sheet = _Sheet()
    sheet.feed(text)
    sheet.close()
    assert sheet.cards == 5 and sheet.external == []
    assert len(sheet.imgs) == 3 and text.count("image unavailable") == 2
    sizes = []
    for src in sheet.imgs:
        assert src.startswith("data:image/jpeg;base64,")
        im = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        assert im.format == "JPEG"
        sizes.append(im.size)
    assert sizes == [(256, 171), (154, 256), (100, 80)]  # at most 256 px, never enlarged
    for key in IMAGES:
        assert f"<code>{key}</code>" in text
    assert "state=Mizoram, gender=male" in text and "Tripura woman face" in text
    assert "&lt;b&gt;serpapi_a&lt;/b&gt; &amp; co" in text  # titles escaped, not rendered
    assert "https://page.example.org/serpapi_a" in sheet.links
    assert "https://img.example.org/serpapi_a.jpg" in sheet.links
    assert not any(link.startswith("javascript:") for link in sheet.links)
    assert CC_BY_SA in text


def test_export_csv(exported: tuple[dict[str, Any], Path]) -> None:
    _, folder = exported
    with open(folder / "review.csv", newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert header == [
        "key",
        "state",
        "gender",
        "url",
        "source_url",
        "license_hint",
        "decision",
        "license",
        "author",
        "note",
    ]
    rows = _read_csv(folder / "review.csv")
    assert [(r["key"], r["state"], r["gender"]) for r in rows] == [
        ("serpapi_a", "Mizoram", "male"),
        ("serpapi_b", "Mizoram", "female"),
        ("serpapi_c", "Tripura", "female"),
        ("serpapi_d", "Tripura", "male"),
        ("serpapi_e", "Ladakh", "female"),
    ]
    # licence prefilled only where the hint (or a known licence) names an allowed one
    assert [r["license"] for r in rows] == ["CC-BY-SA-4.0", "", "", "CC0-1.0", ""]
    assert {(r["decision"], r["author"], r["note"]) for r in rows} == {("", "", "")}
    assert rows[0]["url"] == "https://img.example.org/serpapi_a.jpg"
    assert rows[0]["source_url"] == "https://page.example.org/serpapi_a"
    assert rows[0]["license_hint"] == CC_BY_SA


def test_import_decisions(exported: tuple[dict[str, Any], Path]) -> None:
    _, folder = exported
    rows = _read_csv(folder / "review.csv")
    rows[0].update(decision="accept", author="Lalremruati", note="from the photographer's page")
    rows[1].update(decision="Reject ", note="not from Mizoram")
    rows[3].update(decision="accept")  # CC0: no author needed
    # rows[2], rows[4] left blank: still pending
    _write_csv(folder / "review.csv", rows)
    pending = {r["key"]: r for r in _rows()}
    decisions = import_review(folder / "review.csv", pending)
    stamp = decisions[0]["reviewed_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    assert decisions == [
        {
            "key": "serpapi_a",
            "decision": "accept",
            "license": "CC-BY-SA-4.0",
            "author": "Lalremruati",
            "note": "from the photographer's page",
            "reviewed_at": stamp,
        },
        {
            "key": "serpapi_b",
            "decision": "reject",
            "license": "",
            "author": "",
            "note": "not from Mizoram",
            "reviewed_at": stamp,
        },
        {
            "key": "serpapi_d",
            "decision": "accept",
            "license": "CC0-1.0",
            "author": "",
            "note": "",
            "reviewed_at": stamp,
        },
    ]


def test_import_reports_every_error(tmp_path: Path) -> None:
    pending = {r["key"]: r for r in _rows()}
    header = ["key", "state", "gender", "decision", "license", "author", "note"]
    lines = [
        {"key": "serpapi_a", "decision": "accept", "license": "CC BY 4.0", "author": ""},  # 2: no author
        {"key": "serpapi_zz", "decision": "reject"},  # 3: unknown key
        {"key": "serpapi_b", "decision": "maybe"},  # 4: bad decision
        {"key": "serpapi_c", "decision": "accept", "license": "CC BY-NC 2.0", "author": "A"},  # 5: NC
        {"key": "serpapi_d", "decision": "accept", "license": "", "author": "B"},  # 6: no licence
        {"key": "serpapi_e", "decision": "accept", "license": "All rights reserved", "author": "C"},  # 7
        {"key": "serpapi_b", "decision": ""},  # 8: duplicate key
        {"key": "", "decision": "accept", "note": "orphan"},  # 9: no key
        {"key": "", "decision": ""},  # 10: an empty line: ignored
    ]
    _write_csv(tmp_path / "review.csv", [{h: r.get(h, "") for h in header} for r in lines], header)
    with pytest.raises(ReviewError) as info:
        import_review(tmp_path / "review.csv", pending)
    assert info.value.errors == [
        "line 2 (serpapi_a): licence CC-BY-4.0 requires attribution: fill the author column",
        "line 3 (serpapi_zz): unknown key 'serpapi_zz' (not a pending candidate)",
        "line 4 (serpapi_b): decision must be accept, reject or blank, not 'maybe'",
        "line 5 (serpapi_c): licence 'CC BY-NC 2.0' cannot be accepted: "
        "non-commercial licence (NC) is not allowed (CC-BY-NC-2.0): 'CC BY-NC 2.0'",
        "line 6 (serpapi_d): accept needs a licence (license column is empty)",
        "line 7 (serpapi_e): licence 'All rights reserved' cannot be accepted: "
        "unknown or unrecognised licence: 'All rights reserved' (restricting term 'all')",
        "line 8 (serpapi_b): key 'serpapi_b' already reviewed on line 4",
        "line 9 (no key): empty key",
    ]
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("8 problem(s) in review.csv:\n  line 2 (serpapi_a)")


def test_import_needs_the_columns(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("key,decision,note\nserpapi_a,accept,x\n", encoding="utf-8")
    with pytest.raises(ReviewError, match=r"line 1: missing column\(s\) \['license', 'author'\]"):
        import_review(tmp_path / "r.csv", {"serpapi_a": {}})


def test_import_refuses_ragged_rows_and_repeated_columns(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(
        "key,decision,license,author,note\n"
        "serpapi_a,accept,CC0-1.0,Ann,fine,\n"  # a trailing empty field: harmless
        "serpapi_b,accept,CC0-1.0,Bo,great, really\n",  # an unquoted comma: the note would be cut
        encoding="utf-8",
    )
    with pytest.raises(ReviewError) as info:
        import_review(tmp_path / "r.csv", {"serpapi_a": {}, "serpapi_b": {}})
    assert info.value.errors == ["line 3 (serpapi_b): 6 fields where the header has 5; quote commas"]
    (tmp_path / "d.csv").write_text("key,decision,license,author,license\nserpapi_a,accept,CC0-1.0,A,x\n")
    with pytest.raises(ReviewError, match=r"line 1: column\(s\) \['license'\] appear more than once"):
        import_review(tmp_path / "d.csv", {"serpapi_a": {}})


def test_import_tolerates_a_bom(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(
        "\ufeffkey,decision,license,author\nserpapi_a,reject,,\n\nserpapi_b,accept,cc-by-sa-3.0,Ann\n",
        encoding="utf-8",
    )
    out = import_review(tmp_path / "r.csv", {"serpapi_a": {}, "serpapi_b": {}})
    assert [(d["key"], d["decision"], d["license"], d["author"]) for d in out] == [
        ("serpapi_a", "reject", "", ""),
        ("serpapi_b", "accept", "CC-BY-SA-3.0", "Ann"),
    ]


def test_decisions_round_trip_and_merge(tmp_path: Path) -> None:
    path = tmp_path / "review" / "decisions.parquet"
    assert load_decisions(path) == {}
    first = [
        {
            "key": "k2",
            "decision": "accept",
            "license": "CC0-1.0",
            "author": "",
            "note": "",
            "reviewed_at": "t1",
        },
        {
            "key": "k1",
            "decision": "reject",
            "license": "",
            "author": "",
            "note": "blurry",
            "reviewed_at": "t1",
        },
    ]
    info = write_decisions(path, first)
    assert info["rows"] == 2 and info["path"] == str(path)
    assert pq.read_table(path).column_names == list(DECISION_COLUMNS)
    assert load_decisions(path) == {d["key"]: d for d in first}
    second = [
        {
            "key": "k1",
            "decision": "accept",
            "license": "CC-BY-4.0",
            "author": "Ann",
            "note": "",
            "reviewed_at": "t2",
        },
        {"key": "k3", "decision": "reject", "license": "", "author": "", "note": "", "reviewed_at": "t2"},
    ]
    write_decisions(path, second)
    merged = load_decisions(path)
    assert list(merged) == ["k1", "k2", "k3"]  # sorted by key
    assert merged["k1"] == second[0] and merged["k2"] == first[0] and merged["k3"] == second[1]
    assert [p.name for p in path.parent.iterdir()] == ["decisions.parquet"]
    empty = tmp_path / "empty.parquet"
    write_decisions(empty, [])
    assert load_decisions(empty) == {} and pq.read_table(empty).column_names == list(DECISION_COLUMNS)


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://page.example.org/a_(1)", True),
        ("javascript:alert(1)", False),
        ("JAVASCRIPT:alert(1)", False),
        ("data:text/html,<b>x</b>", False),
        ("https://user:pass@evil.example/", False),
        ("https://page.example.org/a b", False),
        ("https://page.example.org/\u202egpj.exe", False),
    ],
)
def test_contact_sheet_links_only_safe_urls(url: str, linked: bool) -> None:
    from fairsets.pipeline.review import _link

    out = _link(url)
    assert out.startswith("<a ") is linked
    if not linked:
        assert "href" not in out
