"""``fairsets card update ANN --audit DIR``: a persons audit's headline tables in the card of the
annotation folder.

The annotation folder is the publishing tests' (``tests/annotate/publish_ann.py``: what
``fairsets publish`` prepares), its alt-texts rewritten so that some speak of a thief; the audit is
computed on it by the real modules (``tables.connect``, ``composition``, ``crime_association``,
``themes``). The numbers the card must show are computed again here, in plain Python over the
tables, and looked for in the card.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

_ANNOTATE = Path(__file__).resolve().parents[1] / "annotate"
if str(_ANNOTATE) not in sys.path:  # publish_ann: the annotation folder the publishing tests use
    sys.path.insert(0, str(_ANNOTATE))

from person_tables import ImageSpec, write_person_tables  # noqa: E402
from publish_ann import SHARDS, make_ann, write_marker  # noqa: E402

from cli_helpers import assert_one_line_error, run_cli  # noqa: E402
from fairsets.annotate import layout  # noqa: E402
from fairsets.annotate.layout import AnnotationError  # noqa: E402
from fairsets.annotate.publish.card import check_annotation_card, render_card  # noqa: E402
from fairsets.annotate.publish.dataset import (  # noqa: E402
    card_blocks_dir,
    prepare,
    prepared_dir,
    read_card_blocks,
    verify_prepared,
    write_card_block,
)
from fairsets.audit.card import update_card  # noqa: E402
from fairsets.audit.persons import run as audit_run  # noqa: E402
from fairsets.audit.persons import tables  # noqa: E402
from fairsets.audit.persons.card import SCHEMA, persons_card_section  # noqa: E402
from fairsets.audit.persons.composition import composition  # noqa: E402
from fairsets.audit.persons.crime import crime_association  # noqa: E402
from fairsets.audit.persons.themes import themes  # noqa: E402
from fairsets.core.atomic import sha256_file  # noqa: E402
from fairsets.core.tables import write_table  # noqa: E402

REPO = "org/person-annotations"
MIN_COUNT = 12
N_IMAGES = 40  # per shard


# --------------------------------------------------------------------------- the folder and its audit


def _write_ann(root: Path) -> Path:
    """make_ann's folder with planted alt-texts (the persons markers rewritten with the new hashes):
    every second image with a perceived male box speaks of a thief, every sixth of the others."""
    make_ann(root, n_images=N_IMAGES)
    for shard in SHARDS:
        kept = {(r["key"], r["box_id"]) for r in pq.read_table(layout.boxes_path(root, shard)).to_pylist()
                if r["kept"]}  # fmt: skip
        male = {r["key"] for r in pq.read_table(layout.attribute_path(root, "gender", shard)).to_pylist()
                if r["perceived_gender"] == "male" and (r["key"], r["box_id"]) in kept}  # fmt: skip
        path = layout.images_path(root, shard)
        rows = pq.read_table(path).to_pylist()
        for i, row in enumerate(rows):
            if row["status"] == "ok":
                thief = i % 2 == 0 if row["key"] in male else i % 6 == 0
                row["caption"] = f"a thief near shop {i}" if thief else f"a walk near shop {i}"
        write_table(path, rows, layout.IMAGE_SCHEMA)
        write_marker(root, "persons", shard, {"boxes": layout.boxes_path(root, shard), "images": path})
    return root


def _themes_section(con: Any) -> dict[str, Any]:
    """Real themes (PMI of identities and latents) on activations that fire on the thief texts."""
    rows = con.execute("SELECT caption, gender FROM person_images ORDER BY shard, key").fetchall()
    texts = [r[0] for r in rows]
    genders = [r[1] for r in rows]
    acts = np.zeros((len(rows), 3))
    for i, t in enumerate(texts):
        acts[i, 0 if "thief" in t else 1] = 1.0
        acts[i, 2] = 0.5 if i % 2 else 0.0
    by = {"gender": themes(acts, genders, texts, min_support=2, n_boot=20, seed=0, min_word_count=2)}
    return {
        "text": "alt",
        "source": "alt-text",
        "n_texts": len(texts),
        "n_available": len(texts),
        "sampled": False,
        "sae": {"latents": 3, "k": 1, "steps": 0, "metrics": {}},
        "by_attribute": by,
        "definitions": {"identity": "alt-texts: the image-level gender"},
    }


def _sentiment_section(con: Any) -> dict[str, Any]:
    """A sentiment section of the audit's shape, from a planted score per alt-text."""
    rows = con.execute("SELECT caption, gender, race FROM person_images").fetchall()

    def part(count: int, n: int) -> dict[str, Any]:
        if n < MIN_COUNT:
            return {"count": count, "n": n, "share": None, "ci95": None}
        return {"count": count, "n": n, "share": count / n, "ci95": list(_wilson(count, n))}

    def row(scores: list[float]) -> dict[str, Any]:
        n = len(scores)
        neg, pos = part(sum(s <= -0.05 for s in scores), n), part(sum(s >= 0.05 for s in scores), n)
        small = n < MIN_COUNT
        mean = None if small else sum(scores) / n
        sd = None if small else math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
        return {"n": n, "mean": mean, "mean_ci95": None if small else [mean - 1.96 * sd / math.sqrt(n),
                mean + 1.96 * sd / math.sqrt(n)], "negative": neg, "positive": pos,
                "reason": f"fewer than {MIN_COUNT} texts ({n})" if small else None}  # fmt: skip

    score = {True: -0.6, False: 0.4}
    by: dict[str, dict[str, list[float]]] = {"gender": defaultdict(list), "race": defaultdict(list)}
    everything = []
    for caption, gender, race in rows:
        s = score["thief" in caption]
        everything.append(s)
        by["gender"][gender].append(s)
        by["race"][race].append(s)
    section = {"overall": row(everything), "no_text": 0}
    section |= {a: {g: row(v) for g, v in sorted(by[a].items())} for a in by}
    return {"scorer": {"name": "vader", "kind": "vader"}, "min_count": MIN_COUNT, "alt": section,
            "person": None, "person_reason": "no person captions", "definitions": {}}  # fmt: skip


