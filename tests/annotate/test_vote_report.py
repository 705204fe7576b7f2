"""The vote's agreement report: the numbers of the consensus stats, thumbnails, escaping, atomic write."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser

import pytest
from PIL import Image

import fairsets.core.atomic as atomic
from fairsets.annotate.vote.consensus import Ballot, consensus
from fairsets.annotate.vote.report import THUMB_SIDE, Example, render_vote_report, write_vote_report

NAMES = ("intern", "phi", "llava")
GENDER = ["female", "male", "mixed", "unclear"]
HOSTILE = "<script>alert(1)</script>"


class Page(HTMLParser):
    """What a reader sees: tables as rows of cell texts, images, and each card's section and votes."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.imgs: list[dict[str, str]] = []
        self.cards: list[dict] = []
        self.tags: list[str] = []
        self._stack: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._section = ""
        self._h3 = False
        self._li: dict | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "table":
            self._stack.append([])
        elif tag == "tr" and self._stack:
            self._stack[-1].append([])
        elif tag in ("td", "th") and self._stack:
            self._cell = []
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "h3":
            self._section = a.get("id", "")
        elif tag == "figure":
            self.cards.append({"section": self._section, "votes": [], "text": []})
        elif tag == "li":
            self._li = {"class": a.get("class", ""), "text": []}

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._stack and self._cell is not None:
            self._stack[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self._stack:
            self.tables.append(self._stack.pop())
        elif tag == "li" and self._li is not None and self.cards:
            self.cards[-1]["votes"].append((self._li["class"], "".join(self._li["text"]).strip()))
            self._li = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._li is not None:
            self._li["text"].append(data)
        if self.cards:
            self.cards[-1]["text"].append(data)

    def table(self, first_header: str) -> list[list[str]]:
        return next(t for t in self.tables if t and t[0] and t[0][0] == first_header)


def jpeg(colour="red", size=(320, 240)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG")
    return buf.getvalue()


def ballot(i: int, *labels, statuses=()) -> Ballot:
    return Ballot("00000", f"k{i:04d}", 0, tuple(labels), tuple(statuses))


def vote_stats(names=NAMES) -> dict:
    ballots = [ballot(i, "male", "male", "male") for i in range(6)]
    ballots += [ballot(10 + i, "female", "female", "female") for i in range(4)]
    ballots += [
        ballot(20, "mixed", "mixed", "female"),
        ballot(21, "male", "female", "male"),
        ballot(22, "female", None, "female", statuses=("ok", "refused", "ok")),
        ballot(23, None, "male", "male", statuses=("invalid", "ok", "ok")),
        ballot(24, "unclear", "male", "unclear"),
    ]
    return consensus(ballots, names, labels=GENDER, relax={"mixed": 2}, per_class_cap=5, seed=1).stats


def examples(names=NAMES) -> list[Example]:
    a, b, c = names
    return [
        Example("00000/k0000/0", jpeg("blue"), {a: "male", b: "male", c: "male"}, "male", "all"),
        Example("00000/k0020/0", jpeg("green"), {a: "mixed", b: "mixed", c: "female"}, "mixed", "relaxed"),
        Example("00000/k0021/0", jpeg("red"), {a: "male", b: "female", c: "male"}, None, None),
        Example("00000/k0023/0", jpeg("gray"), {a: "invalid", b: "male", c: "male"}, None, None),
    ]


def test_the_page_shows_the_numbers_of_the_stats():
    stats = vote_stats()
    page = Page(render_vote_report(stats, examples(), title="gender vote"))

    summary = {row[0]: row[1] for row in page.table("items voted")}
    assert summary["items voted"] == "15"
    assert summary["no consensus"].startswith(f"{stats['no_consensus']} ")
    assert summary["kept by a relaxed rule"] == str(stats["relaxed"]) == "1"
    assert sum(stats["counts"]["kept"].values()) == 10  # 6 male capped at 5, 4 female, 1 mixed (relaxed)
    assert summary["kept after consensus and the cap of 5 per class"] == "10"
    fleiss = stats["fleiss_kappa"]
    assert summary["Fleiss' κ"] == f"{fleiss:.3f} over {stats['fleiss_items']} items every annotator answered"

    classes = page.table("class")
    assert classes[0] == ["class", *(f"votes: {n}" for n in NAMES), "consensus", "kept"]
    for row, label in zip(classes[1:], GENDER, strict=True):
        votes = [str(stats["counts"]["votes"][n][label]) for n in NAMES]
        counts = stats["counts"]
        assert row == [label, *votes, str(counts["consensus"][label]), str(counts["kept"][label])]
    assert classes[2][-2:] == ["6", "5"]  # male: 6 agreed, the cap kept 5

    answers = page.table("annotator")
    assert answers[1:] == [
        ["intern", "1 (6.7 %)", "0 (0.0 %)"],
        ["phi", "0 (0.0 %)", "1 (6.7 %)"],
        ["llava", "0 (0.0 %)", "0 (0.0 %)"],
    ]

    pairs = page.table("a")
    assert [row[:3] for row in pairs[1:]] == [[p["a"], p["b"], str(p["items"])] for p in stats["pairs"]]
    for row, pair in zip(pairs[1:], stats["pairs"], strict=True):
        assert row[3:] == [f"{pair['agreement']:.3f}", f"{pair['cohen_kappa']:.3f}"]

    # one confusion matrix per pair, rows a's label and columns b's in stats["labels"] order
    matrices = [t for t in page.tables if t[0][0] == "" and len(t) == len(GENDER) + 1]
    assert len(matrices) == len(stats["pairs"]) == 3
    for table, pair in zip(matrices, stats["pairs"], strict=True):
        assert table[0] == ["", *GENDER]
        assert [row[0] for row in table[1:]] == GENDER
        assert [[int(c) for c in row[1:]] for row in table[1:]] == pair["confusion"]


def test_run_info_is_shown_when_given():
    run = {
        "attribute": "gender",
        "seed": 7,
        "annotators": [{"name": "intern", "model": "internvl-2", "host": "127.0.0.1:8001"}],
        "requests_sent": 1234,
        "cache_hits": 56,
        "pending": 3,
    }
    page = Page(render_vote_report(vote_stats(), [], title="t", run=run))
    rows = {row[0]: row[1] for row in page.table("attribute") if len(row) == 2}
    assert rows["seed"] == "7" and rows["requests_sent"] == "1,234" and rows["pending"] == "3"
    assert page.table("name") == [["name", "model", "host"], ["intern", "internvl-2", "127.0.0.1:8001"]]
    assert 'id="run"' not in render_vote_report(vote_stats(), [], title="t")


def test_one_decodable_jpeg_thumbnail_per_example_in_its_section():
    exs = examples()
    page = Page(render_vote_report(vote_stats(), exs, title="t"))
    assert len(page.imgs) == len(exs)
    for img, ex in zip(page.imgs, exs, strict=True):
        assert img["alt"] == ex.item
        head, _, data = img["src"].partition(",")
        assert head == "data:image/jpeg;base64"
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as im:
            assert im.format == "JPEG" and max(im.size) == THUMB_SIDE
            im.load()
    assert [c["section"] for c in page.cards] == ["consensus", "consensus", "disagreement", "disagreement"]
    # captions: item id, consensus label and rule, every vote; votes against the consensus marked
    relaxed = page.cards[1]
    assert "00000/k0020/0" in "".join(relaxed["text"]) and "mixed (relaxed)" in "".join(relaxed["text"])
    assert [(cls, txt) for cls, txt in relaxed["votes"]] == [
        ("", "intern: mixed"),
        ("", "phi: mixed"),
        ("off", "llava: female ✗"),
    ]
    split = page.cards[2]
    assert "no consensus" in "".join(split["text"])
    assert [cls for cls, _ in split["votes"]] == ["", "off", ""]  # male is the most common vote
    failed = page.cards[3]
    assert failed["votes"][0] == ("noans off", "intern: invalid ✗")


def test_an_image_that_does_not_decode_is_named_not_embedded():
    bad = Example("00000/k0001/0", b"not a jpeg", {"intern": "male", "phi": "male"}, "male", "all")
    text = render_vote_report(vote_stats(), [bad, *examples()[:1]], title="t")
    page = Page(text)
    assert len(page.imgs) == 1 and "image unavailable" in "".join(page.cards[0]["text"])


def test_hostile_names_labels_items_and_run_values_stay_text():
    names = (HOSTILE, 'x" onmouseover="alert(2)', "llava")
    labels = ["<b>female</b>", '"><img src=x onerror=alert(3)>']
    stats = consensus(
        [
            ballot(1, labels[0], labels[0], labels[0]),
            ballot(2, labels[0], labels[1], labels[1]),
        ],
        names,
        labels=labels,
    ).stats
    exs = [
        Example("s/<i>k</i>/0", jpeg(), {n: labels[0] for n in names}, labels[0], "all"),
        Example(
            "s/k2/0", jpeg(), dict(zip(names, [labels[0], labels[1], labels[1]], strict=True)), None, None
        ),
    ]
    run = {"model": HOSTILE, HOSTILE: [{"host": '"><script>x</script>'}]}
    text = render_vote_report(stats, exs, title=HOSTILE, run=run)
    page = Page(text)
    assert "<script" not in text.lower()
    assert {t for t in page.tags} <= {
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "table", "tr", "th",
        "td", "caption", "div", "span", "b", "code", "ul", "li", "figure", "figcaption", "img", "svg",
        "text", "rect",
    }  # fmt: skip
    assert len(page.imgs) == 2  # the label "<img ...>" made no image
    assert all(set(img) == {"src", "alt"} for img in page.imgs)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert page.table("class")[0][1] == f"votes: {HOSTILE}"  # shown as text
    assert page.cards[0]["votes"][0] == ("", f"{HOSTILE}: <b>female</b>")


def test_undefined_kappa_shows_a_dash():
    # everyone says male: chance agreement is 1, so κ is undefined; the third pair shares no item
    stats = consensus(
        [ballot(1, "male", "male", None), ballot(2, "male", "male", None), ballot(3, None, None, "male")],
        NAMES,
        labels=GENDER,
    ).stats
    assert stats["fleiss_kappa"] is None and [p["cohen_kappa"] for p in stats["pairs"]] == [None, None, None]
    text = render_vote_report(stats, [], title="t")
    page = Page(text)
    assert page.table("items voted")[-1][1] == "— over 0 items every annotator answered"
    assert [row[3:] for row in page.table("a")[1:]] == [["1.000", "—"], ["—", "—"], ["—", "—"]]
    assert "None" not in text and "nan" not in text


def test_zero_examples_and_zero_items_make_a_complete_page():
    stats = consensus([], NAMES, labels=GENDER).stats
    text = render_vote_report(stats, [], title="empty")
    page = Page(text)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert page.imgs == [] and page.cards == [] and "No examples." in text
    assert page.table("items voted")[0] == ["items voted", "0"]


def test_the_write_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "reports" / "vote.html"
    assert write_vote_report(out, vote_stats(), examples(), title="first") == out
    first = out.read_text(encoding="utf-8")
    assert "<h1>first</h1>" in first and len(Page(first).imgs) == 4

    broken = vote_stats()
    broken["pairs"][0]["confusion"] = [["x"]]  # fails while rendering: nothing is written
    with pytest.raises(ValueError):
        write_vote_report(out, broken, examples(), title="second")
    assert out.read_text(encoding="utf-8") == first

    def fail(_path):
        raise OSError("disk full")

    monkeypatch.setattr(atomic, "_fsync_file", fail)  # fails after the bytes hit the temporary file
    with pytest.raises(OSError, match="disk full"):
        write_vote_report(tmp_path / "new.html", vote_stats(), examples(), title="third")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]
    assert [p.name for p in out.parent.iterdir()] == ["vote.html"]


def test_krippendorff_alpha_is_shown_beside_fleiss_kappa():
    # what consensus() puts in stats["krippendorff_alpha"]: α over every item with two answers or more
    from test_agreement import hand_alpha

    from fairsets.annotate.agreement import krippendorff_alpha, ratings_table

    votes = [
        ["male", "male", "male"],
        ["female", None, "female"],
        ["male", "female", None],
        [None, None, "mixed"],
    ]
    votes += [["female", "female", "mixed"], ["unclear", "unclear", None]]
    stats = dict(vote_stats())
    stats["krippendorff_alpha"] = krippendorff_alpha(ratings_table(votes, GENDER))
    summary = {row[0]: row[1] for row in Page(render_vote_report(stats, [], title="t")).table("items voted")}
    alpha = float(hand_alpha(votes))
    assert summary["Krippendorff's α (nominal)"] == (
        f"{alpha:.3f} over 5 items with two or more answers (12 answers; an invalid or refused answer is "
        "missing, the item stays)"
    )
    assert "Fleiss' κ" in summary  # beside it
    stats.pop("krippendorff_alpha")
    summary = {row[0]: row[1] for row in Page(render_vote_report(stats, [], title="t")).table("items voted")}
    assert summary["Krippendorff's α (nominal)"] == "— (not computed)"


def test_the_vote_stats_carry_krippendorff_alpha_over_items_with_missing_answers():
    from test_agreement import hand_alpha

    ballots = [
        ballot(1, "male", "male", "male"),
        ballot(2, "female", None, "female", statuses=("ok", "refused", "ok")),
        ballot(3, "male", "female", None, statuses=("ok", "ok", "invalid")),
        ballot(4, None, None, "mixed", statuses=("invalid", "refused", "ok")),
        ballot(5, "female", "female", "mixed"),
        ballot(6, "unclear", "unclear", None, statuses=("ok", "ok", "refused")),
    ]
    stats = consensus(ballots, NAMES, labels=GENDER).stats
    votes = [list(b.labels) for b in ballots]
    got = stats["krippendorff_alpha"]
    assert got["alpha"] == pytest.approx(float(hand_alpha(votes)), abs=1e-12)
    assert (got["items"], got["values"], got["items_total"]) == (5, 12, 6)
    assert stats["fleiss_items"] == 2  # Fleiss' κ sees only the items every annotator answered
    summary = {row[0]: row[1] for row in Page(render_vote_report(stats, [], title="t")).table("items voted")}
    assert summary["Krippendorff's α (nominal)"].startswith(f"{got['alpha']:.3f} over 5 items")
