"""What several ``fairsets geo`` commands declare alike: the help of ``--method`` and ``--option``, and
``--min-confidence`` — its declaration (each command gives its own help text) and its check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from fairsets._cli_util import die

_METHOD_HELP = "Method: string, ner, offline, llm or hybrid (see 'fairsets geo methods')."
_OPTION_HELP = (
    "Method option KEY=VALUE (repeatable; VALUE is JSON or a string; dotted keys nest: "
    "-O llm.model=mixtral -O llm.base_url=http://127.0.0.1:8000/v1)."
)


def min_confidence_option(help_text: str) -> Any:
    """The ``--min-confidence`` option (a float, unset by default), with the command's ``help_text``."""
    return typer.Option("--min-confidence", help=help_text)


def check_min_confidence(value: float | None, taken: Callable[[], bool], refusal: str) -> None:
    """Exit with an error unless ``value`` is unset, or between 0 and 1 and ``taken()`` (a method of the
    command takes it); ``refusal`` says which methods give no confidence and what to do instead."""
    if value is None:
        return
    if not 0.0 <= value <= 1.0:
        die(f"--min-confidence must be between 0 and 1, not {value}")
    if not taken():
        die(f"--min-confidence: {refusal}")
