"""``croissant.json``: Croissant 1.0 JSON-LD metadata of a published layout.

The document has the standard Croissant 1.0 ``@context`` (the one ``mlcroissant`` writes), a
``cr:FileObject`` per shard (``application/x-tar``) and per metadata table
(``application/x-parquet``), each with its ``contentUrl`` (see below), ``contentSize`` and
``sha256`` computed from the files on disk, and a ``cr:RecordSet`` per variant and split
(``@id`` ``"{variant}_{split}"``) whose fields map the columns of
``metadata/{variant}/{split}.parquet`` (types read from the Parquet schema; nested columns are
left out). Each record set also has an ``{variant}_{split}_images`` companion built from a
``cr:FileSet`` of the ``*.jpg`` members of that split's shards (``image`` as
``sc:ImageObject`` plus the sample ``key`` taken from the member name), so a Croissant reader can
join images to metadata by ``key``.

Every ``contentUrl`` names its file uniquely, because ``mlcroissant`` caches what it downloads and
the archives it extracts by the URL alone (``~/.cache/croissant/extract/{sha256(url)}``): two
datasets that both wrote ``shards/balanced/train-00000.tar`` would share one extraction, and the
second would be read with the first one's images. So, with ``summary["repo_id"]`` the URLs are
the files' Hub URLs (``https://huggingface.co/datasets/{repo_id}/resolve/main/{path}``); without
it a shard's URL is its relative path with its own sha256 as the query
(``shards/balanced/train-00000.tar?sha256=…``), a cache key that changes with the bytes; the
Parquet tables, read in place and never cached, keep their plain relative paths. A local copy
loads with ``mlc.Dataset(jsonld, mapping={file @id: local path})`` (the card shows how); the
``@id`` of a file is always its relative path. (A Hub URL names a path on ``main``, not bytes: a
repository rebuilt in place fails mlcroissant's sha256 check of a cached download, loudly.)

Deterministic: no dates are written (``datePublished`` only if the summary gives one), keys are
sorted on write, distributions and record sets follow the sorted variant/split order.

API:
    * ``build_croissant(out_dir, summary) -> dict`` — uses ``summary["name"]``,
      ``["description"]``, ``["variants"][variant][split]["shards" | "metadata"]`` (relative
      paths), ``["license"]`` (SPDX ids), optional ``["url"]``, ``["version"]``,
      ``["cite_as"]`` (default: a BibTeX ``@misc`` from name/pretty_name),
      ``["date_published"]``, ``["keywords"]``, ``["repo_id"]`` (``ORG/NAME``: Hub URLs) and
      ``["rai"]`` (``{RAI property: value}``, :func:`fairsets.publish.rai_facts.face_rai` for a
      build; checked against the RAI vocabulary by :func:`fairsets.publish.rai.rai_values`). With
      any RAI property the document also declares ``conformsTo``
      :data:`fairsets.publish.rai.RAI_CONFORMS_TO`.
    * ``write_croissant(out_dir, summary, path=None) -> dict`` — writes ``croissant.json``
      atomically (sorted keys, indent 2, trailing newline); returns ``{"path","sha256","bytes"}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fairsets.core.atomic import atomic_write_text, sha256_file
from fairsets.publish.attribution import license_info, safe_link_url

__all__ = ["CONFORMS_TO", "CONTEXT", "HUB_URL", "add_rai", "build_croissant", "write_croissant"]

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
#: Where a file of a Hub dataset repository is downloaded from (``repo_id``, then the path).
HUB_URL = "https://huggingface.co/datasets/{repo_id}/resolve/main/{path}"
#: Croissant 1.0 JSON-LD context (as in the spec and ``mlcroissant``'s ``make_context()``).
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}


def _data_type(arrow_type: Any) -> str | None:
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return "sc:Text"
    if pa.types.is_boolean(t):
        return "sc:Boolean"
    if pa.types.is_integer(t):
        return "sc:Integer"
    if pa.types.is_floating(t):
        return "sc:Float"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "sc:Date"
    return None  # nested/binary columns are not described


def _file_object(root: Path, rel: str, fmt: str, repo_id: str | None) -> dict[str, Any]:
    p = root / rel
    digest = sha256_file(p)
    if repo_id:
        url = HUB_URL.format(repo_id=repo_id, path=quote(rel))
    elif fmt == "application/x-tar":  # extracted into a cache keyed by the URL: the bytes make it unique
        url = f"{rel}?sha256={digest}"
    else:
        url = rel
    return {
        "@type": "cr:FileObject",
        "@id": rel,
        "name": rel,
        "contentUrl": url,
        "contentSize": f"{p.stat().st_size} B",
        "encodingFormat": fmt,
        "sha256": digest,
    }


def table_fields(schema: Any, rs_id: str, source: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``cr:Field`` of every column of a Parquet ``schema`` that has a Croissant data type, each
    extracted by name from ``source`` (``{"fileObject": {"@id": …}}`` or ``{"fileSet": …}``)."""
    fields = []
    for f in schema:
        dtype = _data_type(f.type)
        if dtype is None:
            continue
        fields.append(
            {
                "@type": "cr:Field",
                "@id": f"{rs_id}/{f.name}",
                "name": f.name,
                "dataType": dtype,
                "source": {**source, "extract": {"column": f.name}},
            }
        )
    return fields