def _audit(ann: Path, *, sentiment: bool = True, theme: bool = True) -> dict[str, Any]:
    con = tables.connect(ann)
    try:
        return {
            "schema": SCHEMA,
            "annotations": ann.name,
            "fairsets_version": "0.9.test",
            "attributes": ["gender", "race"],
            "n_shards": len(SHARDS),
            "settings": {
                "min_count": MIN_COUNT,
                "group_rule": "exclusive",
                "delta_reference": "all",
                "crime_words": "default",
                "exclusions": "default",
                "sentiment": "vader",
                "themes": None,
            },
            "definitions": audit_run._definitions("exclusive", "all"),
            "composition": composition(con),
            "crime": crime_association(con, ["thief"], min_count=MIN_COUNT),
            "sentiment": _sentiment_section(con) if sentiment else None,
            "themes": _themes_section(con) if theme else None,
            "skipped": {
                "sentiment": None if sentiment else "not asked for (--sentiment none)",
                "themes": None if theme else "not asked for (--themes none)",
            },
        }
    finally:
        con.close()


def _write_audit(folder: Path, audit: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.json").write_text(json.dumps(audit, ensure_ascii=False, indent=1), encoding="utf-8")
    return folder


@pytest.fixture()
def ann(tmp_path: Path) -> Path:
    return _write_ann(tmp_path / "ANN")


# --------------------------------------------------------------------------- expected, independently


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)


def _truth(ann: Path) -> dict[str, Any]:
    """Image groups, box races and thief texts, read from the tables with pyarrow, plain Python."""
    labels: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for shard in SHARDS:
        boxes = pq.read_table(layout.boxes_path(ann, shard)).to_pylist()
        g = {(r["key"], r["box_id"]): r["perceived_gender"] for r in pq.read_table(
            layout.attribute_path(ann, "gender", shard)).to_pylist()}  # fmt: skip
        r_ = {(r["key"], r["box_id"]): r["perceived_race"] for r in pq.read_table(
            layout.attribute_path(ann, "race", shard)).to_pylist()}  # fmt: skip
        for b in boxes:
            if b["kept"]:
                labels[(shard, b["key"])].append((g[(b["key"], b["box_id"])], r_[(b["key"], b["box_id"])]))
    captions = {}
    for shard in SHARDS:
        for r in pq.read_table(layout.images_path(ann, shard)).to_pylist():
            if r["status"] == "ok":
                captions[(shard, r["key"])] = r["caption"]

    def group(values: set) -> str:  # the exclusive image-level rule, from its words
        named = values - {None}
        known = named - {"unclear"}
        if not named:
            return "unlabelled"
        return "unclear" if not known else known.pop() if len(known) == 1 else "mixed"

    image_gender, races, texts = {}, {}, {}
    for key, boxes in labels.items():
        if key not in captions:
            continue
        image_gender[key] = group({g for g, _ in boxes})
        races[key] = group({r for _, r in boxes})
        texts[key] = "thief" in captions[key].split()
    box_race = Counter(
        r if r is not None else "unlabelled"
        for key, boxes in labels.items()
        if key in captions
        for _, r in boxes
    )
    return {"gender": image_gender, "races": races, "thief": texts, "box_race": box_race}


