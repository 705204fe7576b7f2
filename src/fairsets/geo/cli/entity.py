"""``fairsets geo`` commands: entity-train, entity-filter (GeoProfiler's entity-presence filter)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die

_MODEL_HELP = "Image encoder: an open_clip name (ViT-B-32, hf-hub:ORG/NAME) or hf:HUB_ID / hf:LOCAL_DIR."
_PRETRAINED_HELP = (
    "Weights: an open_clip tag (openai, laion2b_s34b_b79k, ...) or a local weights file; "
    "'none' = random weights (tests, dry runs)."
)


def _quiet_logging(quiet: bool) -> None:
    from fairsets import _cli_util

    if quiet and not _cli_util.VERBOSE:  # warnings (e.g. rejected rows) still show; -v wins
        logging.getLogger("fairsets").setLevel(logging.WARNING)


def _load_vlm(model: str, pretrained: str | None, device: str) -> Any:
    from fairsets.core.step import MissingDependency
    from fairsets.models import ModelUnavailable, load_vlm

    try:
        return load_vlm(model, pretrained, device=device)
    except (ModelUnavailable, MissingDependency, ValueError) as exc:
        die(exc)


def _ood_option(ood_countries: str | None) -> list[str] | None:
    from fairsets.geo.entity import PAPER_OOD_COUNTRIES

    if ood_countries is None:
        return None
    text = ood_countries.strip()
    if text.lower() == "paper":
        return list(PAPER_OOD_COUNTRIES)
    if text.lower() in ("", "none"):
        return []
    return [c.strip() for c in text.split(",") if c.strip()]


def _grid_option(c_grid: str | None) -> list[float] | None:
    if c_grid is None:
        return None
    try:
        return [float(c) for c in c_grid.split(",") if c.strip()]
    except ValueError:
        die(f"--c-grid must be comma-separated numbers, got {c_grid!r}")


def _fmt(m: dict[str, Any] | None, key: str) -> str:
    return "-" if m is None else f"{m[key]:.3f}"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``fairsets geo`` app."""

    @app.command("entity-train")
    def entity_train_cmd(
        annotations: Annotated[
            Path, typer.Argument(help="Annotation CSV: image, present[, country, entity] (see docs).")
        ],
        model: Annotated[str, typer.Option("--model", "-m", help=_MODEL_HELP)],
        out: Annotated[Path, typer.Option("--out", "-o", help="The classifier file to write (.npz).")],
        entity: Annotated[
            str | None, typer.Option(help="The entity (default: the CSV's single 'entity' value).")
        ] = None,
        pretrained: Annotated[str | None, typer.Option(help=_PRETRAINED_HELP)] = None,
        ood_countries: Annotated[
            str | None,
            typer.Option(
                "--ood-countries",
                help="Held-out (OOD test) countries: ISO3 codes or names, comma-separated; "
                "'paper' = CHN,CHL,NZL,PHL,ESP; 'none' = no OOD test. Default: a seeded choice "
                "holding 15-20% of the rows.",
            ),
        ] = None,
        n_ood_countries: Annotated[
            int | None,
            typer.Option("--n-ood-countries", min=1, help="Hold out this many countries (a seeded choice)."),
        ] = None,
        id_test_size: Annotated[
            int, typer.Option("--id-test-size", min=0, help="Rows in the ID test set (the paper: 100).")
        ] = 100,
        seed: Annotated[int, typer.Option(help="Seed of the split and the cross-validation.")] = 0,
        c_grid: Annotated[
            str | None,
            typer.Option("--c-grid", help="SVM C values to cross-validate (default 0.001,0.01,0.1,1,10)."),
        ] = None,
        report: Annotated[
            Path | None, typer.Option("--report", help="Write the training report (JSON) here.")
        ] = None,
        device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
        batch_size: Annotated[int, typer.Option(help="Images per forward pass.", min=1)] = 32,
        cache_dir: Annotated[
            Path | None, typer.Option(help="Embedding cache folder (reused by entity-filter).")
        ] = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or table.")] = False,
    ) -> None:
        """Train an entity-presence classifier (linear SVM on image embeddings); report ID/OOD F1."""
        from fairsets.core.atomic import atomic_write_text
        from fairsets.core.console import DataTable, show
        from fairsets.core.progress import Progress
        from fairsets.core.step import MissingDependency
        from fairsets.geo.entity import (
            DEFAULT_C_GRID,
            embed_annotations,
            embedding_cache,
            fit_entity_classifier,
            load_annotations,
        )

        _quiet_logging(quiet)
        ood = _ood_option(ood_countries)
        if ood is not None and n_ood_countries is not None:
            die("give --ood-countries or --n-ood-countries, not both")
        grid = _grid_option(c_grid) or list(DEFAULT_C_GRID)
        try:
            ann = load_annotations(annotations, entity=entity)
        except (OSError, ValueError) as exc:
            die(exc)
        if not (entity or ann.entity):
            die("name the entity with --entity (the CSV has no entity column)")
        vlm = _load_vlm(model, pretrained, device)
        try:
            cache = embedding_cache(cache_dir, vlm) if cache_dir is not None else None
            data = embed_annotations(
                ann, vlm, batch_size=batch_size, cache=cache, progress=Progress(False if quiet else None)
            )
            result = fit_entity_classifier(
                data, entity=entity, ood_countries=ood, n_ood_countries=n_ood_countries,
                id_test_size=id_test_size, seed=seed, C_grid=grid,
            )  # fmt: skip
            result.classifier.save(out)
            if report is not None:
                atomic_write_text(report, json.dumps(result.report, indent=2, sort_keys=True) + "\n")
        except (OSError, ValueError, MissingDependency) as exc:
            die(exc)
        rep = result.report
        if data.rejected:
            first = data.rejected[0]
            typer.echo(
                f"{len(data.rejected)} annotated row(s) rejected "
                f"(first: line {first['line']}: {first['reason']}; see --report)",
                err=True,
            )
        if quiet:
            return
        split = rep["split"]
        held = ",".join(c["iso3"] for c in split["ood_countries"]) or "none"
        table = DataTable(title=f"{rep['entity']}: linear SVM (C={rep['model']['C']:g}) on {vlm.model_id}")
        for col in ("set", "rows", "present", "F1", "precision", "recall"):
            table.add_column(col, justify="left" if col == "set" else "right")
        table.add_row("train", str(split["train"]["n"]), str(split["train"]["present"]), "", "", "")
        for key, label in (("id", "ID test"), ("ood", f"OOD test ({held})")):
            m = rep["metrics"][key]
            counts = split[f"{key}_test"]
            cells = [_fmt(m, "f1"), _fmt(m, "precision"), _fmt(m, "recall")]
            table.add_row(label, str(counts["n"]), str(counts["present"]), *cells)
        show(table)
        if split["ood_missing"]:
            typer.echo(f"held-out countries without rows: {', '.join(split['ood_missing'])}")
        typer.echo(f"wrote {out}" + (f" and {report}" if report is not None else ""))

    @app.command("entity-filter")
    def entity_filter_cmd(
        data: Annotated[
            Path,
            typer.Argument(help="Parquet or CSV with an 'image' (bytes or path) or 'image_path' column."),
        ],
        classifier: Annotated[
            Path, typer.Option("--classifier", "-c", help="A classifier from 'fairsets geo entity-train'.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output Parquet.")],
        model: Annotated[
            str | None,
            typer.Option("--model", "-m", help="Encoder (default: the classifier's); " + _MODEL_HELP),
        ] = None,
        pretrained: Annotated[
            str | None, typer.Option(help="Weights (default: the classifier's). " + _PRETRAINED_HELP)
        ] = None,
        drop: Annotated[
            bool, typer.Option("--drop", help="Write only rows with the entity; the others go to --rejects.")
        ] = False,
        rejects: Annotated[
            Path | None, typer.Option(help="Rejected rows with --drop (default OUT.rejects.parquet).")
        ] = None,
        threshold: Annotated[
            float | None, typer.Option(help="Threshold on the SVM score (default: the classifier's).")
        ] = None,
        image_column: Annotated[
            str | None, typer.Option(help="Image column (default 'image', else 'image_path').")
        ] = None,
        allow_other_encoder: Annotated[
            bool,
            typer.Option(
                "--allow-other-encoder",
                help="Accept an encoder other than the classifier's (same dimension).",
            ),
        ] = False,
        device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
        batch_size: Annotated[int, typer.Option(help="Images per forward pass.", min=1)] = 32,
        cache_dir: Annotated[Path | None, typer.Option(help="Embedding cache folder.")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
    ) -> None:
        """Mark (or --drop) rows whose image does not show the entity; unreadable images keep a reason."""
        from fairsets.core.progress import Progress
        from fairsets.core.step import MissingDependency
        from fairsets.geo.entity import EntityPresenceClassifier, embedding_cache, filter_dataset

        _quiet_logging(quiet)
        if rejects is not None and not drop:
            die("--rejects is only used with --drop")
        if not Path(data).is_file():  # before the encoder loads
            die(f"{data}: no such file (give a .parquet or .csv file)")
        if Path(data).suffix.lower() not in (".parquet", ".csv"):
            die(f"{data}: expected a .parquet or .csv file")
        try:
            clf = EntityPresenceClassifier.load(classifier)
        except (OSError, ValueError) as exc:
            die(exc)
        enc = clf.encoder
        if model is None:
            if not enc.get("spec"):
                die(f"{classifier} does not name its encoder; pass --model and --pretrained")
            model = str(enc["spec"])
            if pretrained is None:
                pretrained = str(enc.get("pretrained") or "")
        vlm = _load_vlm(model, pretrained, device)
        try:
            cache = embedding_cache(cache_dir, vlm) if cache_dir is not None else None
            res = filter_dataset(
                data, clf, vlm, out, drop=drop, rejects=rejects, threshold=threshold,
                image_column=image_column, batch_size=batch_size, cache=cache,
                allow_other_encoder=allow_other_encoder,
                progress=Progress(False if quiet else None),
            )  # fmt: skip
        except (OSError, ValueError, MissingDependency) as exc:
            die(exc)
        if res.errors:
            typer.echo(f"{res.errors} row(s) with an unreadable image (entity_error says why)", err=True)
        if quiet:
            return
        typer.echo(
            f"{res.rows} row(s): {res.present} with {clf.entity!r}, {res.absent} without, "
            f"{res.errors} unreadable (threshold {res.threshold:g}, {res.model_id})"
        )
        typer.echo(f"wrote {res.out}" + (f" and {res.rejects}" if res.rejects else ""))