def _record_set(root: Path, rs_id: str, table_rel: str, description: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    schema = pq.read_schema(root / table_rel)
    fields = table_fields(schema, rs_id, {"fileObject": {"@id": table_rel}})
    rs: dict[str, Any] = {
        "@type": "cr:RecordSet",
        "@id": rs_id,
        "name": rs_id,
        "description": description,
        "field": fields,
    }
    if "key" in schema.names:
        rs["key"] = {"@id": f"{rs_id}/key"}
    return rs


def _image_record_set(rs_id: str, fileset_id: str, description: str) -> dict[str, Any]:
    return {
        "@type": "cr:RecordSet",
        "@id": rs_id,
        "name": rs_id,
        "description": description,
        "key": {"@id": f"{rs_id}/key"},
        "field": [
            {
                "@type": "cr:Field",
                "@id": f"{rs_id}/key",
                "name": "key",
                "dataType": "sc:Text",
                "source": {
                    "fileSet": {"@id": fileset_id},
                    "extract": {"fileProperty": "filename"},
                    "transform": {"regex": "^(.*)\\.jpg$"},
                },
            },
            {
                "@type": "cr:Field",
                "@id": f"{rs_id}/image",
                "name": "image",
                "dataType": "sc:ImageObject",
                "source": {"fileSet": {"@id": fileset_id}, "extract": {"fileProperty": "content"}},
            },
        ],
    }


def _bibtex_text(value: Any) -> str:
    """A title for a BibTeX field: one line, and no brace (an unbalanced one would end the entry)."""
    return " ".join(str(value).replace("{", "(").replace("}", ")").split())


def _bibtex_key(value: Any) -> str:
    """A BibTeX entry key: letters, digits and ``-_.:`` only."""
    return (
        "".join(c if c.isascii() and (c.isalnum() or c in "-_.:") else "-" for c in str(value)) or "dataset"
    )


def build_croissant(out_dir: str | os.PathLike[str], summary: dict[str, Any]) -> dict[str, Any]:
    """Build the Croissant 1.0 JSON-LD document for the layout under ``out_dir``.

    Every path listed in ``summary["variants"]`` must exist under ``out_dir`` (checksums are
    computed from the files).

    Raises:
        FileNotFoundError: if a listed shard or table is missing.
        ValueError: if ``summary`` has no variants or its ``repo_id`` is not ``ORG/NAME``.
    """
    root = Path(out_dir)
    repo_id = summary.get("repo_id") or None
    if repo_id is not None:
        from fairsets.publish.hub import PublishError, validate_repo_id

        try:
            repo_id = validate_repo_id(str(repo_id))
        except PublishError as exc:
            raise ValueError(str(exc)) from None
    variants: dict[str, dict[str, dict[str, Any]]] = summary.get("variants") or {}
    if not variants:
        raise ValueError("summary has no variants")
    distribution: list[dict[str, Any]] = []
    record_sets: list[dict[str, Any]] = []
    for variant in sorted(variants):
        for split in sorted(variants[variant]):
            info = variants[variant][split]
            shards = sorted(info.get("shards") or [])
            for rel in shards:
                distribution.append(_file_object(root, rel, "application/x-tar", repo_id))
            table = info.get("metadata")
            rs_id = f"{variant}_{split}"
            n = info.get("num_samples")
            count = f" ({n} samples)" if n is not None else ""
            if table:
                distribution.append(_file_object(root, table, "application/x-parquet", repo_id))
                record_sets.append(
                    _record_set(
                        root, rs_id, table, f"Metadata of the {variant} variant, {split} split{count}."
                    )
                )
            if shards:
                fileset_id = f"shards/{variant}/{split}-jpg"
                distribution.append(
                    {
                        "@type": "cr:FileSet",
                        "@id": fileset_id,
                        "name": fileset_id,
                        "description": f"JPEG images in the {variant}/{split} WebDataset shards.",
                        "containedIn": [{"@id": rel} for rel in shards],
                        "encodingFormat": "image/jpeg",
                        "includes": "*.jpg",
                    }
                )
                record_sets.append(
                    _image_record_set(
                        f"{rs_id}_images",
                        fileset_id,
                        f"Images of the {variant} variant, {split} split{count}; join on key with {rs_id}.",
                    )
                )

    licenses = []
    for spdx in sorted(summary.get("license") or []):
        info = license_info(spdx)
        licenses.append(info["url"] if info else spdx)

    doc: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": summary["name"],
        "description": summary.get("description") or summary["name"],
        "conformsTo": CONFORMS_TO,
        "version": str(summary.get("version") or "1.0.0"),
        "keywords": sorted(set(summary.get("keywords") or ["faces", "fairness", "webdataset"])),
        "distribution": distribution,
        "recordSet": record_sets,
    }
    if licenses:
        doc["license"] = licenses if len(licenses) > 1 else licenses[0]
    title = _bibtex_text(summary.get("pretty_name") or summary["name"])
    doc["citeAs"] = summary.get("cite_as") or (
        f"@misc{{{_bibtex_key(summary['name'])}, title = {{{title}}}, note = {{Built with fairsets}}}}"
    )
    if summary.get("url") and safe_link_url(str(summary["url"])):  # never a javascript: or file: URL
        doc["url"] = safe_link_url(str(summary["url"]))
    if summary.get("date_published"):
        doc["datePublished"] = summary["date_published"]
    return add_rai(doc, summary.get("rai") or {})


def add_rai(doc: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the RAI properties ``values`` (``{property: value}``, empty ones left out) and,
    when there is any, the declaration that it conforms to the RAI specification too."""
    from fairsets.publish.rai import RAI_CONFORMS_TO, rai_values

    rai = rai_values(values)
    if rai:
        doc.update(rai)
        doc["conformsTo"] = [CONFORMS_TO, RAI_CONFORMS_TO]
    return doc


def write_croissant(
    out_dir: str | os.PathLike[str], summary: dict[str, Any], path: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Build and atomically write ``croissant.json`` (default ``out_dir/croissant.json``)."""
    doc = build_croissant(out_dir, summary)
    text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    target = atomic_write_text(Path(path) if path is not None else Path(out_dir) / "croissant.json", text)
    return {"path": str(target), "sha256": sha256_file(target), "bytes": target.stat().st_size}
