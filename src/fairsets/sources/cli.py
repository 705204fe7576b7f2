"""``fairsets fetch``: fetch candidate listings from web sources (Wikidata).

:mod:`fairsets.cli` adds :data:`fetch_app` as the ``fetch`` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die, setup_logging

fetch_app = typer.Typer(help="Fetch candidate listings from web sources.", no_args_is_help=True)


@fetch_app.command("wikidata")
def fetch_wikidata_cmd(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output Parquet (one row per person, image, state, association)."),
    ],
    endpoint: Annotated[str, typer.Option(help="SPARQL endpoint.")] = "https://query.wikidata.org/sparql",
    state: Annotated[
        list[str] | None, typer.Option("--state", help="State/UT QID or name; repeat. Default: all of them.")
    ] = None,
    gender: Annotated[
        list[str] | None, typer.Option("--gender", help="male or female; repeat. Default: both.")
    ] = None,
    states_file: Annotated[
        Path | None,
        typer.Option(help="CSV of units (qid,name,kind,aliases); default builders/india_states.csv."),
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Cache of raw answers (default OUT's folder/.wikidata-cache).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    page_size: Annotated[
        int, typer.Option(help="Rows per query page (the public service stops queries at 60 s).")
    ] = 5000,
    contact: Annotated[
        str | None, typer.Option(help="Contact for the User-Agent (default $FAIRSETS_CONTACT).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """People with images per state and gender from Wikidata (IndicFairFace appendix 7).

    Each person is also assigned to one state (birth > residence > work > education > constituency):
    the rows of that state have primary = true.
    """
    from fairsets.core.step import MissingDependency
    from fairsets.fetch.retry import HttpStatusError
    from fairsets.sources.wikidata import fetch_wikidata_cli

    setup_logging(False, quiet)
    for g in gender or []:
        if g not in ("male", "female"):
            die(f"--gender must be male or female, not {g!r}")
    try:
        res = fetch_wikidata_cli(
            out,
            endpoint=endpoint,
            states=state or None,
            genders=gender or None,
            cache_dir=cache_dir,
            states_file=states_file,
            no_cache=no_cache,
            page_size=page_size,
            contact=contact,
        )
    except (ValueError, OSError, HttpStatusError, MissingDependency) as exc:
        die(exc)
    if not quiet:
        from fairsets.core.console import DataTable, say, show

        t = DataTable(title=f"{res['people']} people → {out}")  # paths and names are data: never markup
        t.add_column("state")
        for g in res["genders"]:
            t.add_column(g, justify="right")
        for info in res["per_state"].values():
            t.add_row(info["name"], *(str(info["people"].get(g, 0)) for g in res["genders"]))
        show(t)
        say(f"{res['rows']} rows, {res['requests']} requests, {res['cache_hits']} answers from the cache")
