"""Keys taken from the outside (shard members, a caller's rows) never hold control or bidi control
characters: such a key would display as another one (``ab\u202egpj.exe`` reads ``abexe.jpg``)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from fairsets.annotate.shards import ShardRef, iter_records
from fairsets.annotate.shards.records import key_problem
from fairsets.core.keys import BIDI_CONTROLS, unsafe_key_chars

#: Unicode's Bidi_Control property, written out (UnicodeData: PropList.txt).
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_the_bidi_controls_are_unicodes() -> None:
    assert frozenset(BIDI) == BIDI_CONTROLS


@pytest.mark.parametrize("char", list(BIDI))
def test_a_bidi_control_makes_a_key_unsafe(char: str) -> None:
    assert unsafe_key_chars(f"photo{char}1") == "bidi control characters"
    assert key_problem(f"photo{char}1") == "key contains bidi control characters"


@pytest.mark.parametrize("key", ["a\nb", "a\tb", "a\x00b", "a\x7fb", "a\x85b", "a\x9fb"])
def test_a_control_character_makes_a_key_unsafe(key: str) -> None:
    assert unsafe_key_chars(key) == "control characters"
    assert key_problem(key) == "key contains control characters"


@pytest.mark.parametrize("key", ["photo 1", "café_2", "日本-3", "a\u200db", "emoji\U0001f600", "Ωmega"])
def test_visible_keys_are_fine(key: str) -> None:
    assert unsafe_key_chars(key) is None
    assert key_problem(key) is None


def test_a_shard_member_with_a_bidi_key_is_a_rejected_record(tmp_path: Path) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buf, "JPEG")
    path = tmp_path / "s.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for name in ("a.jpg", "invoice\u202egpj.exe.jpg", "z.jpg"):
            info = tarfile.TarInfo(name)
            info.size = len(buf.getvalue())
            tf.addfile(info, io.BytesIO(buf.getvalue()))
    got = [(r.key, r.status, r.reason) for r in iter_records(ShardRef("s", str(path), "tar"))]
    assert got == [
        ("a", "ok", None),
        ("invoice\u202egpj", "rejected", "key contains bidi control characters"),
        ("z", "ok", None),
    ]
