"""Profile captions: one country (ISO alpha-3 or empty) per caption, in input order.

Two modes:

* **one file** (:func:`profile_file`): a text file with one caption a line (every line is an
  input, empty lines included), or CSV/TSV/Parquet/JSONL with a caption column. The output keeps
  the input's rows and columns, with ``caption`` and ``country`` first (``error`` too when a
  method failed on some captions).
* **shards** (:func:`profile_shards`): LAION-style Parquet metadata shards, one pipeline task per
  shard on the local or the Ray executor. Each task writes ``OUT/<shard>.parquet`` atomically
  and then a completion marker, so an interrupted run resumes where it stopped; an LLM
  method's disk cache is shared by all tasks and runs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, atomic_write_text, sha256_file
from fairsets.core.progress import Progress
from fairsets.core.textfile import TextFileError, read_text

from .methods import GeoMethod, method_from_spec

__all__ = [
    "CAPTION_FORMATS",
    "ProfileError",
    "profile_captions",
    "profile_file",
    "profile_shards",
    "read_table",
    "run_profile_task",
    "write_table",
]

log = logging.getLogger(__name__)

CAPTION_FORMATS = (".txt", ".csv", ".tsv", ".parquet", ".jsonl")
CAPTION_COLUMNS = ("caption", "text", "TEXT")
SCHEMA = "fairsets.geo.profile/1"


class ProfileError(ValueError):
    """An input that cannot be profiled (unknown format, no caption column)."""


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def read_table(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows and column names of a caption file (``.txt`` → one ``caption`` per line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ProfileError(f"{path}: no such file")
    if suffix in (".txt", ".csv", ".tsv", ".jsonl"):
        try:
            text = read_text(path, bom=suffix != ".txt")
        except TextFileError as exc:
            raise ProfileError(str(exc)) from None
    if suffix == ".txt":
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it is not another caption
        return [{"caption": line.rstrip("\r")} for line in lines], ["caption"]
    if suffix in (".csv", ".tsv"):
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if suffix == ".tsv" else ",")
        rows = []
        try:
            for row in reader:
                if None in row:  # fields beyond the header: the columns would be shifted
                    n, have = len(reader.fieldnames or []), len(reader.fieldnames or []) + len(row[None])
                    raise ProfileError(
                        f"{path}: line {reader.line_num}: {have} fields where the header has {n}; "
                        "quote values that contain the delimiter"
                    )
                rows.append(row)
        except csv.Error as exc:
            raise ProfileError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
        return rows, list(reader.fieldnames or [])
    if suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ProfileError(f"{path}: line {number}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                kind = type(row).__name__
                raise ProfileError(f"{path}: line {number}: one JSON object per line expected, not {kind}")
            rows.append(row)
        columns: list[str] = []
        for r in rows:
            columns.extend(k for k in r if k not in columns)
        return rows, columns
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise ProfileError(f"{path}: not a readable Parquet file ({_reason(exc)})") from None
        return table.to_pylist(), table.column_names
    raise ProfileError(
        f"{path}: unsupported format {suffix or '(none)'}; use one of {', '.join(CAPTION_FORMATS)}"
    )


def caption_column(columns: Sequence[str], wanted: str | None, path: Path | str) -> str:
    if wanted:
        if wanted not in columns:
            raise ProfileError(f"{path}: no column {wanted!r} (columns: {', '.join(columns)})")
        return wanted
    for c in CAPTION_COLUMNS:
        if c in columns:
            return c
    raise ProfileError(f"{path}: no caption column (caption, text); columns: {', '.join(columns) or 'none'}")


def write_table(rows: list[dict[str, Any]], columns: list[str], out: str | Path) -> Path:
    """Write rows atomically as CSV/TSV/Parquet/JSONL, by the suffix of ``out``."""
    out = Path(out)
    suffix = out.suffix.lower()
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".csv", ".tsv"):
        buf = io.StringIO()
        w = csv.DictWriter(
            buf,
            fieldnames=columns,
            delimiter="\t" if suffix == ".tsv" else ",",
            lineterminator="\n",
            extrasaction="ignore",
        )
        w.writeheader()
        w.writerows({k: "" if r.get(k) is None else r.get(k) for k in columns} for r in rows)
        atomic_write_text(out, buf.getvalue())
    elif suffix == ".jsonl":
        atomic_write_text(
            out, "".join(json.dumps({k: r.get(k) for k in columns}, ensure_ascii=False) + "\n" for r in rows)
        )
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows])
        with atomic_path(out) as tmp:
            pq.write_table(table, tmp)
    else:
        raise ProfileError(
            f"{out}: unsupported output format {suffix or '(none)'}; use .csv, .tsv, .parquet or .jsonl"
        )
    return out


def profile_captions(
    method: GeoMethod, captions: Sequence[str], *, batch_size: int = 4096, progress: Progress | None = None
) -> tuple[list[str | None], list[str | None]]:
    """Predictions and per-caption errors for ``captions``, in batches with a progress bar."""
    progress = progress or Progress()
    preds: list[str | None] = []
    errors: list[str | None] = []
    with progress.stage(f"geo-profiling ({method.name})", len(captions)) as advance:
        for start in range(0, len(captions), batch_size):
            batch = [c or "" for c in captions[start : start + batch_size]]
            p, e = method.predict_with_errors(batch)
            preds.extend(p)
            errors.extend(e)
            advance(len(batch))
    return preds, errors


def _output_rows(
    rows: list[dict[str, Any]],
    columns: list[str],
    cap: str,
    preds: list[str | None],
    errors: list[str | None],
) -> tuple[list[dict[str, Any]], list[str]]:
    extra = [c for c in columns if c not in (cap, "caption", "country", "error")]
    out_cols = ["caption", "country"] + (["error"] if any(errors) else []) + extra
    out = []
    for row, p, e in zip(rows, preds, errors, strict=True):
        r = {k: row.get(k) for k in extra}
        r["caption"] = row.get(cap)
        r["country"] = p or ""
        if e:
            r["error"] = e
        out.append(r)
    return out, out_cols


def profile_file(
    path: str | Path,
    method: GeoMethod,
    out: str | Path,
    *,
    caption_col: str | None = None,
    batch_size: int = 4096,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Profile one caption file and write ``out`` (its suffix picks the format). Returns a summary."""
    rows, columns = read_table(path)
    cap = caption_column(columns, caption_col, path)
    captions = ["" if r.get(cap) is None else str(r.get(cap)) for r in rows]
    preds, errors = profile_captions(method, captions, batch_size=batch_size, progress=progress)
    out_rows, out_cols = _output_rows(rows, columns, cap, preds, errors)
    write_table(out_rows, out_cols, out)
    return _summary(preds, errors) | {"input": str(path), "output": str(out)}


