"""One subpackage per stage of the annotation method: each is light to import, says what it reads and
writes, and answers every name it lists."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys

import pytest

STAGES = ("boxes", "heads", "chat", "vote", "captions", "publish")
HEAVY = ("torch", "open_clip", "transformers", "ultralytics", "pandas", "matplotlib")


@pytest.mark.parametrize("stage", ["", *STAGES])
def test_importing_a_stage_imports_no_model_library(stage: str) -> None:
    module = "fairsets.annotate" + (f".{stage}" if stage else "")
    code = f"import json, sys, {module}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_says_what_it_reads_and_writes_and_answers_its_names(stage: str) -> None:
    package = importlib.import_module(f"fairsets.annotate.{stage}")
    assert package.__doc__ and "reads" in package.__doc__.lower() and "writes" in package.__doc__
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    for name in package.__all__:
        assert name not in modules, f"{name} is both a name of {stage} and one of its modules"
        value = getattr(package, name)
        home = getattr(value, "__module__", None)
        assert home is None or home.startswith("fairsets.")
    for name in modules:
        assert importlib.import_module(f"fairsets.annotate.{stage}.{name}").__doc__, name
