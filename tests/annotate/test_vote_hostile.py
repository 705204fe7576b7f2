"""``annotate vote`` choosing its voters, and against a hostile annotator: deeply nested JSON, token
counts that are no counts, an echoed key (never written, whole or in part), invalid answers that a
later run mends."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ann_data import make_ann
from annotator_script import Annotator, annotators_toml

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.chat.requests import chat_cache_dir
from openai_server import ECHO_KEY, Step, nested_json
from secret_sweep import leaks

KEY_ENV = "FAIRSETS_TEST_VOTE_HOSTILE_KEY"
SECRET = "sk-or-v1-8c1f0e7d2b9a4c6e3f5d7b1a9e2c4f6d"
PAD = "x" * 171  # an echoed key straddles the 200-character clip of error texts


@pytest.fixture
def ann(tmp_path: Path, shard_writer: Any) -> Any:
    return make_ann(tmp_path, shard_writer, shards=1, images_per_shard=5, boxes_per_image=2, seed=4)


def vote(ann: Any, toml: Path, out: Path, *extra: Any) -> list[Any]:
    return ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
            "--sample", 100, "--seed", 5, "--out", out, "--max-retries", 0, *extra]  # fmt: skip


# --------------------------------------------------------------------------- --voters


def test_voters_choose_which_tables_vote(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Friction 9: every [annotators.*] table voted, though the file also holds captioners and judges."""
    voters = [Annotator("qa"), Annotator("qb"), Annotator("qc"), Annotator("captioner")]
    for a in voters:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", voters, api_key_env="", timeout=2)
        code, _, err = run_cli(vote(ann, toml, tmp_path / "votes.csv", "--voters", "qc,qa"), capsys)
        assert code == 0, err
        assert [a.server.hits for a in voters] == [len(ann.truth), 0, len(ann.truth), 0]
    finally:
        for a in voters:
            a.__exit__(None, None, None)
    assert f"{len(ann.truth)} boxes voted by 2 annotators" in " ".join(err.split())
    run = json.loads((tmp_path / "votes.agreement.json").read_text())["run"]
    assert [a["name"] for a in run["annotators"]] == ["qc", "qa"]
    answers = pq.read_table(tmp_path / "votes.answers.parquet").to_pylist()
    assert {r["annotator"] for r in answers} == {"qa", "qc"}

    for extra, needles in (
        (["--voters", "qa,nope"], ["--voters 'nope' is not in", "its annotators are qa, qb, qc, captioner"]),
        (["--voters", "qa", "--voters", "qa"], ["--voters qa", "at least 2", "qa, qb, qc, captioner"]),
        (["--voters", " , "], ["--voters", "names nothing"]),
    ):
        code, _, err = run_cli(vote(ann, toml, tmp_path / "v2.csv", *extra), capsys)
        assert_one_line_error(code, err, *needles)
    args = vote(ann, toml, tmp_path / "v2.csv")
    args[args.index(toml)] = "qa,qb"  # the names given where the file goes
    assert_one_line_error(*run_cli(args, capsys)[::2], "--annotators qa,qb: no such file", "--voters qa,qb")
    assert not (tmp_path / "v2.csv").exists()


# --------------------------------------------------------------------------- a hostile annotator


class Hostile(Annotator):
    """An annotator whose every answer in turn is hostile: nested JSON, NaN counts, the key echoed."""

    def _respond(self, body: dict[str, Any]) -> Step | None:
        step = super()._respond(body)
        if step is None:
            return None
        kind = self.answers % 5
        if kind == 0:
            return Step(raw=nested_json())
        if kind == 1:
            return Step(text=step.text, usage=(float("nan"), -7))
        if kind == 2:
            return Step(text=f"I see {ECHO_KEY} on the card.")
        if kind == 3:
            return Step(status=400, error_message=f"{PAD}{ECHO_KEY}")
        return Step(refusal=f"{PAD}{ECHO_KEY}")


