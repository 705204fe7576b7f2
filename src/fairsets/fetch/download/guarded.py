"""img2dataset behind the guard: the downloader and the status classification.

* :class:`GuardedDownloader` (a subclass of img2dataset's ``Downloader``) installs
  :func:`fairsets.fetch.guard.guarded_opener` as urllib's global opener around every shard it
  downloads; a spawned worker unpickles it, so the install happens in the worker itself;
* :func:`classify_img2dataset` maps img2dataset's per-sample status to ours (``ok`` /
  ``rejected`` / ``failed``).

How the images are stored (:class:`~fairsets.fetch.download.images.ImageSpec`) and the pixel cap
(:class:`~fairsets.fetch.download.images.PixelCappedResizer`) are in :mod:`.images`.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from typing import Any

from .. import _img2dataset
from ..guard import FetchPolicy, classify_http_status, guarded_opener, too_slow_reason
from ..guard.hosts import diff_totals, pacer_for

try:  # img2dataset's modules without its package __init__ (wandb, ray, pandas) nor torch: _img2dataset
    Downloader = _img2dataset.load("downloader").Downloader
except ImportError as _err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"fairsets.fetch.download needs img2dataset and its runtime dependencies ({_err.name or _err} "
        "is missing). img2dataset's pins on albumentations<2, pandas<3, webdataset<0.3 and dataclasses "
        "are too strict, so install it without them, and the rest with the fetch extra: "
        "pip install --no-deps 'img2dataset==1.47.0' && pip install 'fairsets[fetch]' (docs/install.md)"
    ) from _err

_MAX_ERROR = 500

# One guarded opener at a time per process: install_opener() sets a process-wide global.
_OPENER_LOCK = threading.Lock()


class GuardedDownloader(Downloader):
    """img2dataset's ``Downloader`` with :func:`guarded_opener` installed while a shard downloads.

    img2dataset fetches with ``urllib.request.urlopen``, which uses the opener installed by
    ``urllib.request.install_opener``. The opener is installed in the process that runs the shard
    (a spawned worker unpickles this class, importing this module), and the previous opener is
    restored afterwards so an in-process run leaves no global change behind. While an in-process
    shard runs, other threads of the process that call ``urlopen`` get the guarded opener too
    (stricter, never looser), and in-process shards of concurrent calls run one at a time.

    Every thread of the process waits its host's turn (:mod:`fairsets.fetch.guard.hosts`); the
    processes of one download share the pauses a 429 asks for through ``pause_dir``.

    Args:
        policy: the fetch policy enforced on every request and redirect hop (the per-host limits
            of one process).
        user_agent: the User-Agent sent (replaces img2dataset's browser-like one).
        pause_dir: the folder of the pauses shared between the download's processes (None: none).
        **kwargs: img2dataset ``Downloader`` arguments.
    """

    def __init__(
        self, *, policy: FetchPolicy, user_agent: str, pause_dir: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.user_agent = user_agent
        self.pause_dir = pause_dir

    def __call__(self, row: tuple[int, str]) -> tuple[bool, tuple[int, str]]:
        """Download one img2dataset shard ``(shard_id, arrow_file)`` behind the guard."""
        return self.run_shard(row)[:2]  # type: ignore[return-value]

    def run_shard(self, row: tuple[int, str]) -> tuple[bool, tuple[int, str], dict[str, dict]]:
        """:meth:`__call__`, and the shard's requests per host (:meth:`HostPacer.totals` of it)."""
        opener = guarded_opener(self.policy, self.user_agent, pause_dir=self.pause_dir)
        pacer = pacer_for(self.policy, self.pause_dir)
        with _OPENER_LOCK:  # one shard at a time per process: the totals are this shard's
            before = pacer.totals() if pacer is not None else {}
            previous = urllib.request._opener  # type: ignore[attr-defined]
            urllib.request.install_opener(opener)
            try:
                ok, done = super().__call__(row)
            finally:
                urllib.request.install_opener(previous)
            hosts = diff_totals(pacer.totals(), before) if pacer is not None else {}
        return ok, done, hosts


def _run_shard(downloader: GuardedDownloader, row: tuple[int, str]) -> tuple[bool, tuple[int, str], dict]:
    """A worker's task: one shard and its totals per host (picklable: a module-level function)."""
    return downloader.run_shard(row)


# --- classification ---

_HTTP_RE = re.compile(r"^HTTP Error (\d{3}): ?(.*)$", re.S)
_REFUSED_RE = re.compile(r"refused \(([a-z_]+)\): (.*?)>?$", re.S)


def classify_img2dataset(status: str | None, error_message: str | None) -> tuple[str, str | None]:
    """Map img2dataset's ``status``/``error_message`` to ours.

    Args:
        status: ``success``, ``failed_to_download`` or ``failed_to_resize``.
        error_message: img2dataset's text (``str`` of the exception raised while downloading).

    Returns:
        ``(status, error)`` with status ``ok`` / ``rejected`` / ``failed`` and error
        ``"<reason>: <detail>"`` (None when ok). Reasons: ``blocked_address``,
        ``blocked_scheme``, ``too_many_redirects``, ``too_large``, ``opted_out``, ``http_<code>``,
        ``invalid_url``, ``undecodable`` (rejected); ``http_<code>`` for 408/429/5xx,
        ``deadline``, ``min_rate`` (the download was too slow: :class:`~fairsets.fetch.guard.TooSlow`),
        ``timeout``, ``connection``, ``error`` (failed).
    """
    msg = (error_message or "").strip()
    if status == "success":
        return "ok", None
    if status == "failed_to_resize":
        m = _REFUSED_RE.search(msg)  # PixelCappedResizer: too many pixels
        if m:
            return "rejected", _clip(f"{m.group(1)}: {m.group(2)}")
        return "rejected", _clip(f"undecodable: {msg}")
    if status != "failed_to_download":
        return "failed", _clip(f"error: img2dataset status {status!r}: {msg}")
    m = _REFUSED_RE.search(msg)
    if m:
        return "rejected", _clip(f"{m.group(1)}: {m.group(2)}")
    slow = too_slow_reason(msg)
    if slow is not None:
        return "failed", _clip(f"{slow[0]}: {slow[1]}")
    if "disallowed by X-Robots-Tag" in msg:
        return "rejected", _clip(f"opted_out: {msg}")
    m = _HTTP_RE.match(msg)
    if m:
        code = int(m.group(1))
        return classify_http_status(code), _clip(f"http_{code}: {m.group(2)}")
    if msg.startswith("unknown url type") or "can't contain control characters" in msg:
        return "rejected", "invalid_url: not an absolute http(s) URL"
    if "timed out" in msg.lower() or "timeout" in msg.lower():
        return "failed", _clip(f"timeout: {msg}")
    if (
        msg.startswith(("<urlopen error", "IncompleteRead("))
        or "connection" in msg.lower()
        or "Remote end closed" in msg
    ):
        return "failed", _clip(f"connection: {msg}")
    return "failed", _clip(f"error: {msg}")


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."