def _bias_section(card: str) -> str:
    return card.split("## Bias, risks and limitations", 1)[1].split("\n## ", 1)[0]


# --------------------------------------------------------------------------- tests


def test_the_prepared_card_shows_the_audit_numbers_and_still_verifies(ann: Path, tmp_path: Path) -> None:
    prepare(ann, repo_id=REPO)
    folder = prepared_dir(ann)
    assert "fairsets:audit:" not in (folder / "README.md").read_text()  # the section has no audit yet
    audit = _audit(ann)
    path = update_card(ann, _write_audit(tmp_path / "audit", audit))
    assert path == folder / "README.md"
    card = path.read_text(encoding="utf-8")
    assert verify_prepared(folder) == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["files"]["README.md"] == {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    assert check_annotation_card(card, folder) == []

    bias = _bias_section(card)
    assert bias.index("<!-- fairsets:audit:persons:ANN start -->") < bias.index("### Audit of the perceived")
    assert card.index("## Bias, risks and limitations") < card.index("## Limitations of perceived labels")
    assert "not people" in bias and "fairsets 0.9.test" in bias and "n < 12" in bias

    # composition, against the tables read here
    truth = _truth(ann)
    n_person = len(truth["gender"])
    assert f"{n_person} person images" in bias
    counts = Counter(truth["gender"].values())
    for g in ("female", "male", "mixed", "unclear"):
        lo, hi = _wilson(counts[g], n_person)
        row = f"| images `{g}` | {counts[g]} | {n_person} | {100 * counts[g] / n_person:.1f} % | "
        assert row + f"{100 * lo:.1f}–{100 * hi:.1f} % |" in bias, row
    assert sum(counts.values()) == n_person and "sum to 100 %" in bias
    both = sum(
        1 for key, g in truth["gender"].items() if g == "mixed"
    )  # make_ann has no box labelled mixed: mixed images are the ones with both
    assert f"Person images with a `female` and a `male` box: {both} of {n_person} (" in bias
    for r, c in Counter(truth["races"].values()).items():
        assert f"| images `{r}` | {c} | {n_person} | {100 * c / n_person:.1f} % |" in bias, r
    n_boxes = sum(truth["box_race"].values())
    for r, c in truth["box_race"].items():
        assert f"| boxes `{r}` | {c} | {n_boxes} | {100 * c / n_boxes:.1f} % |" in bias

    # crime words: per group rate and Δ, small groups as n < min_count
    n_all, m_all = len(truth["thief"]), sum(truth["thief"].values())
    assert 0 < m_all < n_all
    assert f"| all | {n_all} | {m_all} | {100 * m_all / n_all:.1f} % | baseline |  |" in bias
    groups = defaultdict(list)
    for key, hit in truth["thief"].items():
        groups[f"gender `{truth['gender'][key]}`"].append(hit)
        groups[f"race `{truth['races'][key]}`"].append(hit)
    small = big = 0
    deltas = {}
    for label, hits in groups.items():
        n, m = len(hits), sum(hits)
        if n < MIN_COUNT:
            small += 1
            assert f"| {label} | {n} | n < 12 | n < 12 | n < 12 | n < 12 |" in bias
        else:
            big += 1
            delta = 100 * ((m / n) / (m_all / n_all) - 1)
            rest = [
                h
                for lab, hs in groups.items()
                if lab.split()[0] == label.split()[0] and lab != label
                for h in hs
            ]
            other = 100 * ((m / n) / (sum(rest) / len(rest)) - 1)  # against the complement
            shown = "0.0" if round(delta, 1) == 0 else f"{delta:+.1f}"  # no "+0.0", no "-0.0"
            shown_other = "0.0" if round(other, 1) == 0 else f"{other:+.1f}"
            row = f"| {label} | {n} | {m} | {100 * m / n:.1f} % | {shown} % | {shown_other} % |"
            assert row in bias, row
            deltas[label] = delta
    assert small and big  # the data has groups on both sides of min_count
    assert deltas["gender `male`"] > 10 and deltas["gender `female`"] < -40  # the planted effect
    crime = audit["crime"]["alt"]["gender"]
    assert crime["male"]["delta_pct"] == pytest.approx(deltas["gender `male`"])

    # the audit's own values (sentiment, themes) are shown as they are
    sent = audit["sentiment"]["alt"]["overall"]
    assert abs(sent["mean"]) > 0.01
    assert f"| all | {sent['n']} | {sent['mean']:.3f} | {100 * sent['negative']['share']:.1f} % |" in bias
    top = audit["themes"]["by_attribute"]["gender"]["identities"]
    shown = [i for i, e in top.items() if e["n_captions"] >= MIN_COUNT and e["themes"]]
    assert shown
    for ident in shown:
        t = top[ident]["themes"][0]
        assert f"| `{ident}` | {top[ident]['n_captions']} | {t['latent']} |" in bias
        assert f"| {t['pmi']:.2f} | {t['ci95'][0]:.2f} to {t['ci95'][1]:.2f} | {t['n_together']} |" in bias
    thief_latent = audit["themes"]["by_attribute"]["gender"]["latents"]["0"]
    assert thief_latent["words"][0]["word"] == "thief" and "thief" in bias
    assert "a thief near shop" not in bias  # captions never go into the card

    # the rules behind the numbers: the shared definitions and each section's
    assert "**Definitions.**" in bias
    assert "- `group_rule`: \\--group-rule exclusive: exclusive (image level, one group per image" in bias
    assert "- crime — `delta_pct`: 100 \\* (rate of the group / rate of the reference set" in bias
    assert "- composition — `unlabelled`: no label at all" in bias


def test_same_audit_same_bytes_and_re_preparing_keeps_the_block(ann: Path, tmp_path: Path) -> None:
    prepare(ann, repo_id=REPO)
    folder = prepared_dir(ann)
    audit_dir = _write_audit(tmp_path / "audit", _audit(ann))
    update_card(ann, audit_dir)
    once = {p: (folder / p).read_bytes() for p in ("README.md", "manifest.json")}
    update_card(ann, audit_dir)
    assert {p: (folder / p).read_bytes() for p in once} == once
    assert [p.name for p in card_blocks_dir(ann).iterdir()] == ["persons%3AANN.md"]

    prepare(ann, repo_id=REPO)  # re-preparing renders the stored block again: the same card
    assert {p: (folder / p).read_bytes() for p in once} == once
    shutil.rmtree(folder)  # from scratch too
    prepare(ann, repo_id=REPO)
    assert {p: (folder / p).read_bytes() for p in once} == once

    # a new audit replaces the block, it does not add one
    audit2 = _audit(ann, sentiment=False, theme=False)
    update_card(ann, _write_audit(tmp_path / "audit2", audit2))
    card = (folder / "README.md").read_text()
    assert card.count("fairsets:audit:persons:ANN start") == 1
    assert "**Sentiment.** Not measured: not asked for (--sentiment none)." in card
    assert verify_prepared(folder) == []


def test_an_unprepared_folder_keeps_the_block_for_the_next_publish(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = _audit(ann)
    stored = update_card(ann, _write_audit(tmp_path / "audit", audit))
    assert stored.parent == card_blocks_dir(ann) and not prepared_dir(ann).exists()
    assert read_card_blocks(ann) == [persons_card_section(audit)]
    code, out, err = run_cli(["publish", ann, "--repo-id", REPO, "--dry-run"], capsys)
    assert code == 0, err
    assert ".fairsets" not in out  # the stored block is no file of the upload
    card = (prepared_dir(ann) / "README.md").read_text()
    assert persons_card_section(audit) in card and verify_prepared(prepared_dir(ann)) == []


def test_cli_card_update_end_to_end(ann: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fairsets.cli import app

    prepare(ann, repo_id=REPO)
    audit_dir = _write_audit(tmp_path / "audit", _audit(ann))
    res = CliRunner().invoke(app, ["card", "update", str(ann), "--audit", str(audit_dir)])
    assert res.exit_code == 0, res.output
    readme = prepared_dir(ann) / "README.md"
    assert res.output.strip() == f"updated {readme}"
    assert "### Audit of the perceived labels" in _bias_section(readme.read_text())
    assert verify_prepared(prepared_dir(ann)) == []


def test_hostile_values_are_escaped(tmp_path: Path) -> None:
    evil_g = "<img src=x onerror=alert(1)>|x"
    evil_r = "**b** [l](http://a.invalid) {{ x }}"
    specs = [ImageSpec(boxes=[(evil_g if i % 2 else "female", evil_r if i % 3 else "None of them", 0.2)],
                       alt="a thief {% x %}" if i % 4 == 0 else "a walk", person_captions=["a thief"])
             for i in range(30)]  # fmt: skip
    folder = write_person_tables(tmp_path / "x --> <b>", specs, captioner="cap")
    con = tables.connect(folder)
    try:
        audit = {
            "schema": SCHEMA, "annotations": folder.name, "fairsets_version": "<b>1</b>",
            "n_shards": 1, "settings": {"min_count": 5, "crime_words": "my|words {{.toml"},
            "composition": composition(con), "crime": crime_association(con, ["thief"], min_count=5),
            "sentiment": None, "themes": None,
            "skipped": {"sentiment": "none <script>", "themes": "None"},
        }  # fmt: skip
    finally:
        con.close()
    # audit.json is a user file: a captioner name the folder would refuse can still be in it
    audit["crime"]["person"] = {"cap`|<i>": audit["crime"]["person"]["cap"]}
    block = persons_card_section(audit)
    first, last = block.splitlines()[0], block.splitlines()[-1]
    assert re.fullmatch(r"<!-- fairsets:audit:persons:\S+ start -->", first)
    assert "-->" not in first[4:-3] and "<b>" not in first and last == first.replace(" start", " end")
    for bad in ("<img", "<script", "<b>", "<i>", "{{", "{%", "}}"):
        assert bad not in block, bad
    assert "](http" not in block.replace("\\](", "")  # a group name never becomes a link
    assert "None" not in block.split()
    assert "&lt;img src=x onerror=alert(1)&gt;\\|x" in block and "cap\\`\\|&lt;i&gt;" in block
    widths = []
    for line in block.splitlines():  # every table row keeps its columns: no cell breaks out
        if line.startswith("| "):
            widths.append(len(re.findall(r"(?<!\\)\|", line)))
        elif widths:  # every table has one width: 6 bars (5 columns) or 7 (crime: 6)
            assert len(set(widths)) == 1 and widths[0] in (6, 7), widths
            widths = []
    # the block is accepted as a stored block and the card that holds it passes the card check
    write_card_block(folder, first.split("fairsets:audit:", 1)[1].split()[0], block)
    manifest_like = _prepared_manifest(tmp_path)
    card = render_card(manifest_like, audits=read_card_blocks(folder))
    assert check_annotation_card(card) == [] and block in card


def _prepared_manifest(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "ANN"
    make_ann(root)
    manifest = prepare(root, repo_id=REPO).manifest
    return {k: v for k, v in manifest.items() if k != "files"}


def test_wrong_kinds_are_one_line_errors(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    persons = _write_audit(tmp_path / "persons", _audit(ann, sentiment=False, theme=False))
    vlm = _write_audit(tmp_path / "vlm", {"schema": "fairsets.audit.vlm/1", "model_id": "m"})
    face = tmp_path / "face"
    face.mkdir()
    (face / "README.md").write_text("---\nlicense: mit\n---\n# Faces\n")
    face_before = (face / "README.md").read_bytes()

    code, _, err = run_cli(["card", "update", face, "--audit", persons], capsys)
    assert_one_line_error(code, err, "is a persons audit", "card update ANN")
    assert (face / "README.md").read_bytes() == face_before
    code, _, err = run_cli(["card", "update", ann, "--audit", vlm], capsys)
    assert_one_line_error(code, err, "not a persons audit", "fairsets audit persons")
    code, _, err = run_cli(["card", "update", ann, "--audit", tmp_path / "nothing"], capsys)
    assert_one_line_error(code, err, "no such folder", "fairsets audit persons --out")
    other = _write_audit(tmp_path / "other", dict(_audit(ann, sentiment=False, theme=False), annotations="B"))
    code, _, err = run_cli(["card", "update", ann, "--audit", other], capsys)
    assert_one_line_error(code, err, "audit of annotations 'B', not of 'ANN'")
    broken = _write_audit(tmp_path / "broken", {"schema": SCHEMA, "annotations": "ANN"})
    code, _, err = run_cli(["card", "update", ann, "--audit", broken], capsys)
    assert_one_line_error(code, err, "not a usable persons audit", "composition is missing")
    assert not card_blocks_dir(ann).exists()  # nothing was stored

    prepare(ann, repo_id=REPO)
    folder = prepared_dir(ann)
    code, _, err = run_cli(["card", "update", folder, "--audit", persons], capsys)
    assert_one_line_error(code, err, "is a prepared annotation folder", "ANN, not ANN/.fairsets/publish")

    # a prepared folder edited by hand is refused, and nothing is written
    (folder / "README.md").write_text((folder / "README.md").read_text() + "\nhand edit\n")
    before = {p: (folder / p).read_bytes() for p in ("README.md", "manifest.json")}
    code, _, err = run_cli(["card", "update", ann, "--audit", persons], capsys)
    assert_one_line_error(code, err, "changed after they were prepared", "README.md")
    assert {p: (folder / p).read_bytes() for p in before} == before
    assert not card_blocks_dir(ann).exists()


def test_a_broken_stored_block_stops_prepare_naming_the_file(ann: Path) -> None:
    store = card_blocks_dir(ann)
    store.mkdir(parents=True)
    (store / "persons%3AANN.md").write_text("### hand-written\n{{ x }}\n")
    with pytest.raises(
        AnnotationError, match=r"persons%3AANN\.md: does not start with an audit start marker"
    ):
        prepare(ann, repo_id=REPO)
    block = "<!-- fairsets:audit:persons:ANN start -->\nok\n<!-- fairsets:audit:persons:ANN end -->\n"
    (store / "persons%3AANN.md").write_text(block)
    (store / "other.md").write_text(block)  # a block stored under another id's file name
    with pytest.raises(AnnotationError, match=r"other\.md: is the block of 'persons:ANN'"):
        prepare(ann, repo_id=REPO)
    with pytest.raises(ValueError, match="template syntax"):
        write_card_block(ann, "persons:ANN", block.replace("ok", "{% x %}"))


@pytest.mark.parametrize("name", ["ANN", "x --> <b>", "a b\nc", "é/ü", "--", ""])
def test_block_ids_follow_the_card_marker_rule(name: str) -> None:
    from fairsets.audit.card import _MARK_RE

    block = persons_card_section({"annotations": name})
    assert _MARK_RE.match(block.splitlines()[0]) and _MARK_RE.match(block.splitlines()[-1])


def test_a_publish_holding_the_folder_makes_the_update_wait_then_refuse(ann: Path, tmp_path: Path) -> None:
    import fcntl

    audit_dir = _write_audit(tmp_path / "audit", _audit(ann, sentiment=False, theme=False))
    lock = ann / layout.WORKDIR / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(ValueError, match="another update"):
            update_card(ann, audit_dir, wait=0.2)
    assert not card_blocks_dir(ann).exists()
    assert update_card(ann, audit_dir).parent == card_blocks_dir(ann)  # released: it goes through


def test_the_audit_command_output_goes_into_the_card(ann: Path, tmp_path: Path) -> None:
    """``fairsets audit persons`` then ``fairsets card update``: the document it writes is accepted."""
    from typer.testing import CliRunner

    from fairsets.cli import app

    out = tmp_path / "audit"
    args = ["audit", "persons", str(ann), "--out", str(out), "--min-count", str(MIN_COUNT), "--sentiment",
            "none", "--themes", "none", "--quiet"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    res = CliRunner().invoke(app, ["card", "update", str(ann), "--audit", str(out)])
    assert res.exit_code == 0, res.output
    card = (card_blocks_dir(ann) / "persons%3AANN.md").read_text()
    assert card.strip("\n") == persons_card_section(doc)
    male = doc["crime"]["alt"]["gender"]["male"]
    assert f"| gender `male` | {male['n']} | {male['matches']} |" in card and male["delta_pct"] > 10
