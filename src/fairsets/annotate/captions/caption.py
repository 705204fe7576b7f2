"""Red-box person captions: ``fairsets annotate caption``.

:func:`caption_boxes` asks one chat model (a *captioner*, one ``[annotators.NAME]`` table of
``annotators.toml``) to describe every kept box of an annotation folder. The model is shown the
whole image with the box framed in red (:data:`fairsets.annotate.chat.requests.CAPTION_VIEW`,
rendered by :func:`fairsets.annotate.chat.items.views`) and the prompt
(:data:`fairsets.annotate.chat.views.DEFAULT_CAPTION_PROMPT` unless another is given), the visual prompt
of the LAION person-centric captions. The request is
:func:`~fairsets.annotate.chat.requests.caption_request`, the one ``annotate compare-captioners``
builds for the same box, and answers are cached in
:func:`~fairsets.annotate.chat.requests.chat_cache_dir`: a caption written here is a cache hit
there and the other way round.

Per shard it writes ``captions/{captioner}/{shard}.parquet`` (:data:`CAPTION_SCHEMA`): one row per
kept box, in the order of the box table, with ``status``

* ``ok`` — ``caption`` holds the answer. An answer that reached the token limit
  (``finish_reason = "length"``) is kept, its ``reason`` says it may be cut short; control
  characters (NUL, …) are removed and text beyond :data:`MAX_CAPTION_CHARS` characters is not
  stored, the ``reason`` says how long the answer was. Markup is data: stored as sent.
* ``refused`` — the model declined (a ``refusal`` field or a content filter); ``reason`` quotes it.
* ``failed`` — no usable answer: none after the retries (5xx, timeouts, a body that is no chat
  completion…), or an answer without text (never cached); ``reason`` says what happened. A re-run
  asks these boxes again.
* ``rejected`` — nothing to ask: the box's image is gone from the shard or no longer decodes.

``caption`` is null unless ``ok``. ``model`` is the endpoint's model id, ``annotator`` the
captioner's name, ``prompt_sha256`` the SHA-256 of the prompt's UTF-8 bytes; token counts are those
the server reported.

Resuming (:mod:`.resume`): every answer is cached as it arrives, tables are written atomically and
each shard's marker (``.fairsets/markers/caption-{captioner}/{shard}.json``, naming the model, the
prompt's SHA-256, the box table's SHA-256 and the boxes asked about) is written last. A re-run skips
finished shards (marker matching, table intact, no failed row), redoes a shard whose box table
changed, and answers every box asked before from the cache: after a ``kill -9`` only the requests
that were in flight are sent again. The manifest's ``captions[captioner]`` records the model, the
endpoint's host (never a key), the prompt and its SHA-256, counts by status, tokens and seconds.

One captioner name holds the captions of one model and one prompt: a run with another model or
prompt under the same name is refused unless ``replace`` (which removes that name's captions
first). A run holds a lock of its own for the captioner (two runs of the same captioner cannot
interleave), and the folder's lock only while it rewrites the manifest, so ``annotate vote`` or
another captioner may run on the same folder meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text, layout_lock, remove_temps, sha256_file
from fairsets.core.progress import Progress

from .. import layout
from ..chat.items import BoxItem, kept_boxes, sample
from ..chat.requests import CAPTION_MAX_TOKENS, CAPTION_VIEW, caption_request, chat_cache_dir
from ..chat.views import DEFAULT_CAPTION_PROMPT
from ..layout import CAPTION_SCHEMA, CAPTIONS_DIR, captions_path
from ..tasks import prefetched
from .resume import (
    Shard,
    box_items,
    captioner_lock,
    check_name,
    check_same,
    finished,
    forget,
    items_sha256,
    prompt_sha256,
    stage,
)

if TYPE_CHECKING:
    from fairsets.fetch.chat import ChatEndpoint, ChatResult

__all__ = [
    "CAPTIONS_DIR",
    "CAPTION_SCHEMA",
    "MAX_CAPTION_CHARS",
    "STATUSES",
    "caption_boxes",
    "captions_path",
    "prompt_sha256",
    "stage",
]

#: Row statuses (see the module docstring).
STATUSES = ("ok", "refused", "failed", "rejected")
#: The longest caption stored (characters); a longer answer is cut here and its ``reason`` says so.
MAX_CAPTION_CHARS = 8000
#: Boxes whose views are rendered and asked in one batch of the chat client, at most.
MAX_CHUNK = 512


def _clean(text: str) -> tuple[str, list[str]]:
    """``text`` safe to store: no control characters (tab and newline kept), no lone surrogates,
    at most :data:`MAX_CAPTION_CHARS` characters; and what was changed, for the row's ``reason``."""
    notes = []
    fixed = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become '?'
    if fixed != text:
        notes.append("replaced characters that are not valid Unicode")
    kept = "".join(c for c in fixed if c in "\t\n" or unicodedata.category(c) != "Cc")
    if len(kept) != len(fixed):
        notes.append(f"removed {len(fixed) - len(kept)} control characters")
    if len(kept) > MAX_CAPTION_CHARS:
        notes.append(f"stored the first {MAX_CAPTION_CHARS} of {len(kept)} characters")
        kept = kept[:MAX_CAPTION_CHARS]
    return kept, notes


