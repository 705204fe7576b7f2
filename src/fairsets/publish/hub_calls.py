"""Calling the Hugging Face Hub client for :mod:`fairsets.publish.hub`: token-free errors, and the
release tag.

:func:`call` runs one client method and turns what the Hub or the connection answered into a
:class:`PublishError` whose message is one short, printable line without the token. The client
reports a failed LFS object upload as a ``RuntimeError`` ("Error while uploading 'PATH' to the
Hub.") raised *from* the HTTP error: that chain is unwrapped, so the message names the file and the
HTTP status, never a traceback.

A release tag (``fairsets publish ... --tag v2``) names the commit an upload made:
:func:`validate_tag` checks its name (git's rules for a ref name), :func:`check_tag_free` refuses,
before anything is uploaded, a tag that already exists in the repository (a tag names one
release; moving it would silently change what an earlier citation points at), and
:func:`create_tag` tags the new commit.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any

from fairsets.core.short_text import printable_line

__all__ = [
    "MAX_ERROR_CHARS",
    "PublishError",
    "accepted",
    "call",
    "check_tag_free",
    "create_tag",
    "describe",
    "scrub",
    "validate_tag",
]

logger = logging.getLogger("fairsets.publish.hub")

REPO_TYPE = "dataset"
#: The most characters of a Hub error's text shown: a hostile or broken Hub may answer megabytes.
MAX_ERROR_CHARS = 500
#: Anything shaped like a Hugging Face token (another one than ours, or ours cut short, echoed back).
_TOKEN_LIKE = re.compile(r"hf_[A-Za-z0-9_]{20,}")
#: A tag name: git's ref-name rules (``git check-ref-format``) in their ASCII subset, at most 128
#: characters: letters, digits and ``. _ - / +``, no ``..``, ``//``, ``@{``, no leading ``-``,
#: ``.`` or ``/``, no trailing ``.``, ``/`` or ``.lock``.
_TAG_RE = re.compile(r"(?!.*(?:\.\.|//|@\{))(?![-./])[A-Za-z0-9._/+@-]{1,128}(?<![./])(?<!\.lock)", re.ASCII)


class PublishError(RuntimeError):
    """A publish cannot start or failed; the message is safe to show (it never holds the token)."""


def scrub(text: str, secret: str | None) -> str:
    """Replace every occurrence of ``secret`` in ``text`` (no-op for an empty secret)."""
    return text.replace(secret, "***") if secret else text


def _hub_error_types() -> tuple[type[BaseException], ...]:
    """Errors raised by huggingface_hub for HTTP, connection and validation failures."""
    types: list[type[BaseException]] = [OSError, ValueError]  # ConnectionError, OfflineModeIsEnabled, ...
    try:
        errors = importlib.import_module("huggingface_hub.errors")
    except ImportError:
        return tuple(types)
    http_error = getattr(errors, "HfHubHTTPError", None)
    if isinstance(http_error, type):
        # HfHubHTTPError and the HTTP library's base error (requests/httpx: transport errors too).
        types += [c for c in http_error.__mro__ if issubclass(c, Exception) and c is not Exception]
    return tuple(dict.fromkeys(types))


def _hub_cause(e: BaseException) -> BaseException | None:
    """The Hub error a client-side wrapper was raised from (its ``__cause__`` chain), if any."""
    types = _hub_error_types()
    seen: set[int] = set()
    cause = e.__cause__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, types):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None


def describe(e: BaseException, token: str | None) -> str:
    """A one-line, token-free, short description of a Hub error (with the HTTP status when known).

    The token is scrubbed from the whole text first (so that cutting cannot leave part of it),
    then the text is made one printable line and cut to :data:`MAX_ERROR_CHARS` characters.
    """
    status = getattr(getattr(e, "response", None), "status_code", None)
    full = _TOKEN_LIKE.sub("***", scrub(str(e), token))
    if token and len(token) >= 16:  # the token's start, echoed cut short or run into other text
        full = re.sub(re.escape(token[:10]) + r"[A-Za-z0-9_-]*", "***", full)
    text = printable_line(full, MAX_ERROR_CHARS, empty=type(e).__name__)
    prefix = f"HTTP {status}: " if isinstance(status, int) and str(status) not in text else ""
    return f"{type(e).__name__}: {prefix}{text}"


def call(api: Any, name: str, token: str | None, *, hint: str = "", **kwargs: Any) -> Any:
    """Call ``api.<name>(**kwargs)``, turning Hub errors into a readable, token-free PublishError.

    ``hint`` is appended to the message of a failure that is not about the token (e.g. how to
    resume an upload).
    """
    logger.debug("hub call %s(%s)", name, ", ".join(sorted(kwargs)))
    try:
        return getattr(api, name)(**kwargs)
    except PublishError:
        raise
    except Exception as e:
        cause = e if isinstance(e, _hub_error_types()) else _hub_cause(e)
        if cause is None:
            raise
        what = describe(cause, token)
        if cause is not e:  # the client's wrapper says which file: keep that, then the cause
            what = f"{printable_line(scrub(str(e), token), 200, empty=type(e).__name__)} {what}"
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if status in (401, 403):
            hint = " (check that the token is valid and has write access to this namespace)"
        raise PublishError(f"{name} failed for {kwargs.get('repo_id')}: {what}{hint}") from None


def accepted(method: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keep the keyword arguments ``method`` accepts (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    dropped = sorted(k for k in kwargs if k not in params)
    if dropped:
        logger.debug("%s does not take %s; not passed", getattr(method, "__name__", method), dropped)
    return {k: v for k, v in kwargs.items() if k in params}


def validate_tag(tag: str) -> str:
    """Check a release tag's name (see :data:`_TAG_RE`); return it stripped.

    Raises:
        PublishError: The name breaks a rule (the message gives an example of a good one).
    """
    name = tag.strip() if isinstance(tag, str) else ""
    if not _TAG_RE.fullmatch(name) or name.startswith("refs/"):
        raise PublishError(
            f"invalid tag {tag!r}: use 1 to 128 of letters, digits and '._-/+@', without '..', a "
            "leading '-', '.' or '/', or a trailing '.', '/' or '.lock', e.g. v1.0"
        )
    return name


def check_tag_free(api: Any, rid: str, tag: str, token: str) -> None:
    """Refuse a tag that already exists in ``rid`` (checked before anything is uploaded).

    Raises:
        PublishError: The tag exists (the message says at which commit, and what to do).
    """
    refs = call(api, "list_repo_refs", token, repo_id=rid, repo_type=REPO_TYPE)
    for ref in [*getattr(refs, "tags", []), *getattr(refs, "branches", [])]:
        if getattr(ref, "name", None) == tag:
            kind = "tag" if ref in getattr(refs, "tags", []) else "branch"
            at = str(getattr(ref, "target_commit", "") or "")[:12]
            raise PublishError(
                f"{kind} {tag!r} already exists in {rid}{f' (commit {at})' if at else ''}: a release "
                "tag names one revision and is never moved; publish with a new --tag, e.g. the next version"
            )


def create_tag(api: Any, rid: str, tag: str, revision: str, message: str, token: str) -> None:
    """Tag ``revision`` (the commit the upload made, or its branch) of ``rid`` with ``tag``."""
    logger.info("tagging %s of %s as %s", revision, rid, tag)
    call(
        api,
        "create_tag",
        token,
        repo_id=rid,
        tag=tag,
        revision=revision,
        tag_message=message,
        repo_type=REPO_TYPE,
        exist_ok=False,
    )
