"""Recipe schema (TOML, validated by pydantic) and loading.

A recipe names a source, the per-sample steps with their parameters, the group attributes that
define a cell, the quota per cell, the variants to publish, the split, the seed and the executor.
Unknown keys are rejected with the key named; step parameters are validated by each step's own
``Params`` model when the recipe is resolved (:func:`resolve_steps`).

Example::

    name = "example"
    seed = 7
    groups = ["state", "gender"]
    quota = 4
    variants = ["imbalanced", "balanced", "augmented"]

    [source]
    type = "local"
    path = "candidates.csv"

    [[steps]]
    name = "decode"
    max_pixels = 40_000_000

    [[steps]]
    name = "detect_face"
    detector = "res10"
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fairsets.core.errors import SaysTheFix
from fairsets.publish.rai_text import RaiText

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "DedupConfig",
    "DownloadConfig",
    "ExecutorConfig",
    "PublishConfig",
    "Recipe",
    "RecipeError",
    "SourceConfig",
    "SplitConfig",
    "StepConfig",
    "config_hash",
    "load_recipe",
    "parse_recipe",
    "resolve_steps",
]

VARIANTS = ("imbalanced", "balanced", "augmented")

#: A recipe larger than this is not a recipe (a data file given by mistake).
MAX_RECIPE_BYTES = 1_000_000

#: The largest quota per cell: beyond it the augmentations that fill a cell of a few real images
#: would run for days (a quota of 10**20 never finishes planning); a larger one is a typo.
MAX_QUOTA = 1_000_000


class RecipeError(SaysTheFix, ValueError):
    """A recipe is malformed; the message names the offending key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceConfig(BaseModel):
    """Where candidates come from. ``type`` picks a registered source; other keys are its params."""

    model_config = ConfigDict(extra="allow")
    type: str = "local"

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class StepConfig(BaseModel):
    """One per-sample step: ``name`` picks a registered step; other keys are its parameters."""

    model_config = ConfigDict(extra="allow")
    name: str

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class SplitConfig(_Strict):
    """Identity-disjoint split fractions within every cell."""

    train: float = 0.5
    test: float = 0.5

    @model_validator(mode="after")
    def _sum_to_one(self) -> SplitConfig:
        if abs(self.train + self.test - 1.0) > 1e-9 or min(self.train, self.test) < 0:
            raise ValueError("split.train + split.test must be 1 and both non-negative")
        return self


class ExecutorConfig(_Strict):
    type: Literal["local", "ray"] = "local"
    workers: int = Field(default=1, ge=0, description="processes (local) or CPUs (ray); 0 = inline")
    task_size: int = Field(default=32, ge=1, description="candidates per per-sample task")
    shard_size: int = Field(default=1000, ge=1, description="samples per WebDataset shard")
    ray_address: str | None = None


class DownloadConfig(_Strict):
    """URL downloads (sources whose candidates are URLs: wikidata, serpapi). See fairsets.fetch."""

    allow_loopback: bool = Field(default=False, description="allow URLs on 127.0.0.0/8 and ::1 (tests)")
    allow_private: bool = Field(default=False, description="allow private and link-local addresses")
    max_bytes: int = Field(default=20_000_000, ge=1, description="largest accepted download")
    max_pixels: int | None = Field(
        default=None,
        ge=1,
        description="largest accepted downloaded image in pixels, from its header before decoding "
        "(default: the decode step's max_pixels, else 40 000 000)",
    )
    timeout: float = Field(default=20.0, gt=0, description="seconds per socket operation (connect, one read)")
    deadline: float = Field(
        default=60.0, gt=0, description="wall-clock seconds for one download (redirects, headers, body)"
    )
    min_rate: float = Field(
        default=1024.0, ge=0, description="least average bytes/s of a download after rate_grace (0: off)"
    )
    rate_grace: float = Field(default=20.0, gt=0, description="seconds before min_rate applies")
    processes: int = Field(default=1, ge=0, description="img2dataset processes; 0 = in this process")
    threads: int = Field(default=16, ge=1, description="download threads per process")
    shard_size: int = Field(default=1000, ge=1, description="images per download shard")
    per_host_rate: float | None = Field(
        default=None,
        ge=0,
        description="requests started per second per host name, all processes together (0: no limit; "
        "default 5 for remote hosts; given here, it paces loopback names too)",
    )
    per_host_connections: int | None = Field(
        default=None,
        ge=0,
        description="requests open at once per host name (0: no limit; default 2, Wikimedia's robot "
        "policy, for remote hosts; given here, it paces loopback names too)",
    )
    retry_after_max: float = Field(
        default=60.0, ge=0, description="longest 429 Retry-After waited out; longer fails the host's rows"
    )


class DedupConfig(_Strict):
    enabled: bool = True
    hamming: int = Field(default=6, ge=0, le=64, description="near-duplicate pHash Hamming threshold")


class PublishConfig(_Strict):
    pretty_name: str | None = None
    description: str = ""
    jpeg_quality: int = Field(default=95, ge=50, le=100)
    task_categories: list[str] = ["image-classification", "zero-shot-image-classification"]
    notes: str = ""
    rai: RaiText | None = None
    """Person-written RAI and card facts (``[publish.rai]``; fairsets.publish.rai_text)."""


