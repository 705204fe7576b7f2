"""Manual review of web candidates: an HTML contact sheet + CSV out, decisions back in.

Web images (SerpAPI) come with no trustworthy licence, author or place: IndicFairFace checks each
one by hand for an open licence and geographic relevance. ``fairsets review export`` writes

* ``review.html`` — a self-contained contact sheet (thumbnails embedded as ``data:`` URIs, ≤ 256
  px JPEGs): per candidate its thumbnail, key, group cell, source page, original URL, licence
  hint and query;
* ``review.csv`` — what the reviewer edits: ``key, <group columns>, url, source_url,
  license_hint, decision, license, author, note``. ``decision`` is ``accept``, ``reject`` or blank
  (still pending); ``license`` is prefilled with an SPDX id when the hint names an allowed
  licence; an accepted image needs an allowed licence and, when that licence requires
  attribution, an ``author``.

``fairsets review import`` validates the edited CSV against the pending candidates
(:func:`import_review`; every problem of every line is reported at once) and merges the
decisions into a Parquet table (:func:`write_decisions`; a later import wins per key).

API:
    * ``export_review(rows, image_bytes, out_dir, *, columns) -> dict``
    * ``import_review(csv_path, pending, *, policy=None) -> list[dict]``
    * ``write_decisions(path, decisions) -> dict`` / ``load_decisions(path) -> dict[str, dict]``
    * ``ReviewError`` (a ``ValueError`` with ``.errors``), ``DECISION_COLUMNS``, ``CSV_TAIL``.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import html
import io
import logging
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from fairsets.core.atomic import atomic_write_text
from fairsets.core.tables import write_table
from fairsets.publish.attribution import license_decision, load_policy, requires_attribution, safe_link_url

__all__ = [
    "CSV_TAIL",
    "DECISIONS",
    "DECISION_COLUMNS",
    "ReviewError",
    "export_review",
    "import_review",
    "load_decisions",
    "write_decisions",
]

log = logging.getLogger(__name__)

THUMB_SIZE = 256
#: The largest review CSV read (a listing of a million candidates is ~100 bytes a row).
MAX_REVIEW_BYTES = 256 * 1024 * 1024
CSV_TAIL: tuple[str, ...] = ("url", "source_url", "license_hint", "decision", "license", "author", "note")
DECISIONS = ("accept", "reject")
DECISION_COLUMNS: tuple[str, ...] = ("key", "decision", "license", "author", "note", "reviewed_at")
_DECISION_SCHEMA = pa.schema([pa.field(c, pa.string()) for c in DECISION_COLUMNS])
_REQUIRED = ("key", "decision", "license", "author")


class ReviewError(ValueError):
    """An edited review CSV has problems; ``errors`` lists each as ``"line N (key): ..."``."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} problem(s) in {source}:\n{lines}")


# --------------------------------------------------------------------------- export


def _thumbnail_uri(data: bytes | None) -> str | None:
    """A ``data:image/jpeg;base64,…`` thumbnail (≤ 256 px), or None if ``data`` is not an image."""
    if not data:
        return None
    from PIL import ImageOps

    from fairsets.vision.imageformat import ImageDecodeError, image_errors, open_image

    try:
        with open_image(data) as im, image_errors():  # allowed formats only (no EPS/Ghostscript)
            im = ImageOps.exif_transpose(im)
            im = im.convert("RGB")
            im.thumbnail((THUMB_SIZE, THUMB_SIZE))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
    except ImageDecodeError:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _prefill_license(row: Mapping[str, Any], policy: Mapping[str, Any]) -> str:
    for text in (row.get("license"), row.get("license_hint")):
        if text:
            spdx, allowed, _ = license_decision(str(text), policy)
            if allowed and spdx:
                return spdx
    return ""


def _link(url: str) -> str:
    if not url:
        return "—"
    shown = html.escape(url, quote=True)
    target = safe_link_url(url)  # http(s) only, no credentials or whitespace: never javascript:/data:
    if target is None:
        return shown
    href = html.escape(target, quote=True)
    return f'<a href="{href}" rel="noopener noreferrer nofollow" target="_blank">{shown}</a>'


_CSS = """
body{font-family:system-ui,sans-serif;margin:1rem;background:#fafafa;color:#222}
h1{font-size:1.3rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:.8rem}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.5rem;font-size:.8rem;
overflow-wrap:anywhere}
.card img{display:block;max-width:256px;max-height:256px;margin:0 auto .4rem}
.missing{height:120px;display:flex;align-items:center;justify-content:center;background:#eee;color:#777}
dt{font-weight:600;float:left;clear:left;margin-right:.3rem}
dd{margin:0 0 .15rem 0}
code{font-size:.75rem}
"""


