"""``fairsets download``: a LAION-style listing into img2dataset shards, behind the fetch guard.

:mod:`fairsets.cli` registers :func:`download_cmd` as the ``download`` command.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die, setup_logging

log = logging.getLogger("fairsets.fetch.download")


def download_cmd(
    listing: Annotated[
        Path, typer.Argument(help="Listing: a .parquet, .csv or .jsonl file of URLs and captions.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Shards folder (new, empty, or this listing's).")],
    url_col: Annotated[str, typer.Option(help="Column of image URLs.")] = "url",
    caption_col: Annotated[str, typer.Option(help="Column of captions (saved as {key}.txt).")] = "caption",
    processes: Annotated[int, typer.Option(min=0, help="Download processes (0: in this process).")] = 1,
    threads: Annotated[int, typer.Option(min=1, help="Download threads per process.")] = 32,
    resize_mode: Annotated[
        str, typer.Option(help="no (as downloaded), keep_ratio or center_crop (img2dataset's resize modes).")
    ] = "no",
    image_size: Annotated[int, typer.Option(min=1, help="Side of the resized images, in pixels.")] = 256,
    retry_failed: Annotated[
        bool,
        typer.Option("--retry-failed", help="Download again the failed (transient) keys, into their shards."),
    ] = False,
    shard_size: Annotated[int, typer.Option(min=1, help="Samples per shard.")] = 10000,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds per connect / socket read.")] = 20,
    per_host_rate: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Requests started per second per host name, at most, all processes together (0: no "
            "limit; default 5, loopback names unpaced unless this or the next option is given).",
        ),
    ] = None,
    per_host_connections: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Requests open at once per host name, at most (0: no limit; default 2, Wikimedia's policy).",
        ),
    ] = None,
    allow_private: Annotated[
        bool, typer.Option("--allow-private", help="Allow private network addresses (a local mirror).")
    ] = False,
    allow_loopback: Annotated[
        bool, typer.Option("--allow-loopback", help="Allow 127.0.0.0/8 and ::1 (a mirror on this machine).")
    ] = False,
    deny: Annotated[
        Path | None,
        typer.Option(
            "--deny", help="Deny list: one URL or URL sha256 a line; those rows are not downloaded."
        ),
    ] = None,
    drop_unsafe: Annotated[
        list[str] | None,
        typer.Option(
            "--drop-unsafe",
            help="Drop rows whose safety column matches, e.g. 'punsafe>0.5' or 'NSFW==NSFW' (repeatable).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines, only errors.")] = False,
) -> None:
    """Download a listing into img2dataset shards (tar + status Parquet + stats) in OUT, behind the guard.

    Extra columns of the listing are kept in {key}.json and the shards' status Parquet;
    OUT/status.parquet has one ok/rejected/failed row per listing row. Running the same command
    again downloads nothing and resumes an interrupted run; --retry-failed downloads the failed
    keys again and merges them into their shards, and keys refused for an address that
    --allow-loopback / --allow-private now allow are downloaded again. Exit status 1 when no row
    has an image. See docs/download.md.
    """
    from fairsets.core.atomic import LayoutBusy
    from fairsets.fetch.download.images import RESIZE_MODES, ImageSpec
    from fairsets.fetch.guard import FetchPolicy
    from fairsets.fetch.shards import ListingError, download_listing, summary_line
    from fairsets.fetch.shards.policy import RowPolicy, parse_rule, read_deny_file

    setup_logging(False, quiet)
    if resize_mode not in RESIZE_MODES:
        die(f"--resize-mode must be one of {', '.join(RESIZE_MODES)}, not {resize_mode!r}")
    policy = FetchPolicy(
        allow_loopback=allow_loopback,
        allow_private=allow_private,
        timeout=timeout,
        # the defaults pace remote hosts; limits given here apply to loopback names too
        pace_loopback=per_host_rate is not None or per_host_connections is not None,
        **({"per_host_rate": per_host_rate} if per_host_rate is not None else {}),
        **({"per_host_connections": per_host_connections} if per_host_connections is not None else {}),
    )
    started = time.monotonic()
    rate = _Rate()
    try:
        row_policy = RowPolicy(
            deny=read_deny_file(deny) if deny is not None else frozenset(),
            deny_name=deny.name if deny is not None else "",
            rules=tuple(parse_rule(r) for r in drop_unsafe or ()),
        )
        rows = download_listing(
            listing,
            out,
            policy,
            url_col=url_col,
            caption_col=caption_col,
            processes=processes,
            threads=threads,
            image=ImageSpec(resize_mode, image_size),
            shard_size=shard_size,
            retry_failed=retry_failed,
            progress=rate.update,
            row_policy=row_policy,
        )
    except (ListingError, LayoutBusy, ValueError, OSError) as exc:
        die(exc)
    seconds = time.monotonic() - started
    line = f"{summary_line(rows)}{_policy_part(rows)}{_hosts_part(out)} -> {out}"
    if rate.samples:
        line += (
            f" ({rate.samples} URLs tried in {seconds:.1f} s, {rate.samples / max(seconds, 1e-9):.1f} URLs/s)"
        )
    n_ok = sum(r["status"] == "ok" for r in rows)
    if not n_ok:  # exit status 1: nothing to work with (scripts see it; the line says why)
        typer.echo(f"{line}; no image downloaded{_blocked_hint(rows) or _nothing_hint(rows, retry_failed)}")
        raise typer.Exit(1)
    if not rate.samples:
        line += "; nothing new to download" + _nothing_hint(rows, retry_failed)
    typer.echo(f"{line}{_blocked_hint(rows)}")


def _policy_part(rows: list[dict]) -> str:
    """``; dropped by policy: 3 denied, 2 unsafe`` (from the rows' reasons), or nothing."""
    n = {k: sum(str(r.get("error") or "").startswith(k + ":") for r in rows) for k in ("denied", "unsafe")}
    if not any(n.values()):
        return ""
    return "; dropped by policy: " + ", ".join(f"{v} {k}" for k, v in n.items() if v)


def _hosts_part(out: Path, top: int = 3) -> str:
    """``; hosts that asked to slow down: a.org 2 times in 120 requests, ...`` from the call's
    ``hosts.json`` (nothing when no host answered 429 or 503 with Retry-After)."""
    import json

    from fairsets.fetch.shards.run import HOSTS, WORK

    try:
        hosts = json.loads((out / WORK / HOSTS).read_text())["hosts"]
    except (OSError, ValueError, KeyError):
        return ""
    slowed = [(name, t) for name, t in hosts.items() if t.get("throttled")]
    parts = [f"{name} {t['throttled']} times in {t['requests']} requests" for name, t in slowed[:top]]
    more = f" and {len(slowed) - top} more" if len(slowed) > top else ""
    return "; hosts that asked to slow down: " + ", ".join(parts) + more if parts else ""


def _nothing_hint(rows: list[dict], retry_failed: bool) -> str:
    """What a run that downloaded nothing can do next: retry the failed keys, if there are any."""
    failed = sum(r["status"] == "failed" for r in rows)
    if failed and not retry_failed:
        return f" ({failed} failed: --retry-failed downloads them again)"
    if failed:
        return f" ({failed} failed: run again later, or check the network)"
    return " (every row has its verdict)"


def _blocked_hint(rows: list[dict]) -> str:
    """The way out when addresses were refused that a flag allows (a mirror on this machine or network)."""
    errors = [str(r.get("error") or "") for r in rows if r.get("status") == "rejected"]
    blocked = [e for e in errors if e.startswith("blocked_address")]
    flags = [
        flag
        for flag, word in (("--allow-loopback", "allow_loopback"), ("--allow-private", "allow_private"))
        if any(word in e for e in blocked)
    ]
    if not flags:
        return ""
    return f"; {len(blocked)} URL(s) point to this machine or a private network: if that is meant, add " + (
        " / ".join(flags)
    )


class _Rate:
    """Progress lines with images/s, from ``progress(done, total)`` calls (a new total: a new round)."""

    def __init__(self) -> None:
        self.samples = 0  # downloaded by this call, all rounds
        self._total = -1
        self._start = self._last = 0
        self._t0 = time.monotonic()

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if total != self._total:  # a round starts: done counts what an earlier call downloaded
            self._total, self._start, self._last, self._t0 = total, done, done, now
            return
        self.samples += done - self._last
        self._last = done
        rate = (done - self._start) / max(now - self._t0, 1e-9)
        log.info("%d/%d samples, %.1f images/s", done, total, rate)
