"""``fairsets annotate probe``: a plain table of what each server of an annotators.toml can do, its
exit code, and one-line errors for a bad file or option."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_helpers import assert_one_line_error, run_cli
from openai_server import OpenAIServer, Step


@pytest.fixture
def servers() -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    with OpenAIServer() as vllm, OpenAIServer() as ollama:
        vllm.honours, vllm.logprobs = "structured_outputs", True
        yield vllm, ollama


def write(tmp_path: Path, vllm: OpenAIServer, ollama: OpenAIServer, extra: str = "") -> Path:
    path = tmp_path / "annotators.toml"
    path.write_text(
        f"""
[annotators.qwen]
base_url = "{vllm.base_url}"
model = "[bold red]x"
api_key_env = ""
constrain = "choice"

[annotators.llava]
base_url = "{ollama.base_url}"
model = "llava"
api_key_env = ""
constrain = "json_schema"
requests_per_minute = 120
{extra}
"""
    )
    return path


def test_probe_prints_a_table_and_exits_1_when_a_constraint_is_ignored(
    tmp_path: Path, servers: tuple[OpenAIServer, OpenAIServer], capsys: pytest.CaptureFixture[str]
) -> None:
    vllm, ollama = servers
    code, out, err = run_cli(
        ["annotate", "probe", write(tmp_path, vllm, ollama), "--samples", "2", "--burst", "0"], capsys
    )
    lines = out.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [
        "annotator",
        "server",
        "answers",
        "constraint",
        "logprobs",
        "latency",
        "concurrency",
    ]
    qwen = re.split(r"\s{2,}", lines[1])
    assert qwen[0] == "qwen" and qwen[2:5] == ["yes", "choice: obeyed", "yes"]
    assert qwen[5].endswith("s (median of 2)") and qwen[6] == "-"  # no burst, no rate limit
    llava = re.split(r"\s{2,}", lines[2])
    assert llava[0] == "llava" and llava[2:5] == ["yes", "json_schema: ignored", "no"]
    latency = float(llava[5].split()[0])
    assert int(llava[6]) >= 1
    assert any(ln.startswith("llava: constraint ignored: answered 'echo: Do not answer") for ln in lines)
    assert any(ln.startswith("llava: concurrency ") and "requests_per_minute 120" in ln for ln in lines)
    assert "[bold red]x" not in out  # the model id is not printed; nothing is read as markup
    assert code == 1 and err.strip() == "1 of 2 annotators need attention: llava"
    assert latency >= 0


def test_probe_names_and_parse_policy(
    tmp_path: Path, servers: tuple[OpenAIServer, OpenAIServer], capsys: pytest.CaptureFixture[str]
) -> None:
    vllm, ollama = servers
    path = write(tmp_path, vllm, ollama)
    path.write_text(
        path.read_text().replace(
            'constrain = "json_schema"', 'constrain = "json_schema"\non_ignored_constraint = "parse"'
        )
    )
    code, out, err = run_cli(["annotate", "probe", path, "--names", "llava", "--burst", "0"], capsys)
    assert code == 0, err
    assert [ln.split()[0] for ln in out.splitlines()][:2] == ["annotator", "llava"]
    assert "qwen" not in out and vllm.hits == 0


def test_a_server_that_answers_hostile_text_is_printed_as_written(
    tmp_path: Path, servers: tuple[OpenAIServer, OpenAIServer], capsys: pytest.CaptureFixture[str]
) -> None:
    vllm, ollama = servers
    ollama.default = Step(status=400, error_message="[bold red]bad[/] \x1b[2J")
    code, out, _ = run_cli(["annotate", "probe", write(tmp_path, vllm, ollama), "--names", "llava"], capsys)
    assert code == 1
    assert "llava: error: http 400: [bold red]bad[/] \\x1b[2J" in out and "\x1b" not in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{d}/missing.toml"], "missing.toml: no such file"),
        (["{d}"], "a folder, not a file"),
        (["{d}/bad.toml"], "not valid TOML"),
        (["{d}/annotators.toml", "--names", "gpt"], "--names 'gpt' is not in"),
        (["{d}/annotators.toml", "--names", ","], "--names ',' names nothing"),
        (["{d}/annotators.toml", "--samples", "0"], "--samples 0: give 1 or more"),
        (["{d}/annotators.toml", "--burst", "-1"], "--burst -1: give 0"),
        (["{d}/temp.toml"], "temperature: give a number from 0"),
    ],
)
def test_bad_files_and_options_are_one_line(
    tmp_path: Path,
    servers: tuple[OpenAIServer, OpenAIServer],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    needle: str,
) -> None:
    vllm, ollama = servers
    write(tmp_path, vllm, ollama)
    (tmp_path / "bad.toml").write_text("[annotators\n")
    write(tmp_path, vllm, ollama, extra='temperature = "none"').rename(tmp_path / "temp.toml")
    write(tmp_path, vllm, ollama)
    code, _, err = run_cli(["annotate", "probe", *(a.replace("{d}", str(tmp_path)) for a in args)], capsys)
    assert_one_line_error(code, err, needle)
    assert vllm.hits == 0 and ollama.hits == 0
