"""``fairsets geo profile --method llm`` against a hostile chat server: deeply nested JSON, token
counts that are no counts, an echoed key, and malformed answers that a later run mends."""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from openai_server import ECHO_KEY, OpenAIServer, Step, last_user_text, nested_json
from secret_sweep import leaks

pytestmark = pytest.mark.usefixtures("no_egress")

SECRET = "sk-proj-Hq8ZtW3nVb6Lk2Pa9Xy5Rm1Cd7Fg4Js0"
PAD = "x" * 171  # an echoed key straddles the 200-character clip of error texts

#: caption → how the server answers it.
STEPS = {
    "Nested answer": Step(raw=nested_json()),
    "Nested error": Step(status=400, raw=nested_json()),
    "NaN counts in Lisbon": Step(text="Output: Portugal", usage=(float("nan"), -3)),
    "Infinite counts in Oslo": Step(text="Output: Norway", usage=(float("inf"), 1e300)),
    "Echo in the answer": Step(text=f"Output: No. (key {ECHO_KEY})"),
    "Echo in an error": Step(status=400, error_message=f"{PAD}{ECHO_KEY}"),
    "Echo in a refusal": Step(refusal=f"{PAD}{ECHO_KEY}"),
    "Echo in a malformed answer": Step(text=f"The key {ECHO_KEY} is all I see"),
}
CAPTIONS = ["Happy boys at Copacabana Beach", *STEPS]


@pytest.fixture
def srv() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:

        def respond(body: dict[str, Any]) -> Step | None:
            text = last_user_text(body)
            caption = next((c for c in STEPS if f"caption: {c} ," in text), None)
            return STEPS[caption] if caption else Step(text="Output: Brazil")

        server.respond = respond
        yield server


def profile(srv: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path]:
    monkeypatch.setenv("GEO_HOSTILE_KEY", SECRET)
    src = tmp_path / "captions.txt"
    src.write_text("\n".join(CAPTIONS) + "\n", encoding="utf-8")
    options = {
        "base_url": srv.base_url,
        "model": "mixtral-test",
        "api_key_env": "GEO_HOSTILE_KEY",
        "cache_dir": str(tmp_path / "cache"),
        "max_retries": 0,
        "abort_after": 0,
    }
    args = ["geo", "profile", "-m", "llm", str(src), "--out", str(tmp_path / "out"), "-q"]
    for key, value in options.items():
        args += ["-O", f"{key}={value}"]
    return CliRunner().invoke(app, args), tmp_path / "out" / "predictions.csv"


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return {r["caption"]: r for r in csv.DictReader(fh)}


def test_a_hostile_server_fails_captions_one_by_one_and_never_gets_its_key_written(
    srv: OpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Defects 2-4 for geo llm: a RecursionError or int(NaN) aborted the profile (exit 2); the key
    was written in the error column, the cache and stderr, whole or clipped to a piece."""
    caplog.set_level(logging.DEBUG)
    res, out = profile(srv, tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    got = rows(out)
    assert got["Happy boys at Copacabana Beach"]["country"] == "BRA"
    assert (
        got["NaN counts in Lisbon"]["country"] == "PRT" and got["Infinite counts in Oslo"]["country"] == "NOR"
    )
    assert got["Nested answer"]["error"].startswith("invalid response: not JSON (nested too deeply)")
    assert got["Nested error"]["error"] == "http 400: " + "[" * 199 + "…"
    assert got["Echo in an error"]["error"] == f"http 400: {PAD}***"
    assert got["Echo in a refusal"]["error"] == f"refused: {PAD}***"
    assert got["Echo in a malformed answer"]["error"] == "malformed answer: 'The key *** is all I see'"
    streams = capfd.readouterr()
    shown = res.output + streams.out + streams.err + caplog.text
    assert not leaks(SECRET, tmp_path / "out", tmp_path / "cache", text=shown)


def test_a_malformed_answer_is_asked_again_and_mended_by_a_fixed_server(
    srv: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Friction 8 for geo llm: a malformed answer was cached as final and replayed by every run."""
    res, out = profile(srv, tmp_path, monkeypatch)
    assert res.exit_code == 0 and rows(out)["Echo in a malformed answer"]["country"] == ""
    asked = srv.hits
    monkeypatch.setitem(STEPS, "Echo in a malformed answer", Step(text="Output: Kenya"))
    res, out = profile(srv, tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    got = rows(out)
    assert (
        got["Echo in a malformed answer"]["country"] == "KEN"
        and got["Echo in a malformed answer"]["error"] == ""
    )
    # asked again: the malformed answer and the captions that failed; every usable answer was cached
    assert srv.hits - asked == 5
