"""Per-host politeness: at most ``per_host_connections`` requests open and ``per_host_rate``
requests started per second per host name, and a host that answered 429 (or 503 with
``Retry-After``) gets no request before the time it asked for.

One :class:`HostPacer` per process and policy (:func:`pacer_for`) is shared by every thread and
every guarded opener of that process, so img2dataset's download threads and :func:`fetch_url`
calls wait their turn together. The rules:

* **connections**: a request takes one of the host's ``per_host_connections`` slots before it
  connects and gives it back when its answer is closed (a redirect hop is a request of the host it
  goes to);
* **rate**: request starts to one host are spaced at least ``1 / per_host_rate`` seconds apart, so
  no window of one second holds more than ``per_host_rate`` of them (rounded up);
* **Retry-After**: a 429 pauses its host for the ``Retry-After`` it carries (delta-seconds or an
  HTTP date; absent or unreadable: 1, 2, 4, ... seconds by try), and every request to that host
  waits until the pause ends. A pause longer than ``retry_after_max`` is not waited for: requests
  to the host fail at once with ``too slow (retry_after)`` (transient, ``--retry-failed`` tries
  them later) and none is sent before the pause ends;
* time spent waiting for a slot, the rate or a pause is not counted in a download's ``deadline``.

Worker processes of one download share each host's schedule through a file per host in a folder
(``pause_dir``), read and written under an exclusive ``flock``: the next start the rate allows and
the end of a pause, so the rate holds for all processes together and a 429 seen by one worker
pauses the host in every worker. Connections are not shared that way: the download divides them
between its processes (:func:`share`; at least 1 each). Without ``fcntl`` (Windows) the rate is
divided too.

``per_host_rate = 0`` and ``per_host_connections = 0`` switch the respective limit off. Loopback
host names (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``::1``: your own machine, reachable
only with ``--allow-loopback``) get no rate or connection limit unless the policy says
``pace_loopback`` (a command does when the limits were given explicitly); a 429's ``Retry-After``
is honoured for every host.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .policy import FetchPolicy
from .refusals import TooSlow

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no shared schedule, the rate is divided instead
    fcntl = None  # type: ignore[assignment]

#: The wait after a 429 without a readable ``Retry-After``: this many seconds, doubled per try.
DEFAULT_BACKOFF = 1.0


@dataclass
class HostTotals:
    """What one host saw from this process: requests sent, 429/503 answers that paused it, rows
    given up on for a pause, and seconds spent waiting for its turn (slot, rate or pause)."""

    requests: int = 0
    throttled: int = 0
    gave_up: int = 0
    waited_s: float = 0.0

    def add(self, other: dict[str, Any]) -> None:
        self.requests += int(other.get("requests", 0))
        self.throttled += int(other.get("throttled", 0))
        self.gave_up += int(other.get("gave_up", 0))
        self.waited_s += float(other.get("waited_s", 0.0))

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "throttled": self.throttled,
            "gave_up": self.gave_up,
            "waited_s": round(self.waited_s, 3),
        }


def is_loopback_name(name: str) -> bool:
    """``name`` (a URL's host) names this machine: ``localhost``, ``*.localhost`` or a loopback IP."""
    import ipaddress

    name = name.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class _Host:
    def __init__(self, connections: int, paced: bool = True) -> None:
        self.paced = paced  # rate and connections apply (not to an exempt loopback name)
        connections = connections if paced else 0
        self.slots = threading.BoundedSemaphore(connections) if connections > 0 else None
        self.next_at = 0.0  # monotonic: the earliest next start (rate)
        self.not_before = 0.0  # monotonic: the end of a pause (Retry-After)
        self.totals = HostTotals()


class HostPacer:
    """The per-host limits of one process (see the module docstring)."""

    def __init__(
        self,
        rate: float,
        connections: int,
        retry_after_max: float,
        pause_dir: str | None = None,
        pace_loopback: bool = False,
    ) -> None:
        self.pace_loopback = pace_loopback
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.connections = connections
        self.retry_after_max = retry_after_max
        self.pause_dir = Path(pause_dir) if pause_dir else None
        self._hosts: dict[str, _Host] = {}
        self._lock = threading.Lock()

    def _host(self, name: str) -> _Host:
        with self._lock:
            host = self._hosts.get(name)
            if host is None:
                paced = self.pace_loopback or not is_loopback_name(name)
                host = self._hosts[name] = _Host(self.connections, paced)
            return host

    # --- the schedule shared between processes: a file per host, under an exclusive lock ---

    def _schedule_file(self, name: str) -> Path | None:
        if self.pause_dir is None:
            return None
        return self.pause_dir / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".host")

    @contextlib.contextmanager
    def _shared(self, name: str) -> Iterator[list[float] | None]:
        """``[next_at, not_before]`` (wall clock) of ``name`` in every process that shares
        ``pause_dir``, held under an exclusive ``flock``; written back when the block ends."""
        path = self._schedule_file(name)
        if path is None or fcntl is None:
            yield None
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+", encoding="ascii") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            try:
                state = [float(x) for x in f.read().split()[:2]]
            except ValueError:
                state = []
            state = [*state, 0.0, 0.0][:2]
            before = list(state)
            yield state
            if state != before:
                f.seek(0)
                f.truncate()
                f.write(f"{state[0]!r} {state[1]!r}")
                f.flush()
            # closing the file releases the lock

    def pause(self, name: str, seconds: float) -> None:
        """Pause ``name`` for ``seconds`` from now (a 429's Retry-After), here and in every process
        that shares ``pause_dir``."""
        host = self._host(name)
        with self._lock:
            host.not_before = max(host.not_before, time.monotonic() + seconds)
            host.totals.throttled += 1
        with self._shared(name) as shared:
            if shared is not None:
                shared[1] = max(shared[1], time.time() + seconds)

    def _take(self, name: str, host: _Host, start: float) -> float:
        """Take ``name``'s next start if it is due; else the seconds until it may be."""
        with self._lock, self._shared(name) as shared:
            now = time.monotonic()
            wall = time.time()
            next_at, not_before = host.next_at, host.not_before
            if shared is not None:  # the shared schedule, in this process's monotonic time
                next_at = max(next_at, shared[0] - wall + now)
                not_before = max(not_before, shared[1] - wall + now)
            if not_before - now > self.retry_after_max:
                host.totals.gave_up += 1
                raise TooSlow(
                    "retry_after",
                    f"{name} asked to wait {not_before - now:.0f} s more (Retry-After), longer "
                    f"than retry_after_max {self.retry_after_max:g} s",
                )
            earliest = max(next_at, not_before)
            if earliest > now:
                return earliest - now
            interval = self.interval if host.paced else 0.0
            host.next_at = now + interval
            if shared is not None:
                shared[0] = wall + interval
            host.totals.requests += 1
            host.totals.waited_s += now - start
            return 0.0

    def acquire(self, name: str) -> tuple[float, Any]:
        """Wait for ``name``'s turn; return ``(seconds waited, release)``.

        Raises:
            TooSlow: (``retry_after``) if the host is paused for longer than ``retry_after_max``.
        """
        host = self._host(name)
        start = time.monotonic()
        if host.slots is not None:
            host.slots.acquire()
        try:
            while (wait := self._take(name, host, start)) > 0:
                time.sleep(wait)
        except BaseException:
            if host.slots is not None:
                host.slots.release()
            raise
        return time.monotonic() - start, _Release(host.slots)

    def totals(self) -> dict[str, dict[str, Any]]:
        """``{host: HostTotals.as_dict()}`` since this pacer was made."""
        with self._lock:
            return {name: h.totals.as_dict() for name, h in sorted(self._hosts.items())}


