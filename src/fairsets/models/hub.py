"""Is the Hugging Face hub reachable? Decided in milliseconds, before any model download.

Without a network, ``huggingface_hub`` retries every request with backoff (about a minute per
missing file) before it gives up. :func:`hub_access` instead tries one TCP connection to the hub
host (``HF_ENDPOINT``, default ``https://huggingface.co``) with a short timeout; when that fails it
switches ``huggingface_hub`` (and so ``transformers`` and ``open_clip``) to offline mode for the
load, so that cached files still load and missing ones fail at once, and says why.
"""

from __future__ import annotations

import contextlib
import os
import socket
import urllib.parse
from collections.abc import Iterator

__all__ = ["hub_access", "hub_endpoint", "hub_errors", "offline_reason"]

#: Seconds one connection attempt to the hub may take (``FAIRSETS_HUB_PROBE_TIMEOUT``).
PROBE_TIMEOUT = 3.0
_TRUE = {"1", "on", "yes", "true"}
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_probed: dict[str, str | None] = {}


def hub_endpoint() -> str:
    """The hub address huggingface_hub uses (its ``ENDPOINT``, from ``HF_ENDPOINT``)."""
    try:
        from huggingface_hub import constants

        return str(constants.ENDPOINT).rstrip("/")
    except Exception:  # not installed: what it would read
        return (os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co").rstrip("/")


def _offline_env() -> str | None:
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return f"{name} is set"
    try:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            return "HF_HUB_OFFLINE is set"
    except Exception:  # not installed
        pass
    return None


def offline_reason() -> str | None:
    """Why the hub cannot be used here (offline mode set, or its host unreachable), or ``None``.

    The probe is one TCP connection (no HTTP request, nothing sent), its result kept for the
    process; behind a proxy (``HTTPS_PROXY``, ...) nothing is probed.
    """
    env = _offline_env()
    if env:
        return env
    endpoint = hub_endpoint()
    if endpoint in _probed:
        return _probed[endpoint]
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname
    if not host or any(os.environ.get(v, "").strip() for v in _PROXY_VARS):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        timeout = float(os.environ.get("FAIRSETS_HUB_PROBE_TIMEOUT", "") or PROBE_TIMEOUT)
    except ValueError:
        timeout = PROBE_TIMEOUT
    reason: str | None = None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except TimeoutError:
        reason = f"the Hugging Face hub {host}:{port} did not answer within {timeout:g}s"
    except OSError as e:  # refused, unresolvable, unreachable, blocked
        why = e.strerror or str(e) or type(e).__name__
        reason = f"the Hugging Face hub {host}:{port} cannot be reached ({why})"
    _probed[endpoint] = reason
    return reason


@contextlib.contextmanager
def hub_access() -> Iterator[str | None]:
    """Yield :func:`offline_reason`; while it is not ``None``, huggingface_hub is in offline mode
    (cached files load, nothing is downloaded or retried). The previous mode is restored after."""
    reason = offline_reason()
    if reason is None or _offline_env():
        yield reason
        return
    saved_env = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = None
    saved_const = None
    try:
        from huggingface_hub import constants

        saved_const = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except Exception:  # huggingface_hub not installed: nothing to switch
        constants = None
    try:
        yield reason
    finally:
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env
        if constants is not None:
            constants.HF_HUB_OFFLINE = saved_const


def hub_errors() -> tuple[type[BaseException], ...]:
    """What a failed Hugging Face download raises: OSError, and huggingface_hub's errors where installed."""
    errors: list[type[BaseException]] = [OSError]
    try:
        from huggingface_hub import errors as hub_error_types
    except ImportError:
        return tuple(errors)
    for name in ("EntryNotFoundError", "HfHubHTTPError", "LocalEntryNotFoundError", "OfflineModeIsEnabled"):
        cls = getattr(hub_error_types, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            errors.append(cls)
    return tuple(errors)
