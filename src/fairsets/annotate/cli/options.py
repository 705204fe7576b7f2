"""Option checks shared by the ``fairsets annotate`` commands, each a one-line error before any work.

* :func:`split_names` — a list option given comma-separated, repeated, or both;
* :func:`check_input_file` / :func:`check_ann_folder` — a folder for a file, a file for the folder;
* :func:`checked_device` — ``--device`` exists on this machine (before any worker starts);
* :func:`names_option` — the declaration of such a list option;
* :func:`library_errors` — what the annotate library raises for input a user can fix (one line each);
* :func:`read_prompt` — ``--prompt`` / ``--prompt-file``, read the same way by every command that
  captions (so the same prompt makes the same request, and cached answers are shared).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die


def names_option(flag: str, help: str, metavar: str = "<labels>") -> Any:
    """A list option that takes names comma-separated, repeated, or both (read with :func:`split_names`)."""
    return typer.Option(flag, metavar=metavar, help=f"{help}; comma-separated, repeatable or both.")


def library_errors() -> tuple[type[BaseException], ...]:
    """The exceptions the annotate commands turn into one line: bad input or folders, a model or
    package that is not there, a failed task, a folder another run holds, files that cannot be read."""
    from fairsets.annotate.layout import AnnotationError
    from fairsets.core.atomic import LayoutBusy
    from fairsets.core.step import MissingDependency
    from fairsets.models.base import ModelUnavailable
    from fairsets.pipeline.executors import TaskFailed

    return (AnnotationError, ModelUnavailable, MissingDependency, TaskFailed, LayoutBusy, ValueError, OSError)


def split_names(values: str | list[str] | None, option: str, example: str = "female,male") -> list[str]:
    """The names of an option given comma-separated, repeated, or both (``--x a,b --x c``), in order.

    ``None`` (the option not given) is ``[]``; a value with no name in it is a one-line error.
    """
    if values is None:
        return []
    names: list[str] = []
    for value in [values] if isinstance(values, str) else values:
        parts = [c.strip() for c in value.split(",") if c.strip()]
        if not parts:
            die(f"{option} {value!r} names nothing: give names separated by commas, e.g. {option} {example}")
        names += [p for i, p in enumerate(parts) if p not in names and p not in parts[:i]]
    return names


def check_input_file(path: Path, what: str) -> None:
    """A folder where an input file must be is a one-line error (a missing file is left to the reader)."""
    if path.is_dir():
        die(f"{path}: a folder, not a file; give the {what}")


def check_ann_folder(ann: Path, option: str = "ANN") -> None:
    """A file where the annotation folder must be is a one-line error naming the option."""
    if ann.exists() and not ann.is_dir():
        die(f"{option} {ann}: a file, not a folder; give the annotation folder (annotate persons --out)")


def checked_device(device: str) -> str:
    """``--device`` checked before any work starts (also when workers would load the model):
    a device that does not exist here is a one-line error naming the option."""
    if device.strip() == "cpu":
        return "cpu"
    from fairsets.models.base import check_device

    try:
        return check_device(device)
    except ValueError as exc:
        message = str(exc).replace("use device='cpu'", "use --device cpu")
        die(f"--device {device}: {message}")


def checked_devices(devices: str | None) -> list[str] | None:
    """``--devices 0,1`` → ``["cuda:0", "cuda:1"]``, each checked here (one line when one is missing)."""
    if devices is None:
        return None
    from fairsets.pipeline.devices import parse_devices

    try:
        names = parse_devices(devices)
    except ValueError as exc:
        die(f"--devices {devices}: {exc}")
    for name in names:
        checked_device(name)
    return names


def read_prompt(prompt: str | None, prompt_file: Path | None) -> str | None:
    """The caption prompt from ``--prompt`` or ``--prompt-file`` (UTF-8, surrounding whitespace
    stripped), or ``None`` for the default; both given, an empty one or an unreadable file is a
    one-line error."""
    if prompt is not None and prompt_file is not None:
        die("--prompt and --prompt-file both given: use one of them")
    if prompt_file is not None:
        check_input_file(prompt_file, "prompt file")
        try:
            prompt = prompt_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            die(f"--prompt-file {prompt_file}: unreadable ({exc}); give a UTF-8 text file")
        if not prompt:
            die(f"--prompt-file {prompt_file} is empty: write the prompt in it")
    elif prompt is not None and not prompt.strip():
        die("--prompt is empty: give the text to send with each image, or leave it out for the default")
    return prompt


#: ``--devices`` and ``--gpus-per-task`` of the commands that run a model per shard (persons, classify).
DevicesOption = Annotated[
    str | None,
    typer.Option(help="GPUs for the local workers, round-robin, e.g. 0,1 (Ray assigns its own)."),
]
GpusPerTaskOption = Annotated[
    float | None,
    typer.Option(help="GPUs each task asks Ray for; fractions share one (default: 1 on cuda, 0 on cpu)."),
]