class _Release:
    """Gives a connection slot back, once."""

    def __init__(self, slots: threading.BoundedSemaphore | None) -> None:
        self._slots = slots
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            slots, self._slots = self._slots, None
        if slots is not None:
            slots.release()


_PACERS: dict[tuple[Any, ...], HostPacer] = {}
_PACERS_LOCK = threading.Lock()


def pacer_for(policy: FetchPolicy, pause_dir: str | os.PathLike[str] | None = None) -> HostPacer | None:
    """The process-wide pacer of ``policy``'s per-host limits (None when every limit is off)."""
    if policy.per_host_rate <= 0 and policy.per_host_connections <= 0:
        return None
    key = (
        policy.per_host_rate,
        policy.per_host_connections,
        policy.retry_after_max,
        str(pause_dir) if pause_dir else None,
        policy.pace_loopback,
    )
    with _PACERS_LOCK:
        pacer = _PACERS.get(key)
        if pacer is None:
            pacer = _PACERS[key] = HostPacer(*key)
        return pacer


def share(policy: FetchPolicy, processes: int) -> FetchPolicy:
    """``policy`` for one of ``processes`` worker processes that share a ``pause_dir``: the per-host
    connections divided between them (at least 1 each, so with more processes than connections a
    host sees up to ``processes`` connections); the rate is kept whole (the shared schedule holds
    it for all of them), or divided where there is no ``fcntl``."""
    if processes <= 1:
        return policy
    conn = policy.per_host_connections
    update: dict[str, Any] = {"per_host_connections": max(1, conn // processes) if conn > 0 else 0}
    if fcntl is None:  # pragma: no cover - Windows
        update["per_host_rate"] = policy.per_host_rate / processes
    return policy.model_copy(update=update)


def merge_totals(into: dict[str, HostTotals], got: dict[str, dict[str, Any]]) -> None:
    """Add ``{host: totals}`` (as :meth:`HostPacer.totals` gives them) into ``into``."""
    for name, t in got.items():
        into.setdefault(name, HostTotals()).add(t)


def diff_totals(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]]) -> dict[str, dict]:
    """``after - before`` per host (the totals of one shard from two snapshots)."""
    out = {}
    for name, a in after.items():
        b = before.get(name, {})
        d = {k: a[k] - b.get(k, 0) for k in a}
        if d["requests"] or d["throttled"] or d["gave_up"]:
            d["waited_s"] = round(d["waited_s"], 3)
            out[name] = d
    return out


def write_host_totals(
    path: str | os.PathLike[str], policy: FetchPolicy, hosts: dict[str, HostTotals]
) -> None:
    """Write (atomically) the requests of one call per host, busiest first, with the limits they were
    made under: ``{"limits": {...}, "hosts": {host: {requests, throttled, gave_up, waited_s}}}``."""
    import json

    from fairsets.core.atomic import atomic_write_text

    limits = {
        k: getattr(policy, k)
        for k in (
            "per_host_rate",
            "per_host_connections",
            "retry_after_max",
            "throttle_retries",
            "pace_loopback",
        )
    }
    ranked = sorted(hosts.items(), key=lambda kv: (-kv[1].requests, kv[0]))
    atomic_write_text(
        Path(path), json.dumps({"limits": limits, "hosts": {k: v.as_dict() for k, v in ranked}}, indent=2)
    )