def _row(
    item: BoxItem, base: dict[str, Any], result: ChatResult | None, reason: str | None
) -> dict[str, Any]:
    """The table row of one box: ``result`` is the chat answer, or None with the ``reason`` no
    request was made."""
    row = {"shard": item.shard, "key": item.key, "box_id": item.box_id, **base, "caption": None}
    if result is None:
        return {**row, "status": "rejected", "reason": reason}
    row.update(
        finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )
    if result.error is not None:
        refused = result.refusal is not None or result.error.startswith("refused")
        return {**row, "status": "refused" if refused else "failed", "reason": _clean(result.error)[0]}
    text, notes = _clean(result.text or "")
    if not text.strip():  # not cached either (caption_request's accept): a re-run asks again
        return {**row, "status": "failed", "reason": "the model answered with no text"}
    if result.finish_reason == "length":
        notes.insert(
            0, f"cut short: the answer reached the {CAPTION_MAX_TOKENS}-token limit (finish_reason length)"
        )
    return {**row, "status": "ok", "caption": text, "reason": "; ".join(notes) or None}


def _ask_all(
    rendered: Iterator[Any],
    chunk: int,
    shard: Shard,
    base: dict[str, Any],
    client: Any,
    prompt: str,
    rows: list[dict[str, Any] | None],
    advance: Callable[..., None],
) -> None:
    """Fill ``rows``: ``chunk`` rendered views at a time, each batch asked while the next renders."""
    while True:
        part = list(islice(rendered, chunk))
        if not part:
            return
        asked: list[int] = []
        requests = []
        for i, (item, jpeg, reason) in part:
            if jpeg is None:
                rows[i] = _row(item, base, None, reason)
                advance(1, boxes=1)
            else:
                asked.append(i)
                requests.append(caption_request(jpeg, prompt))
        batch = client.run(requests, on_result=lambda _j, _r: advance(1, boxes=1))
        for i, result in zip(asked, batch.results, strict=True):
            rows[i] = _row(shard.items[i], base, result, None)
        del part, requests, batch


def _caption_shard(
    ann: Path,
    captioner: str,
    endpoint: ChatEndpoint,
    client: Any,
    shard: Shard,
    prompt: str,
    prompt_sha: str,
    advance: Callable[..., None],
) -> dict[str, Any]:
    """Ask for the captions of one shard's boxes; write its table, then its marker; return the marker."""
    from fairsets.core.tables import write_table

    from ..chat.items import views

    base = {"model": endpoint.model, "annotator": captioner, "prompt_sha256": prompt_sha}
    rows: list[dict[str, Any] | None] = [None] * len(shard.items)
    chunk = min(MAX_CHUNK, max(64, 16 * endpoint.max_concurrency))
    rendered = prefetched(enumerate(views(ann, shard.items, **CAPTION_VIEW)), chunk)
    with contextlib.closing(rendered):  # leaving early (a fatal endpoint error) stops the renderer
        _ask_all(rendered, chunk, shard, base, client, prompt, rows, advance)
    done = [r for r in rows if r is not None]
    path = captions_path(ann, captioner, shard.name)
    info = write_table(path, done, CAPTION_SCHEMA)
    counts = Counter(r["status"] for r in done)
    marker = {
        "stage": stage(captioner),
        "shard": shard.name,
        "captioner": captioner,
        "model": endpoint.model,
        "prompt_sha256": prompt_sha,
        "boxes_sha256": shard.boxes_sha256,
        "items_sha256": shard.items_sha256,
        "files": {"captions": {"path": path.relative_to(ann).as_posix(), "sha256": info["sha256"]}},
        "stats": {
            "boxes": len(done),
            **{s: counts.get(s, 0) for s in STATUSES},
            "cut_short": sum(1 for r in done if r["status"] == "ok" and r.get("finish_reason") == "length"),
            "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in done),
            "completion_tokens": sum(r.get("completion_tokens") or 0 for r in done),
        },
    }
    atomic_write_text(
        layout.marker_path(ann, stage(captioner), shard.name),
        json.dumps(marker, sort_keys=True, indent=1) + "\n",
    )
    return marker


