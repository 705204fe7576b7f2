"""Step contract, task runner, executors (local default, ray), stats and markers."""

from fairsets.core.step import MissingDependency, Step, StepContext, StepParams

__all__ = ["MissingDependency", "Step", "StepContext", "StepParams"]
