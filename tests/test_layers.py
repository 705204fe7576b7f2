"""The shape of the code: imports point down the layers, nothing imports itself in a circle, and
no module grows past one idea's length.

Layers, lowest first (docs/architecture.md):

    core → fetch, models → sources, vision, select, publish → pipeline → debias, annotate → audit → geo

A module may import from its own package, from a lower layer, and from the packages of its own
layer that :data:`SIDEWAYS` allows. Every import counts, including those inside functions (a lazy
import is still a dependency); for the layer rule the imports under ``if TYPE_CHECKING:`` are left
out, as they never run, but for circles between files they count too (a circle of type-only
imports still means two files that cannot be read apart).

Command modules (a package's ``cli.py`` or ``cli/``) obey the same rule at their package's layer:
``fairsets audit``'s commands may use annotate's options, never the other way. Two top-level
modules are outside the layers, and :data:`TOP` names them exactly:

* the assembly — ``fairsets.cli`` (the root app, adding every package's commands),
  ``fairsets._cli_publish`` (``fairsets publish``, which serves two packages' folders),
  ``fairsets.__main__`` and ``fairsets`` itself — may import anything, and nothing below imports it;
* the commands' ground — ``fairsets._cli_util`` (one-line errors, logging) — imports only core and
  is imported only by command modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: Layer of each top-level package of ``fairsets``; research packages get a layer each, in the order
#: they may import one another (geo uses audit's dataset reader and embeddings; audit evaluates
#: debias transforms).
LAYERS: dict[str, int] = {
    "core": 0,
    "fetch": 1,
    "models": 1,
    "sources": 2,
    "vision": 2,
    "select": 2,
    "publish": 2,
    "pipeline": 3,
    "debias": 4,
    "annotate": 4,
    "audit": 5,
    "geo": 6,
}
CLI_LAYER = 99

#: The top-level modules outside the layers, each with its role (see the module docstring).
ASSEMBLY = {"fairsets", "fairsets.__main__", "fairsets.cli", "fairsets._cli_publish"}
COMMAND_GROUND = {"fairsets._cli_util"}
TOP = ASSEMBLY | COMMAND_GROUND

#: Modules allowed over :data:`MAX_LINES`, each with the reason it reads better whole (at most three).
LONG_MODULES: dict[str, str] = {}
MAX_LINES = 500

#: Imports between different packages of the same layer that are part of the design.
SIDEWAYS: set[tuple[str, str]] = set()


def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes that sit under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    skip.update(id(n) for n in ast.walk(inner))
    return skip


def _submodule(mods: dict[str, Path], module: str, name: str) -> str:
    return f"{module}.{name}" if f"{module}.{name}" in mods else module


def import_graph(root: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    """``{module: {imported fairsets modules}}`` for the package at ``root`` (e.g. ``src/fairsets``);
    with ``type_checking``, the imports under ``if TYPE_CHECKING:`` count too."""
    mods = _modules(root)
    top = root.name
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = set() if type_checking else _type_checking_only(tree)
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    prefix = base[: len(base) - (node.level - 1)]
                    module = ".".join([*prefix, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod
                targets = [
                    f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names
                ]
            for target in targets:
                if target != top and not target.startswith(top + "."):
                    continue
                while target not in mods:
                    target = target.rpartition(".")[0]
                if target != name:
                    found.add(target)
        graph[name] = found
    return graph


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def is_command(module: str) -> bool:
    """A package's command module: ``PKG.cli``, ``PKG.cli.*`` or ``PKG.*.cli(.*)``."""
    return "cli" in module.split(".")[2:]


