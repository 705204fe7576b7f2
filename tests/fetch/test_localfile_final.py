"""A local path that fails the same way on every read (too long, a link loop) is a final refusal
(``rejected``), not an I/O failure that ``--retry-failed`` would try forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairsets.fetch.localfile import LocalFileRefused, read_local_file


def test_a_path_too_long_is_refused_for_good(tmp_path: Path) -> None:
    with pytest.raises(LocalFileRefused, match=r"^path too long$"):
        read_local_file(tmp_path / ("a" * 300 + ".jpg"))  # a name over NAME_MAX
    with pytest.raises(LocalFileRefused, match=r"^path too long$"):
        read_local_file("/".join(["d" * 200] * 30) + "/x.jpg")  # a path over PATH_MAX


def test_a_symbolic_link_loop_is_refused_for_good(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").symlink_to(tmp_path / "b.jpg")
    (tmp_path / "b.jpg").symlink_to(tmp_path / "a.jpg")
    with pytest.raises(LocalFileRefused, match=r"^symbolic link loop$"):
        read_local_file(tmp_path / "a.jpg")


def test_a_missing_file_stays_a_failure(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_local_file(tmp_path / "not-yet.jpg")
