"""``fairsets annotate vote`` on the command line: one run end to end, then its one-line errors.

The run uses three scripted loopback annotators (:mod:`annotator_script`) behind a key read from
the environment; the errors each exit 2 with one ``error:`` line that says what to fix, before
any request when the input is wrong, and naming the annotator when its server refuses the key.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from ann_data import make_ann
from annotator_script import Annotator, annotators_toml

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.heads.labels import item_id
from openai_server import Step

KEY_ENV = "FAIRSETS_TEST_VOTE_CLI_KEY"
SECRET = "sk-vote-cli-5ecret-77Z-3141"


@pytest.fixture
def ann(tmp_path: Path, shard_writer: Any) -> Any:
    return make_ann(tmp_path, shard_writer, shards=1, images_per_shard=6, boxes_per_image=2, seed=4)


def test_vote_cli_end_to_end(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    out = tmp_path / "votes.csv"
    annotators = [Annotator("qa"), Annotator("qb", bias={"mixed": "female"}), Annotator("qc")]
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, api_key_env=KEY_ENV, timeout=2)
        code, stdout, stderr = run_cli(
            ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
             "--sample", 100, "--seed", 5, "--out", out],
            capsys,
        )  # fmt: skip
        assert code == 0, stderr
        assert all(a.server.hits == len(ann.truth) for a in annotators)
        assert all(h.get("Authorization") == f"Bearer {SECRET}" for a in annotators for h in a.server.headers)
    finally:
        for a in annotators:
            a.__exit__(None, None, None)
    assert SECRET not in stdout + stderr
    line = " ".join(stderr.split())  # the summary, on stderr with the progress bar
    n = len(ann.truth)
    assert f"gender: {n} boxes voted by 3 annotators" in line
    assert f"{3 * n} requests sent" in line and "votes.csv" in line
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    got = {item_id(r["shard"], r["key"], int(r["box_id"])): r["label"] for r in rows}
    # qb says female for mixed: mixed is kept by 2 of 3 (the default relaxation), the rest unanimous.
    assert got == ann.truth
    assert {r["rule"] for r in rows if r["label"] == "mixed"} <= {"relaxed"}
    for suffix in (".answers.parquet", ".agreement.json", ".report.html"):
        assert (tmp_path / f"votes{suffix}").is_file()
    doc = json.loads((tmp_path / "votes.agreement.json").read_text())
    assert doc["run"]["attribute"] == "gender" and doc["stats"]["relax"] == {"mixed": 2}

    # --relax none from the cache (servers gone): the mixed boxes are no longer kept.
    strict = tmp_path / "strict.jsonl"
    code, stdout, stderr = run_cli(
        ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
         "--sample", 100, "--seed", 5, "--relax", "none", "--out", strict, "-q"],
        capsys,
    )  # fmt: skip
    assert code == 0, stderr
    kept = {
        item_id(r["shard"], r["key"], r["box_id"]) for r in map(json.loads, strict.read_text().splitlines())
    }
    assert kept == {it for it, lab in ann.truth.items() if lab != "mixed"}


def _toml(tmp_path: Path, names: list[str], url: str = "http://127.0.0.1:9/v1") -> Path:
    text = "".join(
        f'[annotators.{n}]\nbase_url = "{url}"\nmodel = "{n}-vl"\napi_key_env = ""\n' for n in names
    )
    path = tmp_path / "annotators.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--annotators", "missing.toml"], ["missing.toml", "no such file"]),
        (["--annotators", "ONE"], ["1 annotator(s)", "at least 2"]),
        (["--annotators", "TWO", "--relax", "mixed"], ["--relax 'mixed'", "LABEL=K"]),
        (["--annotators", "TWO", "--relax", "elderly=2"], ["no label 'elderly'"]),
        (["--annotators", "TWO", "--relax", "mixed=3"], ["mixed=3", "from 1 to 2"]),
        (["--annotators", "TWO", "--attribute", "age"], ["--attribute 'age'", "gender or race"]),
        (["--annotators", "TWO", "--sample", "0"], ["--sample 0"]),
        (["--annotators", "TWO", "--out", "FOLDER"], ["a folder"]),
        (["--annotators", "TWO", "--out", "votes.txt"], ["'.txt'", ".csv, .parquet or .jsonl"]),
    ],
)
def test_vote_cli_input_errors(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str], extra: list[str], needles: list[str]
) -> None:
    swap = {"ONE": _toml(tmp_path, ["solo"]), "FOLDER": tmp_path, "missing.toml": tmp_path / "missing.toml"}
    if "TWO" in extra:
        swap["TWO"] = _toml(tmp_path, ["x1", "x2"])
    args = [str(swap.get(a, a)) for a in extra]
    base = {"--attribute": "gender", "--sample": "5", "--out": str(tmp_path / "votes.csv")}
    for flag, value in base.items():
        if flag not in args:
            args += [flag, value]
    code, _, err = run_cli(["annotate", "vote", ann.path, *args], capsys)
    assert_one_line_error(code, err, *needles)
    assert not (tmp_path / "votes.csv").exists()


def test_vote_cli_names_the_annotator_whose_key_is_refused(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    good, bad = Annotator("good"), Annotator("badkey", script=[Step(status=401)] * 100)
    with good, bad:
        toml = annotators_toml(tmp_path / "annotators.toml", [good, bad], api_key_env=KEY_ENV, timeout=2)
        code, out, err = run_cli(
            ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
             "--sample", 4, "--out", tmp_path / "votes.csv"],
            capsys,
        )  # fmt: skip
    line = assert_one_line_error(code, err, "annotator badkey", "HTTP 401", f"${KEY_ENV}", "run again")
    assert SECRET not in out + err and SECRET not in line
    assert not (tmp_path / "votes.csv").exists()


@pytest.mark.parametrize("honours", [None, "structured_outputs"])
def test_vote_fails_closed_before_any_vote_when_a_server_ignores_the_constraint(
    tmp_path: Path, ann: Any, capsys: pytest.CaptureFixture[str], honours: str | None
) -> None:
    """``constrain = "choice"`` against a server that ignores the field: one line naming the
    annotator, nothing voted; the same server obeying the field votes."""
    good, sloppy = Annotator("good"), Annotator("sloppy")
    with good, sloppy:
        sloppy.server.honours = honours
        toml = tmp_path / "annotators.toml"
        toml.write_text(good.table() + "\n" + sloppy.table() + 'constrain = "choice"\n')
        code, _out, err = run_cli(
            ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
             "--sample", 4, "--out", tmp_path / "votes.csv"],
            capsys,
        )  # fmt: skip
        voted = [b for b in sloppy.server.bodies if "structured_outputs" in b]
    if honours is None:
        assert_one_line_error(code, err, "sloppy", "constrain")
        assert not (tmp_path / "votes.csv").exists() and good.server.hits == 0
    else:
        assert code == 0, err
        assert (tmp_path / "votes.csv").exists() and len(voted) >= 4
