"""annotators.toml: what a user writes, and the one-line errors for what they get wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairsets.annotate.chat.annotators import load_annotators
from fairsets.annotate.layout import AnnotationError

GOOD = """
[annotators.qwen]
base_url = "http://127.0.0.1:8000/v1/"
model = "Qwen/Qwen2.5-VL-7B-Instruct"
api_key_env = ""
max_concurrency = 16
timeout = 30

[annotators.gpt-4o.mini]
base_url = "https://api.example.invalid/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "annotators.toml"
    path.write_text(text)
    return path


def test_tables_become_endpoints_in_file_order(tmp_path: Path) -> None:
    found = load_annotators(_write(tmp_path, GOOD.replace("gpt-4o.mini", "gpt4o")), at_least=2)
    assert found.names == ["qwen", "gpt4o"]
    qwen = found.get("qwen")
    assert (qwen.base_url, qwen.max_concurrency, qwen.timeout, qwen.api_key_env) == (
        "http://127.0.0.1:8000/v1",
        16,
        30.0,
        "",
    )
    assert qwen.chat_url == "http://127.0.0.1:8000/v1/chat/completions"
    assert found.get("gpt4o").label == "gpt4o"
    assert [n for n, _ in found.pick(["gpt4o", "qwen"])] == ["gpt4o", "qwen"]
    with pytest.raises(AnnotationError, match=r"--judge 'llava' is not in .*qwen, gpt4o"):
        found.get("llava", "--judge")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[annotators.a]\nbase_url = 'http://127.0.0.1:1/v1'\nmodel = 'm'\n",
            r"1 annotator\(s\); .*at least 2",
        ),
        ("[annotators.a\n", r"not valid TOML"),
        ("[vote]\nx = 1\n", r"unknown top-level entries vote"),
        ("title = 'x'\n", r"unknown top-level entries title"),
        ("[annotators]\n", r"no \[annotators.NAME\] tables"),
        ("[annotators.a]\nmodel = 'm'\n", r"endpoint 'a': base_url: Field required"),
        ("[annotators.a]\nbase_url = 'ftp://h/v1'\nmodel = 'm'\n", r"base_url must be an http\(s\) URL"),
        (
            "[annotators.a]\nbase_url = 'http://h.invalid/v1'\nmodel = 'm'\ntemprature = 1\n",
            r"temprature: unknown setting",
        ),
        (
            "[annotators.a]\nbase_url = 'http://h.invalid/v1'\nmodel = 'm'\nmax_concurrency = 0\n",
            r"max_concurrency",
        ),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AnnotationError, match=message) as err:
        load_annotators(_write(tmp_path, text), at_least=2)
    assert "\n" not in str(err.value)


def test_a_pasted_key_is_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = "sk-proj-THISISASECRETKEY1234567890"
    text = f"[annotators.a]\nbase_url = 'https://h.invalid/v1'\nmodel = 'm'\napi_key_env = '{secret}'\n"
    with pytest.raises(AnnotationError, match=r"NAME of an environment variable") as err:
        load_annotators(_write(tmp_path, text))
    assert secret not in str(err.value)


def test_credentials_in_the_url_and_hostile_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AnnotationError, match=r"must not carry user:password@") as err:
        load_annotators(
            _write(tmp_path, "[annotators.a]\nbase_url = 'https://u:pw@h.invalid/v1'\nmodel = 'm'\n")
        )
    assert "pw@" not in str(err.value)
    with pytest.raises(AnnotationError, match=r"annotator name .* must be letters"):
        load_annotators(
            _write(tmp_path, "[annotators.'<script>']\nbase_url = 'http://h.invalid/v1'\nmodel = 'm'\n")
        )


def test_missing_folder_and_huge_files(tmp_path: Path) -> None:
    with pytest.raises(AnnotationError, match=r"no such file"):
        load_annotators(tmp_path / "nope.toml")
    with pytest.raises(AnnotationError, match=r"no such file"):
        load_annotators(tmp_path)
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * 1_000_001)
    with pytest.raises(AnnotationError, match=r"larger than"):
        load_annotators(big)
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe[annotators]")
    with pytest.raises(AnnotationError, match=r"not valid TOML"):
        load_annotators(bad)