def _card(row: Mapping[str, Any], uri: str | None, columns: Sequence[str]) -> str:
    e = html.escape
    key = str(row.get("key", ""))
    img = (
        f'<img src="{uri}" alt="{e(key, quote=True)}">'
        if uri
        else '<div class="missing">image unavailable</div>'
    )
    cell = ", ".join(f"{c}={row.get(c, '')}" for c in columns)
    fields = [
        ("key", f"<code>{e(key)}</code>"),
        ("cell", e(cell)),
        ("page", _link(str(row.get("source_url") or ""))),
        ("original", _link(str(row.get("url") or ""))),
        ("licence hint", e(str(row.get("license_hint") or "—"))),
        ("query", e(str(row.get("query") or "—"))),
    ]
    if row.get("title"):
        fields.insert(2, ("title", e(str(row["title"]))))
    items = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in fields)
    return f'<div class="card" id="{e(key, quote=True)}">{img}<dl>{items}</dl></div>'


def _info_cell(value: Any) -> str:
    """A web-derived value for a CSV column the reviewer only reads: on one line (control characters
    and line breaks become spaces, so the file imports back row for row), and never a spreadsheet
    formula (a leading ``= + - @`` gets a ``'``: a hostile licence hint cannot run in Excel)."""
    text = " ".join("".join(c if ord(c) >= 32 and c != "\x7f" else " " for c in str(value or "")).split())
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def export_review(
    rows: list[dict[str, Any]],
    image_bytes: Callable[[str], bytes | None],
    out_dir: Path,
    *,
    columns: list[str],
    policy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``review.html`` (contact sheet) and ``review.csv`` (to edit) for ``rows``, atomically.

    Args:
        rows: pending candidates (``key``, the group ``columns``, ``url``, ``source_url``,
            ``license_hint``, optional ``license``, ``title``, ``query``), in the order to show.
        image_bytes: returns the encoded image of a candidate given its **key** (``None`` when
            unavailable: the sheet then says "image unavailable").
        out_dir: destination folder (created).
        columns: the group attributes, shown per candidate and written as CSV columns.
        policy: licence policy for the ``license`` prefill (default: the shipped policy).

    Returns:
        ``{"html": path, "csv": path, "rows": n, "images": n_embedded, "missing_images": n}``.
    """
    policy = policy if policy is not None else load_policy()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cards: list[str] = []
    embedded = 0
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["key", *columns, *CSV_TAIL]
    writer.writerow(header)
    for row in rows:
        key = str(row["key"])
        uri = _thumbnail_uri(image_bytes(key))
        embedded += uri is not None
        cards.append(_card(row, uri, columns))
        writer.writerow(
            [
                key,
                *[_info_cell(row.get(c, "")) for c in columns],
                _info_cell(row.get("url")),
                _info_cell(row.get("source_url")),
                _info_cell(row.get("license_hint")),
                "",
                _prefill_license(row, policy),
                "",
                "",
            ]
        )
    title = f"fairsets review: {len(rows)} candidates"
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<p>Check each image's licence and relevance on its source page, then fill "
        "<code>decision</code> (accept/reject), <code>license</code> and <code>author</code> "
        "in <code>review.csv</code>.</p>"
        f'<div class="grid">{"".join(cards)}</div></body></html>\n'
    )
    html_path = atomic_write_text(out / "review.html", page)
    csv_path = atomic_write_text(out / "review.csv", buf.getvalue())
    missing = len(rows) - embedded
    if missing:
        log.warning("review export: %d of %d candidates have no image to show", missing, len(rows))
    return {
        "html": str(html_path),
        "csv": str(csv_path),
        "rows": len(rows),
        "images": embedded,
        "missing_images": missing,
    }


# --------------------------------------------------------------------------- import


def import_review(
    csv_path: Path,
    pending: dict[str, dict[str, Any]],
    *,
    policy: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Validate an edited ``review.csv`` and return its decisions.

    Rules: every key must be one of ``pending``, at most once; ``decision`` is ``accept``,
    ``reject`` or blank (blank rows stay pending and are not returned); an ``accept`` needs a
    licence the policy allows and, if that licence requires attribution, an ``author``.

    Args:
        csv_path: the edited CSV (UTF-8, a BOM is tolerated).
        pending: the pending candidates by key.
        policy: licence policy (default: the shipped policy).

    Returns:
        Decision rows ``key, decision, license`` (SPDX id; for a rejection the id if the text
        is recognised, else the text as typed), ``author, note, reviewed_at`` (ISO 8601, UTC), in
        CSV order.

    Raises:
        ReviewError: listing every bad line (``"line N (key): …"``); nothing is returned then.
        FileNotFoundError: ``csv_path`` does not exist.
    """
    policy = policy if policy is not None else load_policy()
    path = Path(csv_path)
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    text = _read_review_csv(path)
    try:
        return _import_rows(text, path, pending, policy, now)
    except csv.Error as exc:  # e.g. a field over the csv module's limit, a quote never closed
        why = f"not a readable CSV ({exc}); fix the quoting or re-export it with fairsets review export"
        raise ReviewError(path.name, [why]) from None


def _read_review_csv(path: Path) -> str:
    """The CSV's text: a regular file (a FIFO would block, a device never end) of at most
    :data:`MAX_REVIEW_BYTES`, UTF-8 (a BOM is dropped); else :class:`ReviewError` naming it."""
    st = os.stat(path)  # FileNotFoundError / PermissionError: the caller's one-line OSError
    if stat.S_ISDIR(st.st_mode):
        raise ReviewError(path.name, [f"{path} is a folder; give the edited review.csv"])
    if not stat.S_ISREG(st.st_mode):
        raise ReviewError(path.name, [f"{path} is not a regular file; give the edited review.csv"])
    if st.st_size > MAX_REVIEW_BYTES:
        raise ReviewError(
            path.name,
            [f"{st.st_size} bytes, more than a review CSV holds ({MAX_REVIEW_BYTES}); give review.csv"],
        )
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ReviewError(
            path.name, [f"line {line}: not UTF-8 text (byte {exc.start}); save the CSV as UTF-8"]
        ) from None


def _import_rows(
    text: str, path: Path, pending: dict[str, dict[str, Any]], policy: Mapping[str, Any], now: str
) -> list[dict[str, Any]]:
    errors: list[str] = []
    decisions: list[dict[str, Any]] = []
    with io.StringIO(text, newline="") as f:
        reader = csv.DictReader(f, strict=True)
        fields = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in _REQUIRED if c not in fields]
        if missing:
            raise ReviewError(path.name, [f"line 1: missing column(s) {missing}; found {fields}"])
        if twice := sorted({h for h in fields if fields.count(h) > 1}):
            raise ReviewError(path.name, [f"line 1: column(s) {twice} appear more than once; keep one each"])
        reader.fieldnames = fields
        seen: dict[str, int] = {}
        last = reader.line_num
        for raw in reader:
            first, line, last = last + 1, reader.line_num, reader.line_num  # the record's lines
            row = {k: (v or "").strip() for k, v in raw.items() if k is not None}
            if not any(row.values()):
                continue
            key = row.get("key", "")
            where = f"line {line} ({key or 'no key'})"
            if line > first and any("\n" in v or "\r" in v for v in row.values()):
                # a quote opened and closed lines later: the rows between were swallowed into a field
                errors.append(
                    f"lines {first}-{line} ({key or 'no key'}): one record spans {line - first + 1} lines "
                    "(a quote opened in a field and closed lines later?); keep each candidate on one line"
                )
                continue
            if bad := [k for k, v in row.items() if any(ord(c) < 32 and c != "\t" for c in v)]:
                errors.append(f"{where}: control character in {', '.join(bad)}; remove it")
                continue
            if any((v or "").strip() for v in raw.get(None) or ()):  # fields beyond the header
                n = len(fields) + len(raw[None])
                errors.append(f"{where}: {n} fields where the header has {len(fields)}; quote commas")
                continue
            if not key:
                errors.append(f"{where}: empty key")
                continue
            if key not in pending:
                errors.append(f"{where}: unknown key {key!r} (not a pending candidate)")
                continue
            if key in seen:
                errors.append(f"{where}: key {key!r} already reviewed on line {seen[key]}")
                continue
            seen[key] = line
            decision = row.get("decision", "").lower()
            if not decision:
                continue
            if decision not in DECISIONS:
                errors.append(f"{where}: decision must be accept, reject or blank, not {row['decision']!r}")
                continue
            text, author = row.get("license", ""), row.get("author", "")
            spdx, allowed, reason = license_decision(text or None, policy)
            if decision == "accept":
                if not text:
                    errors.append(f"{where}: accept needs a licence (license column is empty)")
                    continue
                if not allowed:
                    errors.append(f"{where}: licence {text!r} cannot be accepted: {reason}")
                    continue
                if requires_attribution(spdx, policy) and not author:
                    errors.append(f"{where}: licence {spdx} requires attribution: fill the author column")
                    continue
            decisions.append(
                {
                    "key": key,
                    "decision": decision,
                    "license": spdx or text,
                    "author": author,
                    "note": row.get("note", ""),
                    "reviewed_at": now,
                }
            )
    if errors:
        raise ReviewError(path.name, errors)
    log.info(
        "review import: %d accepted, %d rejected, %d still pending",
        sum(d["decision"] == "accept" for d in decisions),
        sum(d["decision"] == "reject" for d in decisions),
        len(pending) - len(decisions),
    )
    return decisions


# --------------------------------------------------------------------------- decisions table


def load_decisions(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Decisions by key from a decisions Parquet file (``{}`` if it does not exist)."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        return {}
    table = pq.read_table(p)
    return {str(r["key"]): r for r in table.to_pylist()}


def write_decisions(path: str | os.PathLike[str], decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge ``decisions`` into the Parquet table at ``path`` (a later decision wins per key).

    Rows are sorted by key; columns are :data:`DECISION_COLUMNS` (all strings). Written
    atomically; returns ``write_table``'s ``{"path", "sha256", "bytes", "rows"}``.
    """
    merged = load_decisions(path)
    for d in decisions:
        merged[str(d["key"])] = {c: (None if d.get(c) is None else str(d.get(c))) for c in DECISION_COLUMNS}
    rows = [{c: merged[k].get(c) for c in DECISION_COLUMNS} for k in sorted(merged)]
    return write_table(path, rows, schema=_DECISION_SCHEMA)