def test_a_hostile_annotator_fails_boxes_one_by_one_and_never_gets_its_key_written(
    tmp_path: Path,
    ann: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Defects 2-4 for vote: a RecursionError or int(NaN) aborted the vote (exit 2); the key was
    written in the answers table, the cache and errors, whole or clipped to a piece."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, SECRET)
    out = tmp_path / "out" / "votes.parquet"
    good, bad = Annotator("good"), Hostile("bad")
    with good, bad:  # one request at a time: the hostile answers' kinds come in turn
        toml = annotators_toml(
            tmp_path / "annotators.toml", [good, bad], api_key_env=KEY_ENV, timeout=2, max_concurrency=1
        )
        code, stdout, err = run_cli(vote(ann, toml, out), capsys)
        assert code == 0, err
    rows = [r for r in pq.read_table(tmp_path / "out" / "votes.answers.parquet").to_pylist()]
    mine = [r for r in rows if r["annotator"] == "bad"]
    assert len(mine) == len(ann.truth)
    errors = [r["error"] or "" for r in mine]
    assert sum(e.startswith("invalid response: not JSON (nested too deeply)") for e in errors) == 2
    assert errors.count(f"http 400: {PAD}***") == 2 and errors.count(f"refused: {PAD}***") == 2
    nan = [r for r in mine if r["status"] == "ok"]
    assert len(nan) == 2 and all(r["prompt_tokens"] is None for r in nan)  # the answer kept, no count
    echoed = [r for r in mine if r["status"] == "invalid"]
    assert [r["answer"] for r in echoed] == ["I see *** on the card."] * 2
    run = json.loads((tmp_path / "out" / "votes.agreement.json").read_text())["run"]
    assert run["annotators"][1]["prompt_tokens"] == 11 * 4  # refusals and chatter: NaN and -7 not summed

    # a refused key: one line, the server's text masked before it is clipped
    denied = Annotator("denied", script=[Step(status=401, error_message=f"bad key {PAD}{ECHO_KEY}")] * 50)
    with Annotator("good") as fine, denied:
        toml = annotators_toml(tmp_path / "annotators.toml", [fine, denied], api_key_env=KEY_ENV, timeout=2)
        code, stdout2, err2 = run_cli(vote(ann, toml, tmp_path / "o2" / "votes.csv"), capsys)
    line = assert_one_line_error(code, err2, "annotator denied", "HTTP 401", f"bad key {PAD}***")
    shown = stdout + err + stdout2 + line + caplog.text
    assert not leaks(SECRET, tmp_path / "out", chat_cache_dir(ann.path), text=shown)


def test_an_invalid_vote_is_asked_again_and_mended_by_a_fixed_annotator(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Friction 8 for vote: an invalid answer was a final cache hit, so no re-run could mend it."""
    labels = set(ann.truth.values())
    chatty = Annotator("chatty", invalid=labels)  # every answer is chatter
    good = Annotator("good")
    with good, chatty:
        toml = annotators_toml(tmp_path / "annotators.toml", [good, chatty], api_key_env="", timeout=2)
        code, _, err = run_cli(vote(ann, toml, tmp_path / "votes.csv"), capsys)
        assert code == 0, err
        stats = json.loads((tmp_path / "votes.agreement.json").read_text())["stats"]
        assert stats["invalid"]["chatty"] == len(ann.truth)
        chatty.invalid.clear()  # the server is fixed (same address, same model)
        sent = (good.server.hits, chatty.server.hits)
        code, _, err = run_cli(vote(ann, toml, tmp_path / "votes.csv"), capsys)
        assert code == 0, err
        assert (good.server.hits, chatty.server.hits) == (sent[0], sent[1] + len(ann.truth))
    stats = json.loads((tmp_path / "votes.agreement.json").read_text())["stats"]
    assert stats["invalid"]["chatty"] == 0 and sum(stats["counts"]["kept"].values()) > 0


def test_the_summary_prints_paths_as_text_not_markup(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path holding ``[/]`` made the summary a Rich markup error after the files were written."""
    out = tmp_path / "[bold red]x[/] [/]" / "votes.csv"
    with Annotator("qa") as qa, Annotator("qb") as qb:
        toml = annotators_toml(tmp_path / "annotators.toml", [qa, qb], api_key_env="", timeout=2)
        code, _, err = run_cli(vote(ann, toml, out), capsys)
    assert code == 0, err
    assert "[bold red]x[/] [/]" in err and "votes.answers.parquet" in err
