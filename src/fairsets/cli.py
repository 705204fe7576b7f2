"""The ``fairsets`` command line (typer).

This module holds the root app (:class:`FairsetsApp`: the entry point's error handling), its
callback (``--version``, ``-v``, ``--debug``) and :func:`main`, and assembles the commands each
package owns:

* :mod:`fairsets.pipeline.cli` — ``build``, ``validate``, ``steps``, ``review`` and ``example``
  (the shipped recipes, written out by :mod:`fairsets.pipeline.recipes`);
* :mod:`fairsets._cli_publish` — ``publish``, which serves built datasets and annotation folders
  alike, so it is assembled here rather than in either package;
* :mod:`fairsets.sources.cli` — ``fetch``;
* :mod:`fairsets.fetch.cli` — ``download``;
* :mod:`fairsets.audit.cli` — ``audit``, ``card`` and ``debias`` (fitting a debias transform embeds
  a dataset, so its commands stand with the audits, above :mod:`fairsets.debias`);
* :mod:`fairsets.annotate.cli` — ``annotate``;
* :mod:`fairsets.geo.cli` — ``geo``.

The order of registration is the order of ``fairsets --help``.

Help is click's plain layout (``rich_markup_mode=None``, set here for every command): it wraps
to the terminal, or to 80 columns when piped, and never cuts an option name, a help text or a
default short with ``…`` as the boxed Rich layout does at 80 columns; a flag shows no ``<bool>``
value; and a help text is printed as written (Rich read ``[kind]`` or ``fairsets[geo]`` as
markup and dropped it).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from . import _cli_util
from ._cli_publish import publish_cmd
from ._cli_util import die, report_unexpected, report_usage
from .annotate.cli import annotate_app
from .audit.cli import audit_app, card_app, debias_app
from .audit.persons.cli import audit_persons_cmd, audit_transfer_cmd
from .fetch.cli import download_cmd
from .geo.cli import geo_app
from .pipeline.cli import build_cmd, example_cmd, remove_cmd, review_app, steps_cmd, validate_cmd
from .sources.cli import fetch_app


class FairsetsApp(typer.Typer):
    """The app, with the entry point's catch-all: an exception no command handled is one line on
    stderr and exit 2 (``--debug`` adds the traceback); ``typer.Exit``/``SystemExit`` keep their
    codes and Ctrl-C exits 130."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import signal

        from . import _startup_sigint

        if signal.getsignal(signal.SIGINT) is _startup_sigint:  # started: Ctrl-C is KeyboardInterrupt again
            signal.signal(signal.SIGINT, signal.default_int_handler)
        no_args, usage, abort = _click_exceptions()
        if kwargs.get("standalone_mode", True) is False:  # the caller handles click's exceptions
            return super().__call__(*args, **kwargs)
        kwargs["standalone_mode"] = False  # so a usage error reaches us, not typer's boxed panel
        argv = kwargs.get("args", args[0] if args else None)
        try:
            _refuse_blank_values(list(sys.argv[1:] if argv is None else argv))
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        try:
            rv = super().__call__(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt):
            raise
        except no_args as exc:  # `fairsets audit`: its help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except usage as exc:  # a wrong/missing option or argument: one line + where to look
            report_usage(exc)
        except abort:
            console.print("Aborted!", highlight=False)
            sys.exit(1)
        except Exception as exc:  # the one place that turns any error into one line
            report_unexpected(exc)
        # standalone_mode=False returns the exit code of a typer.Exit, else the command's value
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


class FairsetsGroup(TyperGroup):
    """A command group whose help lists each command with its whole first sentence, wrapped, where
    click would cut it to the width left on the line (``Build a dataset from RECIPE into…``)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _refuse_blank_values(argv: list[str]) -> None:
    """An empty or blank value (``--out ""``) is one line, exit 2: click would read it as the
    current folder for a path option, and no fairsets option or argument means anything blank."""
    for i, tok in enumerate(argv):
        if tok.strip():
            if tok.startswith("--") and "=" in tok and not tok.split("=", 1)[1].strip():
                name = tok.split("=", 1)[0]
                die(f"{name} is empty: give it a value (see: fairsets COMMAND --help)")
            continue
        prev = argv[i - 1] if i else ""
        what = prev if prev.startswith("-") and "=" not in prev else "an argument"
        die(f"{what} is empty: give it a value (see: fairsets COMMAND --help)")


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], ...]:
    """(no-args-is-help, usage/click errors, abort) of click and of the copy typer vendors."""
    import contextlib
    import importlib

    mods: list[Any] = []
    # typer >= 0.24 ships its own click (and no longer installs click); an older typer uses click
    for name in ("typer._click", "click"):
        with contextlib.suppress(ImportError):
            mods.append(importlib.import_module(name))

    def found(name: str) -> tuple[type[BaseException], ...]:
        kinds = (getattr(m.exceptions, name, None) or getattr(m, name, None) for m in mods)
        return tuple({k for k in kinds if isinstance(k, type)})

    return found("NoArgsIsHelpError"), found("ClickException"), (*found("Abort"), typer.Abort)


def main() -> None:
    """``fairsets`` (the console script and ``python -m fairsets``)."""
    app()


app = FairsetsApp(
    name="fairsets",
    help="Build, annotate, audit and publish image(-text) datasets for fairness research.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # every command's help: click's plain layout (module docstring)
    cls=FairsetsGroup,
)
console = Console(stderr=True)


def _show_version(value: bool) -> None:
    if value:
        from .core.version import __version__

        print(f"fairsets {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_show_version, is_eager=True),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Debug logging (before the command: fairsets -v build …).")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an error (also FAIRSETS_DEBUG=1).")
    ] = False,
) -> None:
    """fairsets: balanced, documented datasets for fairness research."""
    _cli_util.DEBUG = debug
    _cli_util.VERBOSE = verbose
    if verbose:
        _cli_util.setup_logging(True, False)


app.command("build")(build_cmd)
app.command("validate")(validate_cmd)
app.command("steps")(steps_cmd)
app.command("example")(example_cmd)
app.command("remove")(remove_cmd)
app.add_typer(fetch_app, name="fetch", cls=FairsetsGroup)
app.command("download")(download_cmd)
app.add_typer(review_app, name="review", cls=FairsetsGroup)
app.command("publish")(publish_cmd)
audit_app.command("persons")(audit_persons_cmd)
audit_app.command("transfer")(audit_transfer_cmd)
app.add_typer(audit_app, name="audit", cls=FairsetsGroup)
app.add_typer(debias_app, name="debias", cls=FairsetsGroup)
app.add_typer(card_app, name="card", cls=FairsetsGroup)
app.add_typer(annotate_app, name="annotate", cls=FairsetsGroup)
app.add_typer(geo_app, name="geo", cls=FairsetsGroup)


if __name__ == "__main__":  # pragma: no cover - after every command is registered
    main()
