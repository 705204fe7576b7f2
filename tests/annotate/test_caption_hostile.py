"""``annotate caption`` against a hostile captioner: deeply nested JSON, token counts that are no
counts, an echoed key (never written, whole or in part), and an empty answer a later run mends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ann_data import make_ann
from annotator_script import Annotator, annotators_toml

from cli_helpers import assert_one_line_error, run_cli
from openai_server import ECHO_KEY, Step, nested_json
from secret_sweep import leaks

KEY_ENV = "FAIRSETS_TEST_CAPTION_HOSTILE_KEY"
SECRET = "sk-proj-Rt5Wq9Ze3Xc7Vb1Nm4Lk8Jh2Gf6Ds0Aa"
PAD = "x" * 171  # an echoed key straddles the 200-character clip of error texts


class Hostile(Annotator):
    """A captioner whose answers in turn are hostile, until ``fixed``."""

    fixed = False

    def _respond(self, body: dict[str, Any]) -> Step | None:
        step = super()._respond(body)
        if step is None or self.fixed:
            return step
        return {
            0: Step(raw=nested_json()),
            1: Step(text=step.text, usage=(float("nan"), float("-inf"))),
            2: Step(text=f"A person holding a card that reads {ECHO_KEY}.", finish_reason=f"stop {ECHO_KEY}"),
            3: Step(status=400, error_message=f"{PAD}{ECHO_KEY}"),
            4: Step(refusal=f"{PAD}{ECHO_KEY}"),
            5: Step(text=" \n\x00 "),
        }[self.answers % 6]


def test_a_hostile_captioner_fails_boxes_one_by_one_and_never_gets_its_key_written(
    tmp_path: Path,
    shard_writer: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Defects 2-4 and friction 8 for caption: a RecursionError or int(NaN) aborted the run; the key
    was written in the captions table and the cache, whole or clipped to a piece; an empty answer
    was final (``rejected``), so no re-run asked it again."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, SECRET)
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=5, boxes_per_image=2, seed=4)
    args = ["annotate", "caption", ann.path, "--captioner", "cap", "--max-retries", 0]
    with Hostile("cap") as cap:  # one request at a time: the answers' kinds come in turn
        toml = annotators_toml(
            tmp_path / "annotators.toml", [cap], api_key_env=KEY_ENV, timeout=2, max_concurrency=1
        )
        code, stdout, err = run_cli([*args, "--annotators", toml], capsys)
        assert code == 0, err
        table = ann.path / "captions" / "cap" / "00000.parquet"
        rows = pq.read_table(table).to_pylist()
        by = {s: [r for r in rows if r["status"] == s] for s in ("ok", "failed", "refused", "rejected")}
        assert [len(by[s]) for s in by] == [4, 4, 2, 0]
        reasons = sorted(r["reason"] for r in by["failed"])
        assert reasons[0] == f"http 400: {PAD}***" and reasons[2].startswith(
            "invalid response: not JSON (nested"
        )
        assert reasons[3] == "the model answered with no text"
        assert [r["reason"] for r in by["refused"]] == [f"refused: {PAD}***"] * 2
        echoed = [r for r in by["ok"] if "card" in r["caption"]]
        assert [(r["caption"], r["finish_reason"]) for r in echoed] == [
            ("A person holding a card that reads ***.", "stop ***")
        ] * 2
        assert [r["prompt_tokens"] for r in by["ok"] if "card" not in r["caption"]] == [None, None]

        cap.fixed = True  # the same server, mended: the failed boxes (the empty answer too) are asked again
        sent = cap.server.hits
        code, stdout2, err2 = run_cli([*args, "--annotators", toml, "-q"], capsys)
        assert code == 0, err2
        assert cap.server.hits - sent == 4
        statuses = sorted(r["status"] for r in pq.read_table(table).to_pylist())
        assert statuses == ["ok"] * 8 + ["refused"] * 2

    denied = Annotator("cap", script=[Step(status=401, error_message=f"bad key {PAD}{ECHO_KEY}")] * 20)
    with denied:
        toml = annotators_toml(tmp_path / "annotators.toml", [denied], api_key_env=KEY_ENV, timeout=2)
        code, stdout3, err3 = run_cli([*args, "--annotators", toml, "--replace"], capsys)
    line = assert_one_line_error(code, err3, "HTTP 401", f"bad key {PAD}***")
    shown = stdout + err + stdout2 + err2 + stdout3 + line + caplog.text
    assert not leaks(SECRET, ann.path, text=shown)


def test_the_summary_prints_paths_as_text_not_markup(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder holding ``[/]`` made the summary a Rich markup error after the captions were written."""
    import shutil

    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=2, boxes_per_image=1, seed=4)
    folder = shutil.copytree(ann.path, tmp_path / "[bold red]x[/] [/]")
    with Annotator("cap") as cap:
        toml = annotators_toml(tmp_path / "annotators.toml", [cap], api_key_env="", timeout=2)
        code, _, err = run_cli(
            ["annotate", "caption", folder, "--annotators", toml, "--captioner", "cap"], capsys
        )
    assert code == 0, err
    assert "[bold red]x[/] [/]/captions/cap/" in " ".join(err.split())
