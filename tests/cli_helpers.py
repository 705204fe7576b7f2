"""Running ``fairsets`` in-process through its entry point, and checking its one-line errors."""

from __future__ import annotations

import pytest

from fairsets.cli import app


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``fairsets ARGS`` through the entry point; (exit code, stdout, stderr)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        app(args=[str(a) for a in args], prog_name="fairsets")
    out = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else int(code)), out.out, out.err


def assert_one_line_error(code: int, err: str, *needles: str) -> str:
    """Exit code 2, exactly one ``error: …`` line holding every needle, no traceback; the line."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
