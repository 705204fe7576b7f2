"""Small helpers shared by the ``fairsets`` command modules.

Every CLI error is one line on stderr (the problem, then the fix), exit code 2, no traceback;
``fairsets --debug …`` (or ``FAIRSETS_DEBUG=1``) adds the traceback. :func:`die` is how a command
reports an error it expected; :func:`describe` turns any exception that escaped a command into
that one line (:class:`fairsets.cli.FairsetsApp` calls it at the entry point).
:func:`setup_logging` sets the ``fairsets`` loggers' level for a command (``-v``, ``--quiet``).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import traceback
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)

#: Set by ``fairsets --debug``: errors also print their traceback.
DEBUG = False

#: Set by ``fairsets -v``: debug logging, which no command's own ``--quiet`` default may undo.
VERBOSE = False


def debug_enabled() -> bool:
    """``--debug`` was given, or ``FAIRSETS_DEBUG`` is set to something other than 0/empty."""
    return DEBUG or os.environ.get("FAIRSETS_DEBUG", "").strip() not in ("", "0")


def setup_logging(verbose: bool, quiet: bool) -> None:
    """The ``fairsets`` loggers' level for a command: DEBUG under ``fairsets -v`` (given before the
    command, it wins over the command's defaults and its ``--quiet``), else WARNING with ``--quiet``,
    else INFO."""
    verbose = verbose or VERBOSE
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    # Other libraries (open_clip logs to the root logger) speak only at WARNING and above, or INFO
    # under -v (their DEBUG, e.g. Pillow's chunk-by-chunk trace, would drown fairsets' own).
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("fairsets").setLevel(level)


def one_line(message: object) -> str:
    """The message on one line: its lines joined with " | " (tracebacks in messages are not kept)."""
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    return " | ".join(lines[:10]) + (" | …" if len(lines) > 10 else "")


def die(message: str | BaseException, code: int = 2) -> NoReturn:
    """One line on stderr (rich markup escaped), non-zero exit; with ``--debug`` also the traceback.

    ``message`` may be the exception a command caught: network, file-system and decoding errors
    then get their fix hint (:func:`explain`), others their own message.
    """
    if debug_enabled() and sys.exc_info()[0] is not None:
        traceback.print_exc(file=sys.stderr)
    known = explain(message) if isinstance(message, BaseException) else None
    text = known or one_line(message)
    console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


_NETWORK_HINT = "check the network connection and the address (or use a cached/local copy)"


def describe(exc: BaseException) -> str:
    """One line for an exception no command handled: the problem and, where known, the fix."""
    known = explain(exc)
    if known is not None:
        return known
    msg = one_line(exc) if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {msg} (run with --debug for the traceback; please report it)"


def explain(exc: BaseException) -> str | None:
    """One line (problem + fix) for the kinds of error whose fix is known, else ``None``."""
    import socket
    import urllib.error

    from fairsets.core.errors import NetworkFailure, SaysTheFix

    msg = one_line(exc) if str(exc).strip() else type(exc).__name__
    if isinstance(exc, SaysTheFix):
        return msg  # written as problem + fix already
    if type(exc).__module__.startswith("fairsets.") and str(exc).strip():
        return msg  # fairsets' own error types (LLMServiceError, CommonsError, ...) say what to do
    if isinstance(exc, ImportError):  # an optional dependency that is not installed
        if "pip install" in msg:
            return msg  # our own import errors name the extra
        missing = getattr(exc, "name", None) or msg
        return (
            f"the Python module {missing!r} is not installed; install the extra this command needs "
            "(README, 'Extras'), or pip install 'fairsets[all]'"
        )
    if isinstance(exc, NetworkFailure):
        return f"{msg} ({_NETWORK_HINT})"
    if isinstance(exc, (urllib.error.URLError, socket.gaierror, ConnectionError, TimeoutError)):
        reason = getattr(exc, "reason", None) or msg
        return f"network: {one_line(reason)} ({_NETWORK_HINT})"
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}); convert it to UTF-8 "
            "(run with --debug to see which read failed)"
        )
    if isinstance(exc, MemoryError):
        return "out of memory; use smaller inputs or batches, or a machine with more memory"
    if isinstance(exc, FileExistsError) and exc.filename and os.path.isfile(exc.filename):
        return f"{exc.filename}: a file is where a folder must be created; choose another path"
    if isinstance(exc, NotADirectoryError) and exc.filename:
        return f"{exc.filename}: part of this path is a file, not a folder; choose another path"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        where = f"{exc.filename}: " if exc.filename else ""
        return (
            f"{where}{exc.strerror or msg}; free space on that disk (or make it writable, or write "
            "elsewhere), then run the command again"
        )
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}; check the path and its permissions"
    return None


def report_usage(exc: Any) -> NoReturn:
    """A click usage error (unknown option, missing argument, bad value) as one line: the problem
    and where to look (``fairsets COMMAND --help``), exit code 2 (click's own for these)."""
    ctx = getattr(exc, "ctx", None)
    text = one_line(exc.format_message())
    text += f" (see: {ctx.command_path} --help)" if ctx is not None else " (see the command's --help)"
    console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    sys.exit(int(getattr(exc, "exit_code", 2) or 2))


def report_unexpected(exc: BaseException) -> NoReturn:
    """The entry point's catch-all: one line and exit 2, or the traceback under ``--debug``."""
    if debug_enabled():
        traceback.print_exception(exc, file=sys.stderr)
    try:
        line = describe(exc)
    except Exception:  # describing must never raise over the real error
        line = f"{type(exc).__name__}: {one_line(exc)} (run with --debug for the traceback; please report it)"
    console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    sys.exit(2)