def caption_boxes(
    ann: str | Path,
    annotators: str | Path,
    captioner: str,
    *,
    prompt: str | None = None,
    max_retries: int = 3,
    backoff: float = 1.0,
    limit: int | None = None,
    seed: int = 0,
    replace: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Caption every kept box of ``ann`` (or a seeded sample of ``limit`` boxes) with ``captioner``.

    Args:
        ann: The annotation folder (``fairsets annotate persons`` wrote it).
        annotators: ``annotators.toml``; ``captioner`` names one of its tables.
        captioner: The name of the captioning endpoint (also the folder ``captions/{captioner}``).
        prompt: The text sent with each red-box image (default
            :data:`~fairsets.annotate.chat.views.DEFAULT_CAPTION_PROMPT`).
        max_retries: Retries of a request answered 429/5xx or timing out.
        backoff: First wait (seconds) before a retry without ``Retry-After``; doubles each retry.
        limit: Caption only this many kept boxes, chosen by ``seed``
            (:func:`~fairsets.annotate.chat.items.sample`), to try a captioner; the tables then hold only
            those boxes.
        seed: The sample's seed.
        replace: Caption again when ``ann`` holds this captioner's captions of another model or
            prompt (they are removed first); without it that is an error.
        progress: Progress display (default: off); counts boxes per second.

    Returns:
        ``manifest["captions"][captioner]`` as written, with ``captioner`` and ``run``: shards
        captioned and skipped, shards still without boxes (``pending``), requests sent, cache
        hits, boxes asked this run and their rate.

    Raises:
        fairsets.annotate.layout.AnnotationError: not an annotation folder, a bad annotators file or
            name, an empty prompt, a missing shard, or captions of another model or prompt under
            this name (the message says to pass ``replace``).
        fairsets.fetch.chat.ChatServiceError: the endpoint refuses every request (bad key,
            unknown model, wrong ``base_url``); answers already in stay cached.
    """
    from fairsets.fetch.chat import ChatClient

    from ..chat.annotators import load_annotators

    prompt = DEFAULT_CAPTION_PROMPT if prompt is None else prompt
    if not isinstance(prompt, str) or not prompt.strip():
        raise layout.AnnotationError("the caption prompt is empty; give the text to send with each image")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise layout.AnnotationError(
            "the caption prompt is not valid Unicode text (undecodable bytes on the command line?); "
            "write it in a UTF-8 file and pass --prompt-file"
        ) from None
    if limit is not None and limit < 1:
        raise layout.AnnotationError(f"--limit {limit}: give a number of boxes of at least 1")
    if max_retries < 0:
        raise layout.AnnotationError(f"--max-retries {max_retries}: give 0 or more")
    check_name(captioner)
    folder = Path(ann).expanduser().resolve()
    manifest = layout.read_manifest(folder)
    endpoint = load_annotators(annotators).get(captioner, "--captioner")
    prompt_sha = prompt_sha256(prompt)
    with captioner_lock(folder, captioner):
        differs = check_same(folder, captioner, endpoint.model, prompt_sha)
        if differs and not replace:
            raise layout.AnnotationError(
                f"{folder} holds captions of captioner {captioner!r} with {differs}: pass --replace to "
                "caption every box again, or use another captioner name"
            )
        if replace:
            forget(folder, captioner)
        remove_temps(folder / CAPTIONS_DIR / captioner)
        remove_temps(layout.marker_path(folder, stage(captioner), "x").parent)
        with layout_lock(folder, wait=30.0):  # the model and prompt in use, before any table
            manifest = layout.read_manifest(folder)
            old = (manifest.get("captions") or {}).get(captioner) or {}
            if replace or (old.get("model"), old.get("prompt_sha256")) != (endpoint.model, prompt_sha):
                manifest.setdefault("captions", {})[captioner] = {
                    "model": endpoint.model,
                    "endpoint": endpoint.where,
                    "prompt": prompt,
                    "prompt_sha256": prompt_sha,
                }
                layout.write_manifest(folder, manifest)
        client = ChatClient(
            endpoint, cache_dir=chat_cache_dir(folder), max_retries=max_retries, backoff=backoff
        )
        return _run(folder, manifest, captioner, endpoint, client, prompt, prompt_sha, limit, seed, progress)


def _run(
    ann: Path,
    manifest: dict[str, Any],
    captioner: str,
    endpoint: ChatEndpoint,
    client: Any,
    prompt: str,
    prompt_sha: str,
    limit: int | None,
    seed: int,
    progress: Progress | None,
) -> dict[str, Any]:
    start = time.monotonic()
    ready, pending = layout.box_shards(ann, manifest)
    if not ready:
        raise layout.AnnotationError(
            f"{ann}: no finished box tables; run fairsets annotate persons SHARDS --out {ann} first"
        )
    gone = [ref for ref in ready if not Path(ref["path"]).is_file()]
    if gone:
        raise layout.AnnotationError(
            f"{len(gone)} shard(s) of {ann} are missing or unreadable, e.g. {gone[0]['path']}: put them back "
            "where annotate persons read them, then run caption again"
        )
    chosen = {it.item for it in sample(kept_boxes(ann), limit, seed, salt="caption")} if limit else None
    shards = []
    for ref in ready:
        items = box_items(ann, ref["name"])
        if chosen is not None:
            items = [it for it in items if it.item in chosen]
        shard = Shard(
            ref["name"], items, sha256_file(layout.boxes_path(ann, ref["name"])), items_sha256(items)
        )
        shard.marker = finished(ann, captioner, shard, endpoint.model, prompt_sha)
        shards.append(shard)
    todo = [s for s in shards if s.marker is None]
    sent = hits = 0
    asked = 0

    class _Counting:
        """The client, counting what each batch sent and found cached."""

        def run(self, requests: Any, on_result: Any = None) -> Any:
            nonlocal sent, hits
            batch = client.run(requests, on_result=on_result)
            sent += batch.requests_sent
            hits += batch.cache_hits
            return batch

    progress = progress or Progress(False)
    total = sum(len(s.items) for s in todo)
    with progress.stage(f"captioning with {captioner}", total, rates=("boxes",)) as advance:
        for shard in todo:
            shard.marker = _caption_shard(
                ann, captioner, endpoint, _Counting(), shard, prompt, prompt_sha, advance
            )
            asked += len(shard.items)
    seconds = time.monotonic() - start
    stats = {s.name: (s.marker or {}).get("stats") or {} for s in shards}
    entry = {
        "model": endpoint.model,
        "endpoint": endpoint.where,
        "prompt": prompt,
        "prompt_sha256": prompt_sha,
        "max_tokens": CAPTION_MAX_TOKENS,
        "view": dict(CAPTION_VIEW),
        "sample": {"limit": limit, "seed": seed} if limit else None,
        "boxes": sum(st.get("boxes", 0) for st in stats.values()),
        "counts": {k: sum(st.get(k, 0) for st in stats.values()) for k in STATUSES},
        "cut_short": sum(st.get("cut_short", 0) for st in stats.values()),
        "tokens": {
            "prompt": sum(st.get("prompt_tokens", 0) for st in stats.values()),
            "completion": sum(st.get("completion_tokens", 0) for st in stats.values()),
        },
        "seconds": round(seconds, 3),
        "shards": dict(sorted(stats.items())),
        "pending_shards": pending,
    }
    with layout_lock(ann, wait=30.0):
        manifest = layout.read_manifest(ann)
        manifest.setdefault("captions", {})[captioner] = entry
        layout.write_manifest(ann, manifest)
    run = {
        "seconds": seconds,
        "captioned": len(todo),
        "skipped": len(shards) - len(todo),
        "pending": pending,
        "boxes_asked": asked,
        "requests_sent": sent,
        "cache_hits": hits,
        "boxes_per_s": asked / max(seconds, 1e-9),
    }
    return {**entry, "captioner": captioner, "run": run}
