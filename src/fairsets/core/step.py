"""The Step contract.

A step transforms a stream of samples: ``run(samples, ctx) -> Iterator[Sample]``. Most steps work
one sample at a time and only need :meth:`Step.process`; the default :meth:`Step.run` calls it for
samples that are still ``ok`` and passes the others through untouched (so a rejected sample is
never lost: it reaches the task runner, which writes it to the rejects table).

Parameters are declared as a pydantic model (``Params``) with ``extra="forbid"``, so a recipe that
misspells a parameter fails at load time with the key named. Optional heavy dependencies are
declared in ``requires`` and checked at construction with the exact ``pip install`` hint.

Exceptions raised by :meth:`process` are bugs: they fail the task loudly (it can be resumed after
the fix). Bad *input* is handled inside the step with :meth:`Sample.reject` (deterministic, e.g.
"no face") or :meth:`Sample.fail` (transient/environmental, retried by ``--retry-failed``).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from fairsets.core.data import Sample

from .errors import SaysTheFix

__all__ = ["MissingDependency", "Step", "StepContext", "StepParams", "build_step", "check_requires"]

log = logging.getLogger(__name__)


class MissingDependency(SaysTheFix, ImportError):
    """An optional dependency of a component is not installed."""


class StepParams(BaseModel):
    """Base class for step parameters: unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class StepContext:
    """What a step may know about the run it is part of."""

    seed: int = 0
    task_id: str = ""
    workdir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def check_requires(owner: str, requires: tuple[tuple[str, str], ...]) -> None:
    """Raise :class:`MissingDependency` if any ``(module, extra)`` in ``requires`` is missing."""
    for module, extra in requires:
        if importlib.util.find_spec(module) is None:
            raise MissingDependency(
                f"{owner} needs the Python module {module!r}: pip install 'fairsets[{extra}]'"
            )


class Step:
    """Base class of every per-sample step.

    Subclasses set ``Params`` (a :class:`StepParams` subclass), optionally ``requires``, and
    implement :meth:`process` (or :meth:`run` for steps that need the whole stream).
    """

    Params: ClassVar[type[StepParams]] = StepParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    registered_name: ClassVar[str] = ""
    needs_bytes: ClassVar[bool] = True
    """False for steps that only read metadata: leading ones run before the image is read."""

    def __init__(self, params: StepParams | dict[str, Any] | None = None) -> None:
        check_requires(f"step {self.name!r}", self.requires)
        if params is None:
            params = {}
        self.params = params if isinstance(params, self.Params) else self.Params(**dict(params))

    @property
    def name(self) -> str:
        return self.registered_name or type(self).__name__

    def provenance(self) -> dict[str, Any]:
        """What produced this step's annotations: parameters and, for models, their ids."""
        return {"step": self.name, **self.params.model_dump(mode="json")}

    def process(self, sample: Sample, ctx: StepContext) -> Sample:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, samples: Iterator[Sample], ctx: StepContext) -> Iterator[Sample]:
        for sample in samples:
            if sample.ok:
                sample = self.process(sample, ctx)
            yield sample


def build_step(name: str, params: dict[str, Any]) -> Step:
    """Instantiate the registered step ``name`` with ``params``; errors name the step and key."""
    from fairsets.core.registry import STEPS, UnknownName

    cls = STEPS.get(name)
    try:
        return cls(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(params)'}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(f"step {name!r}: {problems}") from None
    except UnknownName as exc:  # a parameter names a component that is not registered (detector, ...)
        raise UnknownName(f"step {name!r}: {exc}") from None  # still a ValueError (a bad value)
