"""The output folder of a build: refusing a foreign one, holding its lock, cleaning up after a stop.

A build holds ``OUT/.fairsets/lock`` for its whole run (:func:`_lock`). It does not use
:func:`fairsets.core.atomic.layout_lock`, the same lock for the commands that update a finished
layout (card, Hub publish): this one also re-checks that the file it locked is still the one at
the path (a failed build removes its work folder, lock included, so another build may have locked
an unlinked file), creates the folders above ``OUT``, refuses while a worker of an earlier build
still runs, and says what went wrong with the build's own words (:class:`BuildError`, ``--out``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .executors import WORKERS_LOCK, workers_busy
from .layout import WORKDIR, BuildError

log = logging.getLogger("fairsets.pipeline.build")  # the build's name, as log lines always showed


def _check_out(out: Path, force: bool) -> None:
    """Refuse an output that is a file, or a non-empty folder that is not a fairsets output."""
    if out.exists() and not out.is_dir():
        raise BuildError(f"the output {out} is an existing file, not a folder; choose a folder path")
    if force or not out.is_dir() or (out / WORKDIR).exists() or (out / "manifest.json").exists():
        return
    try:
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise BuildError(f"cannot read the output folder {out}: {exc.strerror or exc}") from None
    if entries:
        shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
        problem = f"the output folder {out} is not empty ({shown}) and is not a fairsets output"
        raise BuildError(
            f"{problem}; choose an empty or new folder, or pass force=True to build into it",
            cli=f"{problem}; choose an empty or new --out folder, or pass --force to build into it",
        )


@contextmanager
def _lock(out: Path, *, force: bool = False) -> Iterator[None]:
    """Hold ``OUT/.fairsets/lock`` for the build; refuse while another build or an old worker runs.

    If the build fails and this call created the work folder, it is removed again when nothing but
    the locks was written in it (and ``out`` too, if this call created it and it is empty): a
    failed start leaves no trace. A build that wrote anything keeps it, to resume.
    """
    _check_out(out, force)
    workdir = out / WORKDIR
    made_work = not workdir.exists()
    made = next((d for d in reversed([out, *out.parents]) if not d.exists()), None)  # topmost new
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create the output folder {out}: {exc.strerror or exc}"
        raise BuildError(
            f"{problem}; choose an output folder on a disk you can write to",
            cli=f"{problem}; choose an --out folder on a disk you can write to",
        ) from None
    path = workdir / "lock"
    for _ in range(5):
        try:
            fh = open(path, "a")  # noqa: SIM115 - held open for the whole build
        except OSError as exc:
            problem = f"cannot open the lock file {path}: {exc.strerror or exc}"
            raise BuildError(
                f"{problem}; choose an output folder on a disk you can write to",
                cli=f"{problem}; choose an --out folder on a disk you can write to",
            ) from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise BuildError(
                f"another build (or a Hub publish or card update) is running in {out}; wait for it to end "
                "(or stop it), then build again"
            ) from None
        try:
            if os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino:
                break  # else a failed build removed the file we locked: lock the new one
        except FileNotFoundError:
            pass
        fh.close()
    else:
        raise BuildError(f"cannot lock {path}: it keeps being replaced; is another build starting?")
    ok = False
    try:
        if workers_busy(workdir):
            raise BuildError(
                f"a worker of an earlier build (its driver was killed?) still writes in {out}; wait for "
                "it to end or stop it, then build again"
            )
        yield
        ok = True
    finally:
        try:
            if not ok and not workers_busy(workdir):  # stopped (Ctrl-C): the workers were terminated
                _remove_temps(out, workdir)  # mid-write, so what they were writing is garbage
            if not ok and made_work:
                _remove_if_untouched(out, workdir, made)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


def _remove_temps(out: Path, workdir: Path) -> None:
    """Delete the temporary files a killed build left in the layout and in its own work folders.

    Called under the lock, once no worker of an earlier build runs (:func:`_lock`), so no writer
    of them is alive. The work folder's other contents (an audit's embedding cache) are not ours.
    """
    from fairsets.core.atomic import remove_temps

    try:
        removed = remove_temps(out, skip=(WORKDIR,))
        for sub in ("markers", "samples", "materialize"):
            removed += [f"{WORKDIR}/{sub}/{r}" for r in remove_temps(workdir / sub)]
    except OSError as exc:  # a courtesy: what is left is removed by the next build, or reported
        log.warning("could not remove the temporary files of an interrupted build: %s", exc)
        return
    if removed:
        log.info("removed %d temporary file(s) of an interrupted build: %s", len(removed), removed[:3])


def _remove_if_untouched(out: Path, workdir: Path, made: Path | None) -> None:
    """Remove a work folder holding nothing but the locks, then the empty folders this build made
    (``out`` up to ``made``, the topmost folder that did not exist before)."""
    try:
        files = [p for p in workdir.rglob("*") if not p.is_dir()]
        if any(p.parent != workdir or p.name not in ("lock", WORKERS_LOCK) for p in files):
            return
        shutil.rmtree(workdir)
        if made is None:
            return
        for d in [out, *out.parents]:
            if any(d.iterdir()):
                break
            d.rmdir()
            if d == made:
                break
    except OSError as exc:  # cleaning up is a courtesy; the build's own error matters
        log.debug("could not remove %s: %s", workdir, exc)
