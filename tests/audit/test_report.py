"""HTML audit report: self-contained (embedded PNGs, no URL), escaped, readable with 36 groups."""

from __future__ import annotations

import base64
import dataclasses
import io
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from fairsets.audit.prompts import default_prompts
from fairsets.audit.report import check_audit, render_report
from fairsets.audit.vlm import vlm_audit

STATES_36 = [
    "Andaman and Nicobar Islands", "Andhra Pradesh", "Arunachal Pradesh", "Assam", "Bihar", "Chandigarh",
    "Chhattisgarh", "Dadra and Nagar Haveli and Daman and Diu", "Delhi", "Goa", "Gujarat", "Haryana",
    "Himachal Pradesh", "Jammu and Kashmir", "Jharkhand", "Karnataka", "Kerala", "Ladakh", "Lakshadweep",
    "Madhya Pradesh", "Maharashtra", "Manipur", "Meghalaya", "Mizoram", "Nagaland", "Odisha", "Puducherry",
    "Punjab", "Rajasthan", "Sikkim", "Tamil Nadu", "Telangana", "Tripura", "Uttar Pradesh", "Uttarakhand",
    "West Bengal",
]  # fmt: skip


def make_audit(
    groups: list[str],
    *,
    debiased: bool = True,
    job: bool = True,
    per_group: int = 5,
    seed: int = 0,
    declared: list[str] | None = None,
) -> dict[str, Any]:
    """An audit dict as ``fairsets audit vlm`` writes it, computed from random embeddings."""
    rng = np.random.default_rng(seed)
    d = 24
    centres = rng.normal(size=(len(groups), d))
    labels = [g for g in groups for _ in range(per_group)]
    idx = np.repeat(np.arange(len(groups)), per_group)
    original = centres[idx] + 0.7 * rng.normal(size=(len(labels), d))
    embeddings = {"original": original}
    if debiased:
        embeddings["debiased"] = original - 0.8 * centres[idx]
    k = max(2, len(labels) // 3)
    spec = default_prompts()
    texts = {p: rng.normal(size=d) for p in spec.all_prompts(include_job=True)}
    doc = vlm_audit(
        original,
        labels,
        texts,
        spec if job else dataclasses.replace(spec, job=None),
        k=k,
        groups=declared,
        debiased=embeddings.get("debiased"),
        header={
            "dataset": "example-faces",
            "dataset_path": "/data/example-faces",
            "variant": "balanced",
            "splits": ["test"],
            "model": "ViT-B-32",
            "model_id": "open_clip:ViT-B-32:none",
            "pretrained": "none",
            "attribute": "state",
        },
    )
    doc["debias"] = (
        {
            "transform": "/work/debias/inlp.npz",
            "method": "inlp",
            "alpha": 1.0,
            "beta": 0.01,
            "fit_splits": ["train"],
            "meta": {"iterations": 3},
        }
        if debiased
        else None
    )
    doc.update(created="2026-11-21T12:00:00Z", fairsets_version="0.1.0")
    return doc


class Page(HTMLParser):
    """Collects what the tests look at."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.imgs: list[str] = []
        self.links: list[str] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data") and value is not None:
                self.links.append(value)
        if tag == "img":
            self.imgs.append(dict(attrs).get("src") or "")
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(path: Path) -> tuple[str, Page]:
    text = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    return text, page


def png_sizes(page: Page) -> list[tuple[int, int]]:
    sizes = []
    prefix = "data:image/png;base64,"
    for src in page.imgs:
        assert src.startswith(prefix), src[:60]
        data = base64.b64decode(src[len(prefix) :], validate=True)
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "PNG"
            assert im.size[0] > 0 and im.size[1] > 0
            sizes.append(im.size)
    return sizes


def assert_self_contained(text: str, page: Page) -> None:
    assert "http://" not in text and "https://" not in text
    assert all(link.startswith("data:image/png;base64,") for link in page.links)
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert "url(" not in text and "@import" not in text


@pytest.mark.parametrize(
    ("n_groups", "debiased", "job", "n_images"),
    [
        # per primary prompt: top-k bars, mean bars, similarity boxes; per prompt set: share boxes;
        # the job bars
        (2, False, False, 12),
        (2, True, True, 13),
        (36, True, True, 13),
        (36, False, True, 13),
        (36, True, False, 12),
    ],
)
def test_report_is_self_contained(
    tmp_path: Path, n_groups: int, debiased: bool, job: bool, n_images: int
) -> None:
    groups = ["Assam", "Kerala"] if n_groups == 2 else STATES_36
    audit = make_audit(groups, debiased=debiased, job=job)
    out = render_report(audit, tmp_path / "sub" / "report.html")
    assert out == tmp_path / "sub" / "report.html"
    text, page = parse(out)
    assert_self_contained(text, page)
    assert len(page.imgs) == n_images
    png_sizes(page)
    assert out.stat().st_size < 2_000_000
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no leftover temporary file

    # Group names and numbers are in the tables.
    cells = set(page.cells)
    assert set(groups) <= cells
    primary = [r for r in audit["results"] if r["primary"] and r["embeddings"] == "original"]
    assert len(primary) == 3
    for r in primary:
        assert f"{r['metrics']['jsd_uniform']:.4f}" in cells
        assert f"{r['metrics']['mean_similarity_std']:.4f}" in cells
        for g in groups:
            assert f"{r['metrics']['group_mean_similarity'][g]:.4f}" in cells
    assert str(audit["k"]) in text
    assert ("debiased" in cells) == debiased
    if debiased:
        assert "inlp" in cells and "/work/debias/inlp.npz" in cells
        assert any(c.endswith("%") and c[0] in "+-" for c in cells)
    if job:
        assert "Indian candidate" in text
        for g in groups:
            assert f"{audit['job']['original'][g]:.3f}" in cells
    else:
        assert "The job simulation was not run." in text
    for prompt in default_prompts().all_prompts():
        assert prompt in text
    assert "JSD" in text and "base 2" in text and "ddof=0" in text


def test_report_names_empty_groups_states_definitions_and_draws_distributions(tmp_path: Path) -> None:
    """Finding 1 of issue 25: a declared group with no image is named (setup, warnings), its JSD
    counts it, the std that does not exist reads "undefined", and the definitions are rendered."""
    audit = make_audit(["Assam", "Kerala"], declared=["Assam", "Goa", "Kerala"])
    assert audit["empty_groups"] == ["Goa"] and audit["groups"] == ["Assam", "Goa", "Kerala"]
    text, page = parse(render_report(audit, tmp_path / "r.html"))
    cells = set(page.cells)
    assert "Goa" in cells  # the per-group tables list it (0 images)
    after = {c: page.cells[i + 1] for i, c in enumerate(page.cells[:-1])}
    assert after["Empty groups"] == "Goa" and after["Reference set"] == "--groups"
    assert "have no image" in text and "Goa" in text.split('id="warnings"', 1)[1].split("</div>", 1)[0]
    for name, rule in audit["definitions"].items():
        assert name in cells and rule in cells
    primary = [r for r in audit["results"] if r["primary"] and r["embeddings"] == "original"]
    assert all(r["metrics"]["mean_similarity_std"] is None for r in primary)
    assert "undefined" in cells
    alts = [a for a in re.findall(r'<img alt="([^"]*)"', text)]
    assert sum(a.startswith("Similarity distribution") for a in alts) == 3
    assert sum(a.startswith("Top-k share") and "over the prompts" in a for a in alts) == 3


def test_figures_grow_with_the_number_of_groups(tmp_path: Path) -> None:
    _, small = parse(render_report(make_audit(["Assam", "Kerala"]), tmp_path / "small.html"))
    _, large = parse(render_report(make_audit(STATES_36), tmp_path / "large.html"))
    small_w = [w for w, _ in png_sizes(small)]
    large_w = [w for w, _ in png_sizes(large)]
    assert all(lw > sw for lw, sw in zip(large_w, small_w, strict=True))
    assert max(large_w) <= 3000  # 100 dpi, bounded width


def test_text_is_escaped(tmp_path: Path) -> None:
    evil = "<script>alert('x')</script>"
    groups = [evil, "Tamil Nadu & $Puducherry$"]
    audit = make_audit(groups, job=True)
    audit["dataset"] = "<b>bold</b>"
    out = render_report(audit, tmp_path / "r.html")
    text, page = parse(out)
    assert "script" not in page.tags
    assert "<script>" not in text and "<b>bold</b>" not in text
    assert "&lt;script&gt;" in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    assert evil in page.cells and "Tamil Nadu & $Puducherry$" in page.cells
    assert len(png_sizes(page)) == 13  # the '$' did not break matplotlib's text rendering


def test_report_is_deterministic(tmp_path: Path) -> None:
    audit = make_audit(["Assam", "Kerala", "Goa"])
    a = render_report(audit, tmp_path / "a.html").read_bytes()
    b = render_report(audit, tmp_path / "b.html").read_bytes()
    assert a == b


def test_invalid_audit_is_rejected(tmp_path: Path) -> None:
    audit = make_audit(["Assam", "Kerala"], job=False)
    assert check_audit(audit) == []
    bad = dict(audit, schema="something/2")
    with pytest.raises(ValueError, match="schema"):
        render_report(bad, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()
    assert check_audit([]) == ["the audit must be a JSON object, got list"]
    broken = dict(audit, results=[{"prompt": "p", "embeddings": "other", "metrics": {}}])
    problems = check_audit(broken)
    assert any("embeddings" in p for p in problems) and any("metrics lack" in p for p in problems)


def test_importing_the_audit_package_is_light() -> None:
    code = (
        "import sys, fairsets.audit, fairsets.audit.metrics, fairsets.audit.prompts, fairsets.audit.report\n"
        "from fairsets.audit import jsd_uniform, render_report, default_prompts\n"
        "heavy = [m for m in ('matplotlib', 'torch', 'open_clip', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