def _summary(preds: Sequence[str | None], errors: Sequence[str | None]) -> dict[str, Any]:
    counts = Counter(p for p in preds if p)
    return {
        "captions": len(preds),
        "with_country": sum(counts.values()),
        "errors": sum(1 for e in errors if e),
        "countries": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


# -- shards ---------------------------------------------------------------------------------------
def _marker(out_dir: Path, stem: str) -> Path:
    return out_dir / ".fairsets" / "markers" / f"{stem}.json"


def _spec_hash(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_profile_task(task: dict[str, Any]) -> dict[str, Any]:
    """Pipeline task: profile one Parquet shard → ``out_dir/<stem>.parquet`` + marker.

    ``task``: ``input``, ``out_dir``, ``method`` (a method spec), ``caption_column``,
    ``batch_size``. Deterministic given its inputs; safe to re-run.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(task["input"])
    out_dir = Path(task["out_dir"])
    stem = task["stem"]
    marker = _marker(out_dir, stem)
    out = out_dir / f"{stem}.parquet"
    done = _read_marker(marker)
    if (
        done
        and done.get("spec") == task["spec_hash"]
        and out.exists()
        and sha256_file(out) == done.get("sha256")
    ):
        return done | {"skipped": True}
    table = pq.read_table(src)
    cap = caption_column(table.column_names, task.get("caption_column"), src)
    captions = ["" if c is None else str(c) for c in table.column(cap).to_pylist()]
    method = method_from_spec(task["method"])
    try:
        preds, errors = profile_captions(
            method, captions, batch_size=int(task.get("batch_size", 4096)), progress=Progress(False)
        )
    finally:
        method.close()
    cols = {"country": pa.array([p or "" for p in preds], pa.string())}
    if any(errors):
        cols["geo_error"] = pa.array([e or "" for e in errors], pa.string())
    for name, arr in cols.items():
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, arr)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    result = {
        "input": str(src),
        "output": out.name,
        "sha256": sha256_file(out),
        "spec": task["spec_hash"],
        **_summary(preds, errors),
    }
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, json.dumps(result, sort_keys=True) + "\n")
    return result


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def shard_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Parquet shards from files and folders (a folder contributes its ``*.parquet``, sorted)."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(sorted(x for x in p.glob("*.parquet") if not x.name.startswith(".")))
        elif p.suffix.lower() == ".parquet" and p.is_file():
            out.append(p)
        else:
            raise ProfileError(f"{p}: not a Parquet shard or a folder of them")
    stems = Counter(p.stem for p in out)
    dup = [s for s, n in stems.items() if n > 1]
    if dup:
        raise ProfileError(f"two shards share a name ({', '.join(dup[:3])}); outputs are named after shards")
    if not out:
        where = ", ".join(str(i) for i in list(inputs)[:3])
        raise ProfileError(f"no Parquet shards found in {where}; give .parquet files or folders of them")
    return out


def check_shard_out(shards: Sequence[Path], out_dir: str | Path) -> None:
    """Refuse an output folder where a shard's output (``OUT/<stem>.parquet``) is the shard itself."""
    out_dir = Path(out_dir)
    clash = [p for p in shards if (out_dir / f"{p.stem}.parquet").resolve() == p.resolve()]
    if clash:
        raise ProfileError(
            f"--out {out_dir} holds the input shard {clash[0].name}, which its output would replace; "
            "choose another --out folder"
        )


def profile_shards(
    inputs: Sequence[str | Path],
    method: GeoMethod,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    caption_col: str | None = None,
    batch_size: int = 4096,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Profile Parquet shards as pipeline tasks; writes ``OUT/profile.json`` and returns it."""
    from ..pipeline.executors import get_executor

    shards = shard_inputs(inputs)
    out_dir = Path(out_dir)
    check_shard_out(shards, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = method.spec()
    spec_hash = _spec_hash({"method": spec, "caption_column": caption_col})
    tasks = [
        {
            "input": str(p.resolve()),
            "out_dir": str(out_dir.resolve()),
            # the executor holds a shared lock here while the task writes (an orphaned worker is seen)
            "workdir": str((out_dir / ".fairsets").resolve()),
            "stem": p.stem,
            "method": spec,
            "spec_hash": spec_hash,
            "caption_column": caption_col,
            "batch_size": batch_size,
        }
        for p in shards
    ]
    progress = progress or Progress()
    results: dict[str, dict[str, Any]] = {}
    with progress.stage(f"geo-profiling shards ({method.name})", len(tasks)) as advance:

        def done(task: dict[str, Any], result: dict[str, Any]) -> None:
            results[task["stem"]] = result
            advance(1)

        with get_executor(executor, workers=workers, ray_address=ray_address) as ex:
            ex.map(run_profile_task, tasks, on_done=done)
    total: Counter[str] = Counter()
    for r in results.values():
        total.update(r.get("countries", {}))
    summary = {
        "schema": SCHEMA,
        "method": method.provenance(),
        "shards": {
            k: {kk: vv for kk, vv in v.items() if kk != "countries"} for k, v in sorted(results.items())
        },
        "captions": sum(r["captions"] for r in results.values()),
        "with_country": sum(r["with_country"] for r in results.values()),
        "errors": sum(r["errors"] for r in results.values()),
        "skipped": sum(1 for r in results.values() if r.get("skipped")),
        "countries": dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    atomic_write_text(
        out_dir / "profile.json", json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"
    )
    return summary
