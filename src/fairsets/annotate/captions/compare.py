"""Two captioners compared by a judge model: the pairwise win rate of A over B with a 95 % interval.

The LAION person-centric captions picked their captioner this way: both candidates caption the
same sample of person boxes, a judge model reads each pair next to the red-box image and says
which caption describes the highlighted person better, and the win rate of one over the other is
reported with its interval. :func:`compare_captioners` does this for an annotation folder:

1. **Sample.** ``n`` kept boxes are chosen with
   ``items.sample(items.kept_boxes(ann), n, seed, salt="compare-captioners")`` — the same boxes on
   any machine for the same seed, and a larger ``n`` keeps every box a smaller one chose.
2. **Caption.** Each box is rendered as :data:`~fairsets.annotate.chat.requests.CAPTION_VIEW` (the
   whole image, the box framed in red) and captioners A and B are asked, concurrently, with
   :func:`~fairsets.annotate.chat.requests.caption_request` — byte for byte the request
   ``annotate caption`` sends, through the folder's answer cache
   (:func:`~fairsets.annotate.chat.requests.chat_cache_dir`), so boxes either captioner has
   already captioned there cost no request. ``compare.json`` says how many captions came from
   the cache.
3. **Judge.** For every box with both captions, :func:`~.judge.judge_prompt`
   places them in a seeded per-item order (balanced, so a judge that prefers a position favours
   neither captioner) and the judge is asked with :func:`judge_request` on the same red-box
   image. Its reply becomes ``A``, ``B``, ``tie`` or ``invalid``
   (:meth:`~.judge.JudgePrompt.verdict`; a refusal is ``invalid``). :func:`~.judge.win_rate`
   counts a tie as half a win each and leaves ``invalid`` out of the rate (it is reported as a count).
4. **Skip, never guess.** A box whose image cannot be rendered, whose caption request failed (after
   the retries), was refused or came back empty, or whose judge request failed, is left out of the
   judging and counted by reason (``skipped`` in ``compare.json``, with each item's detail). Errors,
   empty captions and verdicts that name no caption are not cached (an unusable answer is never
   final), so a re-run asks those requests again; every other answer is, so it asks nothing else.
   A refusal is the model's answer to that request: cached (use another model to change it).

The judge may be one of the captioners (a warning says that a judge judging its own captions is
biased); A and B must differ.

Output folder ``DIR`` (each file written atomically, ``compare.json`` last):

* ``compare.json`` (:mod:`.compare_summary`) — the three models (name, model, host: never a key or
  its variable), the sample (``n_asked``, ``n_sampled``), ``n_judged``, the verdict counts,
  ``rate``, ``low``, ``high``, ``level``, ``method``; ``position`` (how often A was shown first, and
  how often the judge chose the first position among its decisive verdicts: near 0.5 for an unbiased
  judge); ``skipped`` (counts by reason and the items); per-role answers and tokens; ``warnings``;
  and ``run``: what the run that produced these results sent (requests, retries, cache hits per
  role, captions from the cache).
* ``verdicts.parquet`` — one row per judged box: ``item``, ``shard``, ``key``, ``box_id``,
  ``caption_a``, ``caption_b``, ``a_first``, ``judge_reply``, ``verdict``.
* ``report.html`` (:mod:`.compare_report`) — one self-contained page: the headline rate with its
  interval, the counts, and a few example pairs with a thumbnail of the red-box view and both
  captions (all text escaped).

**Resuming.** A re-run with the same settings reuses every cached answer. When its results equal
those already in ``DIR`` (everything in ``compare.json`` but ``run``, and the verdict rows) the
files are left exactly as they are — so a re-run with every answer cached sends no request and
leaves identical files — and its own activity is returned (and printed by the CLI) only.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.fetch.chat import ChatRequest, user

from ..chat.requests import usable_caption
from ..layout import AnnotationError
from .compare_report import items_of, pick_examples, report_html, thumbnails
from .compare_summary import ROLES, Usage, run_block, summary_payload, unchanged

if TYPE_CHECKING:
    from .judge import JudgePrompt

__all__ = [
    "CHUNK",
    "JUDGE_MAX_TOKENS",
    "SALT",
    "VERDICT_COLUMNS",
    "compare_captioners",
    "judge_request",
    "report_html",
]

# the name of the module before the stages had packages: a log line reads as it always did
log = logging.getLogger("fairsets.annotate.compare")

#: The salt of the sample (``items.sample(..., salt=SALT)``).
SALT = "compare-captioners"
#: Boxes rendered, captioned and judged per round (bounds the JPEGs held in memory).
CHUNK = 256
#: The columns of ``verdicts.parquet``.
VERDICT_COLUMNS = (
    "item",
    "shard",
    "key",
    "box_id",
    "caption_a",
    "caption_b",
    "a_first",
    "judge_reply",
    "verdict",
)
#: Answer length of a verdict: a judgement with reasons.
JUDGE_MAX_TOKENS = 512


def judge_request(prompt: JudgePrompt, jpeg: bytes, *, max_tokens: int = JUDGE_MAX_TOKENS) -> ChatRequest:
    """Ask a judge which of two captions of the box framed in ``jpeg`` is better (temperature 0). An
    ``invalid`` verdict (:meth:`~fairsets.annotate.captions.judge.JudgePrompt.verdict`) is not cached."""

    def accept(text: str) -> bool:
        return prompt.verdict(text) != "invalid"

    return ChatRequest(
        [user(prompt.text, images=[jpeg])], temperature=0.0, max_tokens=max_tokens, accept=accept
    )


def _verdict_schema() -> Any:
    import pyarrow as pa

    s = pa.string()
    return pa.schema(
        [
            ("item", s),
            ("shard", s),
            ("key", s),
            ("box_id", pa.int64()),
            ("caption_a", s),
            ("caption_b", s),
            ("a_first", pa.bool_()),
            ("judge_reply", s),
            ("verdict", s),
        ]
    )


def _endpoint_info(name: str, endpoint: Any) -> dict[str, str]:
    return {"name": name, "model": endpoint.model, "host": endpoint.where}


def _caption_outcome(result: Any) -> tuple[str | None, str | None, str | None]:
    """``(caption, kind, detail)``: the caption, or why there is none (``failed``/``refused``/``empty``)."""
    if result.refusal is not None or (result.error or "").startswith("refused"):
        return None, "refused", result.error
    if result.error is not None:
        return None, "failed", result.error
    text = result.text if isinstance(result.text, str) else ""
    if not usable_caption(text):
        return None, "empty", "the caption is empty"
    return text, None, None


def _run_pair(
    clients: dict[str, Any],
    requests: Sequence[Any],
    names: dict[str, str],
    on_result: Callable[[int, Any], None] | None,
) -> dict[str, Any]:
    """Ask captioners A and B the same requests at the same time; their batches by role.

    A fatal answer (:class:`ChatServiceError`) from either is raised once both are done (the other's
    answers are cached), naming the annotator."""
    from fairsets.fetch.chat import ChatServiceError

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="fairsets-compare") as pool:
        futures = {role: pool.submit(clients[role].run, requests, on_result) for role in ("a", "b")}
        batches: dict[str, Any] = {}
        errors: list[BaseException] = []
        for role, fut in futures.items():
            try:
                batches[role] = fut.result()
            except ChatServiceError as exc:
                errors.append(ChatServiceError(f"captioner --{role} {names[role]}: {exc}"))
    if errors:
        raise errors[0]
    return batches


def compare_captioners(
    ann: str | os.PathLike[str],
    annotators: Any,
    *,
    a: str,
    b: str,
    judge: str,
    out: str | os.PathLike[str],
    n: int = 500,
    seed: int = 0,
    prompt: str | None = None,
    interval: str = "wilson",
    level: float = 0.95,
    max_retries: int = 3,
    backoff: float = 1.0,
    progress: Any = None,
) -> dict[str, Any]:
    """Compare captioners ``a`` and ``b`` of ``annotators``, judged by ``judge``, on ``n`` boxes of ``ann``.

    See the module docstring for what is asked and written.

    Args:
        ann: the annotation folder (``annotate persons --out``).
        annotators: an :class:`~fairsets.annotate.chat.annotators.Annotators` or the path of an
            ``annotators.toml``.
        a, b: the two captioners' names (must differ).
        judge: the judge's name (may be ``a`` or ``b``; a warning is recorded).
        out: the output folder (created; a file there is an error).
        n: boxes to sample (at least 1; fewer when the folder has fewer kept boxes).
        seed: the sample's and the caption order's seed (and the bootstrap's).
        prompt: the caption prompt (default :data:`~fairsets.annotate.chat.views.DEFAULT_CAPTION_PROMPT`,
            as ``annotate caption`` uses: the same prompt makes its captions cache hits here).
        interval: ``"wilson"`` or ``"bootstrap"``.
        level: the interval's confidence level.
        max_retries: retries per request after the first try (429, 5xx, timeouts).
        backoff: the first retry wait in seconds without ``Retry-After`` (doubles each retry).
        progress: a :class:`fairsets.core.progress.Progress` (default: none shown).

    Returns:
        The contents of ``compare.json``, plus ``"out"`` (the folder) and ``"written"`` (False when
        the folder already held these exact results and was left as it was); ``"run"`` is always
        this run's activity.

    Raises:
        AnnotationError: bad names or options, not an annotation folder, no kept boxes, ``out`` a file.
        ChatServiceError: an endpoint refuses every request (bad key, unknown model, wrong
            base_url); the message names the annotator. Answers already in are cached.
    """
    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.progress import Progress
    from fairsets.core.tables import write_table
    from fairsets.fetch.chat import ChatClient, ChatServiceError

    from ..chat import items as box_items
    from ..chat.annotators import Annotators, load_annotators
    from ..chat.requests import CAPTION_VIEW, caption_request, chat_cache_dir
    from ..chat.views import DEFAULT_CAPTION_PROMPT
    from .judge import judge_prompt

    started = time.monotonic()
    ann = Path(ann)
    out = Path(out)
    if interval not in ("wilson", "bootstrap"):
        raise AnnotationError(f"--interval {interval!r}: choose wilson or bootstrap")
    if isinstance(n, bool) or int(n) < 1:
        raise AnnotationError(f"--n {n}: compare at least 1 box (the paper used 500)")
    if int(max_retries) < 0:
        raise AnnotationError(f"--max-retries {max_retries}: give 0 or more")
    if not 0.0 < float(level) < 1.0:
        raise AnnotationError(f"level {level}: the confidence level must lie strictly between 0 and 1")
    prompt = DEFAULT_CAPTION_PROMPT if prompt is None else prompt
    if not isinstance(prompt, str) or not prompt.strip():
        raise AnnotationError("the caption prompt is empty; give the text to send with each red-box image")
    if a == b:
        raise AnnotationError(
            f"--a and --b are both {a!r}: a captioner compared with itself says nothing; name two annotators"
        )
    if out.exists() and not out.is_dir():
        raise AnnotationError(f"--out {out}: a file, not a folder; give a folder for compare.json")
    roster = annotators if isinstance(annotators, Annotators) else load_annotators(annotators)
    endpoints = {"a": roster.get(a, "--a"), "b": roster.get(b, "--b"), "judge": roster.get(judge, "--judge")}
    names = {"a": a, "b": b, "judge": judge}
    info = {role: _endpoint_info(names[role], ep) for role, ep in endpoints.items()}

    warnings: list[str] = []
    same = lambda x, y: (x.base_url, x.model) == (y.base_url, y.model)  # noqa: E731
    for role in ("a", "b"):
        if judge == names[role] or same(endpoints["judge"], endpoints[role]):
            warnings.append(
                f"the judge {judge} is captioner {role.upper()} ({names[role]}) too: a judge judging its "
                "own captions is biased; use a third model as the judge"
            )
    if same(endpoints["a"], endpoints["b"]):
        warnings.append(
            f"{a} and {b} are the same model at the same address: their captions are the same answers"
        )

    chosen = box_items.sample(box_items.kept_boxes(ann), int(n), int(seed), salt=SALT)
    if not chosen:
        raise AnnotationError(f"{ann}: no kept person boxes to compare captions on")

    cache = chat_cache_dir(ann)
    clients = {
        role: ChatClient(ep, cache_dir=cache, max_retries=int(max_retries), backoff=backoff)
        for role, ep in endpoints.items()
    }
    usage = {role: Usage() for role in ROLES}
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    progress = progress if progress is not None else Progress(False)

    with _out_lock(out), progress.stage("compare-captioners", 3 * len(chosen)) as advance:

        def tick(_i: int, _r: Any) -> None:
            advance(1)

        for start in range(0, len(chosen), CHUNK):
            chunk = chosen[start : start + CHUNK]
            rendered: list[tuple[Any, bytes]] = []
            for it, jpeg, reason in box_items.views(ann, chunk, **CAPTION_VIEW):
                if jpeg is None:
                    skipped.append({"item": it.item, "reason": "image unavailable", "detail": str(reason)})
                    advance(3)
                else:
                    rendered.append((it, jpeg))
            requests = [caption_request(jpeg, prompt) for _, jpeg in rendered]
            batches = _run_pair(clients, requests, names, tick) if requests else {}
            for role in ("a", "b"):
                if role in batches:
                    usage[role].add(batches[role])
            pending: list[tuple[Any, bytes, Any, dict[str, Any]]] = []
            for i, (it, jpeg) in enumerate(rendered):
                caps: dict[str, str | None] = {}
                why: list[tuple[str, str | None]] = []
                for role in ("a", "b"):
                    text, kind, detail = _caption_outcome(batches[role].results[i])
                    usage[role].outcomes["ok" if kind is None else kind] += 1
                    caps[role] = text
                    if kind is not None:
                        why.append((f"caption {role.upper()} {kind}", f"{names[role]}: {detail}"))
                if why:
                    skipped.append(
                        {"item": it.item, "reason": why[0][0], "detail": "; ".join(str(d) for _, d in why)}
                    )
                    advance(1)
                    continue
                pending.append((it, jpeg, judge_prompt(it.item, caps["a"], caps["b"], seed=int(seed)), caps))
            if not pending:
                continue
            try:
                jb = clients["judge"].run([judge_request(p[2], p[1]) for p in pending], tick)
            except ChatServiceError as exc:
                raise ChatServiceError(f"judge --judge {judge}: {exc}") from None
            usage["judge"].add(jb)
            for (it, _jpeg, jp, caps), result in zip(pending, jb.results, strict=True):
                if (
                    result.error is not None
                    and result.refusal is None
                    and not result.error.startswith("refused")
                ):
                    usage["judge"].outcomes["failed"] += 1
                    skipped.append(
                        {"item": it.item, "reason": "judge failed", "detail": f"{judge}: {result.error}"}
                    )
                    continue
                refused = result.refusal is not None or result.error is not None
                usage["judge"].outcomes["refused" if refused else "ok"] += 1
                reply = result.text if not refused else (result.error or "refused")
                rows.append(
                    {
                        "item": it.item,
                        "shard": it.shard,
                        "key": it.key,
                        "box_id": int(it.box_id),
                        "caption_a": caps["a"],
                        "caption_b": caps["b"],
                        "a_first": bool(jp.a_first),
                        "judge_reply": reply,
                        "verdict": "invalid" if refused else jp.verdict(result.text),
                    }
                )

        rows.sort(key=lambda r: (r["shard"], r["key"], r["box_id"]))
        skipped.sort(key=lambda s: s["item"])
        payload = summary_payload(
            ann=ann,
            info=info,
            n=int(n),
            seed=int(seed),
            prompt=prompt,
            sampled=len(chosen),
            rows=rows,
            skipped=skipped,
            usage=usage,
            interval=interval,
            level=float(level),
            warnings=warnings,
        )
        run = run_block(usage, time.monotonic() - started)
        written = not unchanged(out, payload, rows)
        if written:
            document = {**payload, "run": run}
            write_table(out / "verdicts.parquet", rows, _verdict_schema())
            examples = pick_examples(rows)
            html_text = report_html(document, examples, thumbnails(ann, items_of(chosen, examples)))
            atomic_write_text(out / "report.html", html_text)
            atomic_write_text(
                out / "compare.json",
                json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
            )
        log.info(
            "compare-captioners: %d judged, %d skipped; %d requests, %d cache hits",
            len(rows),
            len(skipped),
            run["requests"]["total"],
            run["cache_hits"]["total"],
        )
    return {**payload, "run": run, "out": str(out), "written": written}


def _out_lock(out: Path) -> Any:
    """Hold ``out``'s lock (``out/.fairsets/lock``) so two comparisons never write one folder at once."""
    from fairsets.core.atomic import layout_lock

    out.mkdir(parents=True, exist_ok=True)
    return layout_lock(out)