def layer(module: str) -> int:
    """The layer of ``module``; :data:`CLI_LAYER` for the assembly and the commands' ground."""
    parts = module.split(".")
    if module in TOP:
        return CLI_LAYER
    if len(parts) == 1 or (len(parts) == 2 and parts[1] not in LAYERS):
        raise KeyError(f"{module}: a top-level module outside the layers; name its role in TOP")
    if parts[1] not in LAYERS:
        raise KeyError(
            f"{module}: package {parts[1]!r} has no layer; add it to LAYERS and docs/architecture.md"
        )
    return LAYERS[parts[1]]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            if src in ASSEMBLY:
                continue
            if dst in ASSEMBLY:
                bad.append(f"{src} imports {dst}: the assembly stands on top")
            elif dst in COMMAND_GROUND:
                if not is_command(src) and src not in COMMAND_GROUND:
                    bad.append(f"{src} imports {dst}: only command modules use the commands' ground")
            elif src in COMMAND_GROUND:
                if package(dst) != "core":
                    bad.append(f"{src} imports {dst}: the commands' ground imports only core")
            elif is_command(dst) and not is_command(src):
                bad.append(f"{src} imports {dst}: command-line modules stand on top of their package")
            else:
                ls, ld = layer(src), layer(dst)
                if ld > ls:
                    bad.append(f"{src} (layer {ls}) imports {dst} (layer {ld}): an arrow pointing up")
                elif (
                    ld == ls
                    and package(src) != package(dst)
                    and (package(src), package(dst)) not in (SIDEWAYS)
                ):
                    bad.append(f"{src} imports {dst}: sideways between packages of one layer")
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        if layer(src) == CLI_LAYER:
            continue
        for dst in targets:
            if layer(dst) != CLI_LAYER and package(src) != package(dst):
                out.setdefault(package(src), set()).add(package(dst))
    return out


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """``{module: lines}`` of the modules under ``root`` longer than ``limit`` lines."""
    out = {}
    for name, path in _modules(root).items():
        with path.open(encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > limit:
            out[name] = n
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(SRC / "fairsets")


@pytest.fixture(scope="module")
def typed_graph() -> dict[str, set[str]]:
    return import_graph(SRC / "fairsets", type_checking=True)


def test_every_package_has_a_layer(graph):
    unknown = sorted({package(m) for m in graph if layer(m) != CLI_LAYER and package(m) not in LAYERS})
    assert not unknown


def test_imports_point_down_the_layers(graph):
    assert layer_violations(graph) == []


def test_no_module_imports_itself_in_a_circle(typed_graph):
    """No circle between files, counting the imports only a type checker follows."""
    assert cycles(typed_graph) == []


def test_no_module_over_the_length_of_one_idea():
    """Every module ≤ MAX_LINES lines but the reasoned few in LONG_MODULES (at most three)."""
    assert len(LONG_MODULES) <= 3
    assert all(reason.strip() for reason in LONG_MODULES.values())
    long = long_modules(SRC / "fairsets")
    assert {m: n for m, n in long.items() if m not in LONG_MODULES} == {}
    assert sorted(set(LONG_MODULES) - set(long)) == [], "an allowed module is short now: drop it"


def test_command_modules_obey_their_package_layer(graph):
    """The command modules are not exempt: the package picture has no arrow up through them."""
    commands = {m for m in graph if is_command(m)}
    assert {"fairsets.pipeline.cli", "fairsets.audit.cli.debias", "fairsets.annotate.cli.vote"} <= commands
    assert all(layer(m) == LAYERS[package(m)] for m in commands)


def test_no_package_circle(graph):
    assert cycles(package_graph(graph)) == []


def test_core_imports_nothing_above_it(graph):
    above = sorted(
        f"{m} -> {t}" for m, ts in graph.items() if package(m) == "core" for t in ts if package(t) != "core"
    )
    assert above == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fairsets"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_see_an_upward_lazy_import_and_circles(tmp_path):
    """The checks fail on the shapes they exist to prevent (a lazy import counts; TYPE_CHECKING not)."""
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "def f():\n    from fairsets.pipeline import b\n",
            "core/typed.py": "import typing\n\nif typing.TYPE_CHECKING:\n    import fairsets.geo.g\n",
            "pipeline/__init__.py": "",
            "pipeline/b.py": "from . import c\n",
            "pipeline/c.py": "from .b import thing\n",
            "geo/__init__.py": "",
            "geo/g.py": "from ..audit import x\n",
            "audit/__init__.py": "",
            "audit/x.py": "import fairsets.geo.g\n",
            "vision/__init__.py": "",
            "vision/v.py": "from fairsets.publish import p\n",
            "publish/__init__.py": "",
            "publish/p.py": "from fairsets.cli import app\n",
            "publish/q.py": "from fairsets import _cli_util\n",
            "publish/cli.py": "from fairsets.geo import g\nfrom fairsets import _cli_util\n",
            "pipeline/cli/__init__.py": (
                "from fairsets.publish.cli import thing\nfrom fairsets.pipeline import b\n"
            ),
            "pipeline/d.py": "from fairsets.pipeline.cli import x\n",
            "_cli_util.py": "from fairsets.pipeline import b\n",
            "cli.py": "from fairsets.geo import g\n",
            "sources/__init__.py": "",
            "sources/s.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .t import T\n",
            "sources/t.py": "from .s import S\n",
            "sources/long.py": "x = 1\n" * 501,
        },
    )
    g = import_graph(root)
    bad = layer_violations(g)
    assert any(s.startswith("fairsets.core.a (layer 0) imports fairsets.pipeline.b") for s in bad)
    assert not any("core.typed" in s for s in bad)
    assert any(s.startswith("fairsets.audit.x (layer 5) imports fairsets.geo.g") for s in bad)
    assert any("fairsets.vision.v imports fairsets.publish.p: sideways" in s for s in bad)
    assert any("fairsets.publish.p imports fairsets.cli: the assembly" in s for s in bad)
    assert any("fairsets.publish.q imports fairsets._cli_util: only command" in s for s in bad)
    assert any(s.startswith("fairsets.publish.cli (layer 2) imports fairsets.geo.g") for s in bad)
    assert not any(s.startswith("fairsets.publish.cli imports fairsets._cli_util") for s in bad)
    assert not any(s.startswith("fairsets.pipeline.cli ") for s in bad)  # down to publish's commands
    assert any("fairsets.pipeline.d imports fairsets.pipeline.cli: command-line" in s for s in bad)
    assert any("fairsets._cli_util imports fairsets.pipeline.b: the commands' ground" in s for s in bad)
    assert not any(s.startswith("fairsets.cli ") for s in bad)
    assert ["fairsets.sources.s", "fairsets.sources.t"] not in cycles(g)
    assert ["fairsets.sources.s", "fairsets.sources.t"] in cycles(import_graph(root, type_checking=True))
    assert long_modules(root) == {"fairsets.sources.long": 501}
    assert ["fairsets.pipeline.b", "fairsets.pipeline.c"] in cycles(g)
    assert ["fairsets.audit.x", "fairsets.geo.g"] in cycles(g)
    assert ["audit", "geo"] in cycles(package_graph(g))
    with pytest.raises(KeyError, match="has no layer"):
        layer("fairsets.newpkg.mod")
    with pytest.raises(KeyError, match="outside the layers"):
        layer("fairsets._cli_new")
