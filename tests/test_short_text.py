"""One way to shorten text from outside: clip (a field) and printable_line (a server's error text)."""

from __future__ import annotations

from fairsets.core.short_text import clip, printable_line


def test_clip() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("abcd", 3) == "ab…"
    assert len(clip("x" * 10_000, 1000)) == 1000


def test_printable_line() -> None:
    assert printable_line("a\nb\x1b[31m  c", 50) == "a b [31m c"
    assert printable_line("\n\x00", 50, empty="Error") == "Error"
    long = "word " * 1_000_000  # megabytes: only the head is walked
    line = printable_line(long, 500)
    assert line.endswith(f"… (cut; {len(long)} characters in all)") and len(line) < 560
