"""What ships: the recipes, card templates and licence policy are real files in the sdist and the
wheel (never symbolic links, which Windows clones and some archivers turn into text files), the
sdist carries the docs and tests it names, and a wheel installed in a fresh virtualenv builds the
offline example from the recipes ``fairsets example`` writes out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_FOLDERS = {"_builders": "builders", "_cards": "cards", "_licenses": "licenses"}
# What the copy of the repository leaves out: what git ignores, and git's own folder.
_SKIP = {
    ".git",
    ".venv",
    ".ci-venv",
    ".ci-venv313",
    "build",
    "dist",
    "example-out",
    ".pytest_cache",
    ".ruff_cache",
}

pytestmark = pytest.mark.usefixtures("no_egress")


def _shipped(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".pyc"
    )


def test_no_symbolic_link_in_the_package_or_its_data() -> None:
    """src/fairsets/_builders, _cards and _licenses were links to the top-level folders: a clone on
    Windows (core.symlinks off) gets one-line text files in their place and no package data."""
    links = [
        str(p.relative_to(ROOT))
        for top in ("src", *DATA_FOLDERS.values())
        for p in [ROOT / top, *(ROOT / top).rglob("*")]
        if p.is_symlink()
    ]
    assert links == []


def _copy_of_the_repository(dest: Path) -> Path:
    """The working tree without ignored build outputs (the sdist is made from this copy, so the
    test never writes into the checkout)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in _SKIP or n == "__pycache__" or n.endswith(".egg-info")}

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)
    return dest


def _build(kind: str, source: Path, out: Path) -> Path:
    """``setuptools.build_meta.build_<kind>`` (what pip or ``python -m build`` call) in a subprocess,
    with the setuptools already installed here (no download)."""
    code = f"import setuptools.build_meta as b; print(b.build_{kind}({str(out)!r}))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=source, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel): the sdist built from a copy of the repository, the wheel from the unpacked
    sdist, as pip builds a wheel from an sdist."""
    base = tmp_path_factory.mktemp("packaging")
    repo = _copy_of_the_repository(base / "repo")
    sdist = _build("sdist", repo, base / "dist")
    with tarfile.open(sdist) as tar:
        tar.extractall(base / "unpacked", filter="data")
    (unpacked,) = (base / "unpacked").iterdir()
    wheel = _build("wheel", unpacked, base / "wheel")
    return sdist, wheel


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_sdist_holds_real_files_with_the_docs_and_tests(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
    assert [m.name for m in members if m.issym() or m.islnk()] == []
    names = {m.name.split("/", 1)[1] for m in members if m.isfile()}
    expected = {"README.md", "pyproject.toml", "setup.py", "MANIFEST.in", ".ci/run"}
    for top in ("docs", "tests", "builders", "cards", "licenses", "scripts", "benchmarks"):
        expected |= {
            str(p.relative_to(ROOT))
            for p in (ROOT / top).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        }
    assert not expected - names, sorted(expected - names)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_carries_the_data_folders_byte_for_byte(built: tuple[Path, Path]) -> None:
    _, wheel = built
    with zipfile.ZipFile(wheel) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        for target, source in DATA_FOLDERS.items():
            files = _shipped(ROOT / source)
            assert files, source
            for path in files:
                name = f"fairsets/{target}/{path.name}"
                assert name in infos, f"{name} is not in the wheel"
                assert (infos[name].external_attr >> 16) & 0o170000 != 0o120000, f"{name} is a link"
                assert zf.read(name) == path.read_bytes(), name


def _fresh_venv_with_the_wheel(wheel: Path, where: Path) -> Path:
    """A new virtualenv holding the wheel (no dependencies installed: this environment's
    site-packages is added as a path, without its .pth files, so the checkout's editable fairsets
    is not visible and nothing is downloaded). Returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    bindir = where / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / ("python.exe" if os.name == "nt" else "python")
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "zz_test_deps.pth").write_text("".join(f"{p}\n" for p in sorted(here)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--isolated",
            "--no-deps",
            "--no-index",
            "--ignore-installed",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=300,
        env=env,
    )
    return bindir


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_wheel_in_a_fresh_venv_builds_the_example(built: tuple[Path, Path], tmp_path: Path) -> None:
    """`pip install fairsets-….whl`, then `fairsets example --out recipes` and
    `fairsets build recipes/example.toml --out example-out`, away from the checkout."""
    _, wheel = built
    bindir = _fresh_venv_with_the_wheel(wheel, tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run(
        [str(bindir / "python"), "-c", "import fairsets; print(fairsets.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where  # the wheel's, not the checkout's
    got = subprocess.run(
        [str(bindir / "fairsets"), "example", "--out", "recipes"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    for path in _shipped(ROOT / "builders"):
        assert (work / "recipes" / path.name).read_bytes() == path.read_bytes(), path.name
    assert "fairsets build recipes/example.toml --out example-out" in got.stdout
    built_example = subprocess.run(
        [str(bindir / "fairsets"), "build", "recipes/example.toml", "--out", "example-out", "-q"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert built_example.returncode == 0, built_example.stderr
    out = work / "example-out"
    for name in ("README.md", "manifest.json", "croissant.json", "ATTRIBUTION.md", "rejects.parquet"):
        assert (out / name).is_file(), name
    assert list((out / "shards").rglob("*.tar")), "no shard published"
    assert not (work / "recipes" / "example-candidates").exists()  # the hook wrote under OUT only
