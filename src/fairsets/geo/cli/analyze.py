"""``fairsets geo`` commands: analyze (the paper's distribution, GR and diversity analyses) and reference."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die

_GEO_REQUIRES = (("pandas", "geo"), ("scipy", "geo"), ("powerlaw", "geo"), ("matplotlib", "geo"))


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "–"


def _rho(c: Any) -> str:
    return f"{c['spearman']['rho']:.2f}" if isinstance(c, dict) and c.get("status") == "ok" else "–"


def _summary(doc: dict[str, Any], console: Any = None) -> None:
    """Two narrow rich tables (distribution; representation, correlations and diversity), one row
    per entity and one for all rows, then the definitions behind the numbers.

    Headers are short and never wrap or truncate (``no_wrap``); long group names fold instead, so
    an 80-column terminal shows every header in full.
    """
    from fairsets.core.console import DataTable, say, show
    from fairsets.geo.report.context import gof_readings

    settings = doc["settings"]
    top_k = settings["top_k"]
    plausible_p = settings.get("plausible_p", 0.1)
    groups = [*doc["entities"].items(), ("overall", doc["overall"])]

    def table(title: str, headers: list[str]) -> Any:
        t = DataTable(title=title, title_justify="left")  # group names are data: never markup
        for h in headers:
            left = h == "group"
            t.add_column(
                h,
                justify="left" if left else "right",
                no_wrap=not left,
                overflow="fold",
                min_width=None if left else len(h),
                max_width=24 if left else None,
            )
        return t

    dist = table(
        f"{doc['input']['n_rows']} rows ({doc['input']['n_excluded_entity_absent']} excluded)",
        ["group", "rows", "undersp %", f"top-{top_k} %", "countries", "α", "GOF p", "PL"],
    )
    for name, g in groups:
        pl = g["power_law"]
        gof = pl.get("gof") or {}
        p = gof.get("p")
        follows, plausible = gof_readings(gof, plausible_p) if pl["status"] == "ok" else (None, None)
        verdict = (
            "–"
            if follows is None and plausible is None
            else "/".join(
                [
                    {True: "F", False: "-", None: "?"}[follows],
                    {True: "P", False: "-", None: "?"}[plausible],
                ]
            )
        )
        dist.add_row(
            name,
            str(g["n_rows"]),
            _pct(g["shares"]["underspecified"]),
            _pct(g["shares"]["top"]),
            str(g["n_countries"]),
            f"{pl['alpha']:.2f}" if pl["status"] == "ok" else "–",
            f"{p:.2f}" if isinstance(p, float) else "–",
            verdict,
        )
    show(dist, console=console)

    mods = [m for m in ("text", "image") if doc["diversity"].get(m)]
    rep_table = table(
        "representation, correlations, diversity",
        ["group", "under %", "over %", "ρ GDP", "ρ pop", *(f"div {m}" for m in mods)],
    )
    for name, g in groups:
        rep, corr = g["representation"], g["correlations"]
        cells = [
            name,
            _pct(rep.get("under_share")),
            _pct(rep.get("over_share")),
            _rho(corr.get("gdp")),
            _rho(corr.get("population")),
        ]
        for m in mods:
            d = doc["diversity"][m]["groups"].get(name if doc["entities"] else "overall")
            cells.append(f"{d['mean']:.3f}" if d and d["mean"] is not None else "–")
        rep_table.add_row(*cells)
    show(rep_table, console=console)
    over = settings.get("correlate_over", "reference")
    say(
        f"PL: F = follows (paper, GOF p < 0.05), P = plausible (CSN, p ≥ {plausible_p:g}). "
        f"ρ: Spearman over {'countries with rows' if over == 'present' else 'every reference country'} "
        f"(--correlate-over). Diversity: {doc['diversity'].get('rule', '–')}. "
        "Every definition: analysis.json 'definitions'.",
        wrap=True,
        console=console,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``fairsets geo`` app."""

    @app.command("analyze")
    def analyze_cmd(
        profiled: Annotated[
            Path,
            typer.Argument(
                help="Geo-profiled rows (Parquet/CSV/JSONL or a folder of them): country, caption, ..."
            ),
        ],
        out: Annotated[
            Path, typer.Option("--out", "-o", help="Folder for analysis.json, report.html, CSVs.")
        ],
        entity_column: Annotated[
            str | None, typer.Option(help="Entity column (default: 'entity' if present, else one group).")
        ] = None,
        reference: Annotated[
            Path | None,
            typer.Option(
                help="Country statistics CSV (iso3|country, gdp, population), e.g. from 'fairsets geo "
                "reference'; default: GeoNames population, no GDP."
            ),
        ] = None,
        gr_reference: Annotated[
            str,
            typer.Option(
                help="GR reference distribution: uniform (independent countries), uniform-all, population, "
                "or a CSV (iso3|country, weight, optional entity)."
            ),
        ] = "uniform",
        r: Annotated[
            float, typer.Option("--r", help="GR threshold: over if GR > r, under if GR < 1/r.", min=1.0)
        ] = 3.0,
        correlate_over: Annotated[
            str,
            typer.Option(
                help="Headline correlation set: present (countries with rows, as the paper's Figure 4) "
                "or reference (every reference country, 0 rows where absent); the other is reported too."
            ),
        ] = "present",
        diversity_threshold: Annotated[
            int, typer.Option(help="Diversity: the sample threshold T per (entity, country).", min=1)
        ] = 100,
        diversity_rule: Annotated[
            str,
            typer.Option(
                help="Diversity: paper scores countries with n > T (the paper's 'more than 100'), "
                "inclusive those with n >= T."
            ),
        ] = "paper",
        min_samples: Annotated[
            int | None,
            typer.Option(
                help="Same as --diversity-threshold N --diversity-rule inclusive.", min=1, hidden=True
            ),
        ] = None,
        top_k: Annotated[int, typer.Option(help="Countries in the 'top' share (Table 1).", min=1)] = 10,
        text_encoder: Annotated[
            str,
            typer.Option(
                help="Caption diversity: minilm (all-MiniLM-L6-v2), a sentence-transformers folder "
                "or hub id, or none."
            ),
        ] = "none",
        image_model: Annotated[
            str | None, typer.Option(help="Image diversity: a fairsets VLM spec (ViT-B-32, hf:..., ...).")
        ] = None,
        pretrained: Annotated[
            str | None,
            typer.Option(help="Weights of --image-model: a tag, a local file, or 'none' (random)."),
        ] = None,
        bootstrap: Annotated[
            int | None,
            typer.Option(help="Synthetic sets for the power-law GOF p-value (0: none; default 250).", min=0),
        ] = None,
        alternatives: Annotated[
            str,
            typer.Option(
                help="Distributions the power law is compared with, comma-separated, or 'none' "
                "(lognormal, exponential, truncated_power_law, stretched_exponential)."
            ),
        ] = "lognormal,exponential,truncated_power_law,stretched_exponential",
        seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
        workers: Annotated[
            int,
            typer.Option(help="Processes refitting the bootstrap sets (results do not depend on it).", min=1),
        ] = 1,
        device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps (encoders).")] = "cpu",
        batch_size: Annotated[int, typer.Option(help="Samples per encoder forward pass.", min=1)] = 32,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
    ) -> None:
        """Shares, power law, GDP/population correlations, GR and diversity (GeoProfiler §4.1–4.3)."""
        from fairsets.core.step import MissingDependency, check_requires
        from fairsets.models import ModelUnavailable

        try:
            check_requires("fairsets geo analyze", _GEO_REQUIRES)
        except MissingDependency as exc:
            die(exc)
        from fairsets.core.progress import Progress
        from fairsets.geo.analyze import ANALYSIS_FILE, DEFAULT_BOOTSTRAP, REPORT_FILE, run_analysis
        from fairsets.geo.diversity import ImageEncoder, TextEncoder

        alts = [a.strip() for a in alternatives.split(",") if a.strip() and a.strip().lower() != "none"]
        if pretrained is not None and image_model is None:
            die("--pretrained needs --image-model")
        from fairsets.geo.analyze import _input_files

        try:  # the input exists and has a known format before any encoder loads
            _input_files(Path(profiled))
        except (FileNotFoundError, ValueError) as exc:
            die(exc)
        from fairsets.geo.analyze import CORRELATE_OVER, DIVERSITY_RULES

        if correlate_over.strip().lower() not in CORRELATE_OVER:
            die(f"--correlate-over {correlate_over!r} is not known: use {' or '.join(CORRELATE_OVER)}")
        if diversity_rule.strip().lower() not in DIVERSITY_RULES:
            die(f"--diversity-rule {diversity_rule!r} is not known: use {' or '.join(DIVERSITY_RULES)}")
        text = None
        image = None
        try:
            if text_encoder.strip().lower() != "none":
                text = TextEncoder(text_encoder, device=device, batch_size=batch_size)
            if image_model is not None:
                from fairsets.models import load_vlm

                image = ImageEncoder(load_vlm(image_model, pretrained, device=device), batch_size=batch_size)
        except (ModelUnavailable, MissingDependency, ValueError) as exc:
            die(exc)
        try:
            doc = run_analysis(
                profiled,
                out,
                entity_column=entity_column,
                reference=reference,
                gr_reference=gr_reference,
                r=r,
                min_samples=min_samples,
                diversity_threshold=diversity_threshold,
                diversity_rule=diversity_rule.strip().lower(),
                correlate_over=correlate_over.strip().lower(),
                top_k=top_k,
                text_encoder=text,
                image_encoder=image,
                bootstrap=DEFAULT_BOOTSTRAP if bootstrap is None else bootstrap,
                seed=seed,
                alternatives=alts,
                workers=workers,
                progress=Progress(False if quiet else None),
            )
        except (FileNotFoundError, ValueError, OSError) as exc:
            die(exc)
        if quiet:
            return
        _summary(doc)
        for m in ("text", "image"):
            d = doc["diversity"].get(m)
            if d and d["n_skipped"]:
                typer.echo(
                    f"{d['n_skipped']} {m} sample(s) skipped (see analysis.json diversity.{m}.skipped)"
                )
        typer.echo(f"wrote {out / ANALYSIS_FILE} and {out / REPORT_FILE}")

    @app.command("reference")
    def reference_cmd(
        year: Annotated[int, typer.Option("--year", help="Data year (e.g. 2022).", min=1960, max=2100)],
        out: Annotated[
            Path, typer.Option("--out", "-o", help="CSV to write (iso3, name, year, gdp, population).")
        ],
        cache_dir: Annotated[
            Path | None,
            typer.Option(
                help="Cache of API answers (default $FAIRSETS_CACHE_DIR/worldbank, else "
                "~/.cache/fairsets/worldbank)."
            ),
        ] = None,
        indicator: Annotated[
            list[str] | None,
            typer.Option(
                "--indicator", help="World Bank indicators; repeat (default NY.GDP.MKTP.CD SP.POP.TOTL)."
            ),
        ] = None,
        base_url: Annotated[
            str, typer.Option(help="World Bank API v2 root (a mirror).")
        ] = "https://api.worldbank.org/v2",
        no_cache: Annotated[
            bool, typer.Option("--no-cache", help="Neither read nor write the cache.")
        ] = False,
    ) -> None:
        """Download GDP and population per country from the World Bank API (CC BY 4.0) into a CSV."""
        from fairsets.core.step import MissingDependency, check_requires
        from fairsets.fetch.retry import HttpStatusError

        try:
            check_requires("fairsets geo reference", (("pandas", "geo"),))
        except MissingDependency as exc:
            die(exc)
        from fairsets.geo.reference import WORLD_BANK_INDICATORS, fetch_worldbank, write_reference

        try:
            table = fetch_worldbank(
                year,
                tuple(indicator) if indicator else WORLD_BANK_INDICATORS,
                cache_dir=cache_dir,
                cache=not no_cache,
                base_url=base_url,
            )
            path = write_reference(table, out)
        except (ValueError, OSError, HttpStatusError) as exc:
            die(exc)
        n_gdp = int(table["gdp"].notna().sum()) if "gdp" in table else 0
        n_pop = int(table["population"].notna().sum()) if "population" in table else 0
        typer.echo(
            f"{len(table)} countries ({n_gdp} with GDP, {n_pop} with population), "
            f"{table.attrs['requests']} request(s), {table.attrs['cache_hits']} page(s) from the cache "
            f"→ {path}"
        )
        typer.echo(f"source: {table.attrs['source']}; licence: {table.attrs['license']}")
