"""``public_path`` (string operations, called once per listing row) gives exactly the results of
its former pathlib form, on many generated paths and roots."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from fairsets.sources.base import public_path


def pathlib_public_path(value: str | Path, root: Path) -> str:
    """The former implementation (pathlib), kept here as the reference."""
    given = Path(value).expanduser()
    full = Path(os.path.abspath(given if given.is_absolute() else root / given))
    try:
        return full.relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        digest = hashlib.sha256(full.as_posix().encode()).hexdigest()[:12]
        return f"external/{digest}/{full.name}"


PARTS = ["a", "b.jpg", "..", ".", "", "~", "~root", " x .jpg", "é", "data", "tmp", "r", "s p", "~a"]


def _value(rng: random.Random) -> str:
    body = "/".join(rng.choice(PARTS) for _ in range(rng.randint(0, 6)))
    return (
        rng.choice(["", "", "/", "//", "///", "./", "../", "~/", "~root/"])
        + body
        + rng.choice(["", "/", "//"])
    )


@pytest.mark.timeout(60)
def test_public_path_matches_the_pathlib_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    roots = [
        tmp_path,
        tmp_path / "home",
        Path("/"),
        Path("//"),
        Path("//r"),
        Path("rel/dir"),
        Path("."),
        Path(".."),
        Path(str(tmp_path) + "/sub/../data/"),
        Path(os.path.expanduser("~root")),
    ]
    rng = random.Random(20261124)
    checked = 0
    for _ in range(30_000):
        root, value = rng.choice(roots), _value(rng)
        given: str | Path = Path(value) if rng.random() < 0.1 else value
        if not value.startswith("~") and str(Path(value)).startswith("~"):
            continue  # "./~/a": pathlib dropped "./" and expanded "~"; a shell does not (see below)
        try:
            expected = pathlib_public_path(given, root)
        except RuntimeError:  # an unknown ~user: pathlib raised; now the name is kept as written
            continue
        assert public_path(given, root) == expected, (value, root)
        checked += 1
    assert checked > 25_000


def test_only_a_leading_tilde_is_expanded_as_in_a_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert public_path("~/a.jpg", tmp_path) == "home/a.jpg"
    assert public_path("./~/a.jpg", tmp_path) == "~/a.jpg"  # the folder named "~" in root


def test_an_unknown_user_name_is_kept_as_written(tmp_path: Path) -> None:
    assert public_path("~nosuchuser.jpg", tmp_path) == "~nosuchuser.jpg"
    assert public_path("~nosuchuser/a.jpg", tmp_path) == "~nosuchuser/a.jpg"