class Recipe(_Strict):
    """A dataset recipe."""

    name: str
    seed: int = 0
    groups: list[str] = Field(min_length=1)
    quota: int = Field(ge=1, le=MAX_QUOTA)
    variants: list[Literal["imbalanced", "balanced", "augmented"]] = ["imbalanced", "balanced", "augmented"]
    cells: dict[str, list[str]] = Field(
        default_factory=dict,
        description="expected values per group attribute; empty cells among them are reported",
    )
    identity_column: str = "identity"
    source: SourceConfig
    supplement: list[SourceConfig] = Field(
        default_factory=list,
        description="sources asked only for cells the sources before them left below quota",
    )
    steps: list[StepConfig] = Field(min_length=1)
    download: DownloadConfig = DownloadConfig()
    dedup: DedupConfig = DedupConfig()
    split: SplitConfig = SplitConfig()
    executor: ExecutorConfig = ExecutorConfig()
    publish: PublishConfig = PublishConfig()
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not v or any(c in v for c in "/\\ ."):
            raise ValueError("name must be non-empty without spaces, dots or slashes")
        return v

    @model_validator(mode="after")
    def _cells_match_groups(self) -> Recipe:
        unknown = sorted(set(self.cells) - set(self.groups))
        if unknown:
            raise ValueError(f"cells names attributes that are not in groups: {', '.join(unknown)}")
        if len(set(self.variants)) != len(self.variants):
            raise ValueError("variants lists a variant twice")
        return self

    def to_public_dict(self) -> dict[str, Any]:
        """The recipe as published in the manifest and card (JSON-friendly).

        Local paths are published relative to the recipe's folder, never as absolute paths of the
        curator's file system (see :func:`fairsets.sources.base.public_paths`).
        """
        from fairsets.sources.base import public_paths

        return public_paths(self.model_dump(mode="json", exclude={"base_dir"}), self.base_dir)


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(recipe)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc!r}")
        elif err["type"] == "missing":
            parts.append(f"missing key {loc!r}")
        else:
            parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_recipe(data: dict[str, Any], base_dir: Path | str = ".") -> Recipe:
    """Validate a recipe mapping; raise :class:`RecipeError` naming any bad key."""
    try:
        recipe = Recipe(**data)
    except ValidationError as exc:
        raise RecipeError(_format_errors(exc)) from None
    recipe.base_dir = Path(base_dir)
    return recipe


def load_recipe(path: str | Path, overrides: dict[str, Any] | None = None) -> Recipe:
    """Load and validate a TOML recipe. ``overrides`` (dotted keys) apply CLI flags on top."""
    path = Path(path)
    if path.is_dir():
        raise RecipeError(f"{path}: a folder, not a recipe; give the recipe's .toml file (see builders/)")
    if not path.exists():
        raise RecipeError(f"recipe not found: {path}; check the path (see builders/ for examples)")
    if not path.is_file():
        raise RecipeError(f"{path}: not a regular file; give the recipe's .toml file (see builders/)")
    if path.stat().st_size > MAX_RECIPE_BYTES:
        raise RecipeError(
            f"{path}: {path.stat().st_size} bytes, too large for a recipe (at most {MAX_RECIPE_BYTES}); "
            "give the recipe's .toml file"
        )
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is dropped, not a syntax error
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}; fix the recipe's syntax") from None
    except UnicodeDecodeError as exc:
        raise RecipeError(
            f"{path}: not UTF-8 text (byte {exc.start}); a recipe is a UTF-8 TOML file, save it as UTF-8"
        ) from None
    except OSError as exc:
        why = exc.strerror or exc
        raise RecipeError(f"{path}: cannot read the recipe ({why}); check its permissions") from None
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    recipe = parse_recipe(data, base_dir=path.resolve().parent)
    resolve_steps(recipe)  # validate step names and parameters now, not mid-build
    return recipe


def resolve_steps(recipe: Recipe) -> list[Any]:
    """Instantiate the recipe's steps (importing the step modules so they register)."""
    from fairsets.core.registry import STEPS
    from fairsets.core.step import build_step

    _import_components()
    steps = []
    for i, cfg in enumerate(recipe.steps):
        if cfg.name not in STEPS:
            raise RecipeError(f"steps[{i}]: unknown step {cfg.name!r} (known: {', '.join(STEPS.names())})")
        try:
            steps.append(build_step(cfg.name, cfg.params()))
        except ValueError as exc:
            raise RecipeError(f"steps[{i}]: {exc}") from None
    return steps


def _import_components() -> None:
    """Import the modules whose import registers steps and sources."""
    from fairsets import sources as _sources  # noqa: F401
    from fairsets import vision as _vision  # noqa: F401
    from fairsets.publish import license_step as _license_step  # noqa: F401


def config_hash(obj: Any) -> str:
    """Stable short hash of a JSON-able object (used for content-addressed task ids)."""
    blob = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
