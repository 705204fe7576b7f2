"""Every CLI error is one line on stderr (the problem and the fix), exit code 2, no traceback.

Each command of ``fairsets --help`` (and its groups) is given obviously bad input: a missing file, a
folder instead of a file, an empty or binary file, a service on a closed loopback port. Commands
run in-process through the entry point (``fairsets.cli:app``, the console script) except where a
subprocess is the point.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import assert_one_line_error, run_cli

pytestmark = pytest.mark.usefixtures("no_egress")

ROOT = Path(__file__).resolve().parents[1]
BINARY = b"caption\n\xff\xfe\x00\x9c binary"  # line 2, byte offset 8: not UTF-8


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    """A folder of bad inputs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path
    for name in ("bin.txt", "bin.csv", "bin.jsonl", "bin.toml", "bin.npz", "bin.npy", "bin.parquet"):
        (d / name).write_bytes(BINARY)
    (d / "empty.csv").write_bytes(b"")
    (d / "emptydir").mkdir()
    (d / "notds").mkdir()
    (d / "notds" / "file.txt").write_text("not a dataset\n")
    (d / "cap.csv").write_text("caption,country\nA street in Paris,FRA\n")
    (d / "badjson.jsonl").write_text('{"caption": "ok"}\n{"caption": oops}\n')
    (d / "notes.docx").write_text("x")
    (d / "list.jsonl").write_text('["a list, not an object"]\n')
    # published-looking layouts: no samples; no 'state' column
    for name, table in (
        ("nosamples", pa.table({"key": pa.array([], pa.string()), "state": pa.array([], pa.string())})),
        ("noattr", pa.table({"key": ["a", "b"], "gender": ["f", "m"], "site": ["x", "x"]})),
    ):
        (d / name / "metadata" / "balanced").mkdir(parents=True)
        (d / name / "shards" / "balanced").mkdir(parents=True)
        pq.write_table(table, d / name / "metadata" / "balanced" / "test.parquet")
    return d


@pytest.fixture
def no_model_load(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) any model load: bad input must be reported before one."""
    import fairsets.models

    loads: list[str] = []

    def refuse(model: str, *args: Any, **kwargs: Any) -> Any:
        loads.append(model)
        raise AssertionError(f"model {model!r} loaded before the input was checked")

    monkeypatch.setattr(fairsets.models, "load_vlm", refuse)
    return loads


MODEL = ["-m", "ViT-B-32", "--pretrained", "none"]

CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("validate-missing", ["validate", "{d}/missing.toml"], ("missing.toml",)),
    ("validate-binary", ["validate", "{d}/bin.toml"], ("bin.toml",)),
    ("review-export-not-a-build", ["review", "export", "{d}/notds"], ("not a fairsets build folder",)),
    (
        "review-import-not-a-build",
        ["review", "import", "{d}/notds", "{d}/cap.csv"],
        ("not a fairsets build",),
    ),
    (
        "publish-not-a-dataset",
        ["publish", "{d}/notds", "--repo-id", "org/name", "--dry-run"],
        ("nothing was uploaded", "README.md: required file is missing"),
    ),
    ("audit-vlm-not-a-dataset", ["audit", "vlm", "{d}/notds", *MODEL, "-o", "{d}/o"], ("not a published",)),
    ("audit-vlm-missing", ["audit", "vlm", "{d}/missing", *MODEL, "-o", "{d}/o"], ("no such dataset",)),
    ("audit-vlm-no-samples", ["audit", "vlm", "{d}/nosamples", *MODEL, "-o", "{d}/o"], ("holds no samples",)),
    ("audit-vlm-no-attribute", ["audit", "vlm", "{d}/noattr", *MODEL, "-o", "{d}/o"], ("no column 'state'",)),
    (
        "audit-vlm-no-split",
        ["audit", "vlm", "{d}/noattr", *MODEL, "-o", "{d}/o", "--split", "validation"],
        ("no split 'validation'", "--split"),
    ),
    (
        "audit-vlm-binary-prompts",
        ["audit", "vlm", "{d}/noattr", *MODEL, "-o", "{d}/o", "--prompts", "{d}/bin.toml"],
        ("bin.toml",),
    ),
    (
        "audit-vlm-binary-transform",
        [
            "audit",
            "vlm",
            "{d}/noattr",
            *MODEL,
            "-o",
            "{d}/o",
            "--attribute",
            "gender",
            "--debias",
            "{d}/bin.npz",
        ],
        ("bin.npz",),
    ),
    (
        "audit-vlm-out-is-a-file",
        ["audit", "vlm", "{d}/noattr", *MODEL, "-o", "{d}/bin.txt", "--attribute", "gender"],
        ("bin.txt: a file is where the output folder",),
    ),
    (
        "debias-fit-out-is-a-folder",
        ["debias", "fit", "{d}/noattr", *MODEL, "-o", "{d}/emptydir", "--attribute", "gender"],
        ("emptydir: a folder, but the output is a file",),
    ),
    ("audit-utility-empty-folder", ["audit", "utility", "{d}/emptydir", *MODEL], ("sub-folder",)),
    ("audit-utility-missing", ["audit", "utility", "{d}/missing", *MODEL], ("missing",)),
    ("audit-utility-binary-parquet", ["audit", "utility", "{d}/bin.parquet", *MODEL], ("bin.parquet",)),
    (
        "debias-fit-not-a-dataset",
        ["debias", "fit", "{d}/notds", *MODEL, "-o", "{d}/t.npz"],
        ("not a published",),
    ),
    (
        "debias-fit-one-group",
        ["debias", "fit", "{d}/noattr", *MODEL, "-o", "{d}/t.npz", "--attribute", "site", "--split", "test"],
        ("'site' has 1 group(s)", "--attribute"),
    ),
    (
        "debias-fit-bad-method",
        ["debias", "fit", "{d}/noattr", *MODEL, "-o", "{d}/t.npz", "--method", "pca"],
        ("--method must be one of inlp, leace",),
    ),
    (
        "debias-apply-binary",
        ["debias", "apply", "{d}/bin.npz", "{d}/bin.npy", "-o", "{d}/x.npy"],
        ("bin.npz", "not an .npz archive"),
    ),
    (
        "debias-apply-folder",
        ["debias", "apply", "{d}/emptydir", "{d}/bin.npy", "-o", "{d}/x.npy"],
        ("emptydir",),
    ),
    (
        "card-update-not-a-dataset",
        ["card", "update", "{d}/notds", "--audit", "{d}/emptydir"],
        ("no dataset card",),
    ),
    (
        "geo-profile-binary-txt",
        ["geo", "profile", "{d}/bin.txt", "-o", "{d}/p.csv"],
        ("bin.txt: not UTF-8 text (line 2, byte offset 8",),
    ),
    (
        "geo-profile-binary-csv",
        ["geo", "profile", "{d}/bin.csv", "-o", "{d}/p.csv"],
        ("bin.csv: not UTF-8 text (line 2, byte offset 8",),
    ),
    (
        "geo-profile-binary-jsonl",
        ["geo", "profile", "{d}/bin.jsonl", "-o", "{d}/p.csv"],
        ("bin.jsonl: not UTF-8",),
    ),
    (
        "geo-profile-binary-parquet",
        ["geo", "profile", "{d}/bin.parquet", "-o", "{d}/p.csv"],
        ("bin.parquet: not",),
    ),
    (
        "geo-profile-bad-json",
        ["geo", "profile", "{d}/badjson.jsonl", "-o", "{d}/p.csv"],
        ("line 2: not JSON",),
    ),
    (
        "geo-profile-json-list",
        ["geo", "profile", "{d}/list.jsonl", "-o", "{d}/p.csv"],
        ("line 1: one JSON object",),
    ),
    (
        "geo-profile-missing",
        ["geo", "profile", "{d}/missing.txt", "-o", "{d}/p.csv"],
        ("missing.txt: no such",),
    ),
    (
        "geo-profile-format",
        ["geo", "profile", "{d}/notes.docx", "-o", "{d}/p.csv"],
        ("unsupported format .docx",),
    ),
    (
        "geo-profile-out-under-a-file",
        ["geo", "profile", "{d}/cap.csv", "-o", "{d}/bin.txt/p.csv", "-m", "string"],
        ("bin.txt: a file is where a folder must be created",),
    ),
    (
        "geo-profile-no-shards",
        ["geo", "profile", "{d}/emptydir", "-o", "{d}/out"],
        ("no Parquet shards found in",),
    ),
    ("geo-profile-empty-csv", ["geo", "profile", "{d}/empty.csv", "-o", "{d}/p.csv"], ("no caption column",)),
    (
        "geo-evaluate-binary",
        ["geo", "evaluate", "{d}/bin.csv", "--bootstrap", "0"],
        ("bin.csv: not UTF-8 text (line 2, byte offset 8",),
    ),
    ("geo-evaluate-folder", ["geo", "evaluate", "{d}/emptydir"], ("emptydir",)),
    (
        "geo-entity-train-binary",
        ["geo", "entity-train", "{d}/bin.csv", *MODEL, "-o", "{d}/e.npz"],
        ("bin.csv: not UTF-8 text",),
    ),
    (
        "geo-entity-train-empty",
        ["geo", "entity-train", "{d}/empty.csv", *MODEL, "-o", "{d}/e.npz"],
        ("empty file",),
    ),
    (
        "geo-entity-filter-binary-classifier",
        ["geo", "entity-filter", "{d}/cap.csv", "-c", "{d}/bin.npz", "-o", "{d}/f.parquet"],
        ("bin.npz",),
    ),
    (
        "geo-entity-filter-missing-data",
        ["geo", "entity-filter", "{d}/missing.parquet", "-c", "{d}/bin.npz", "-o", "{d}/f.parquet"],
        ("missing.parquet: no such file",),
    ),
    ("geo-analyze-unknown-format", ["geo", "analyze", "{d}/notes.docx", "-o", "{d}/a"], ("notes.docx",)),
    (
        "geo-analyze-binary",
        ["geo", "analyze", "{d}/bin.csv", "-o", "{d}/a"],
        ("bin.csv: not UTF-8 text (line 2, byte offset 8",),
    ),
    (
        "geo-analyze-binary-jsonl",
        ["geo", "analyze", "{d}/bin.jsonl", "-o", "{d}/a"],
        ("bin.jsonl: not UTF-8",),
    ),
    ("geo-analyze-missing", ["geo", "analyze", "{d}/missing", "-o", "{d}/a"], ("missing",)),
    (
        "geo-analyze-binary-reference",
        ["geo", "analyze", "{d}/cap.csv", "-o", "{d}/a", "--reference", "{d}/bin.csv", "--bootstrap", "0"],
        ("bin.csv: not UTF-8 text (line 2",),
    ),
    (
        "fetch-wikidata-binary-states",
        ["fetch", "wikidata", "-o", "{d}/w.parquet", "--states-file", "{d}/bin.csv", "--no-cache"],
        ("bin.csv",),
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("args", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(
    args: list[str],
    needles: tuple[str, ...],
    bad: Path,
    no_model_load: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli([a.replace("{d}", str(bad)) for a in args], capsys)
    assert_one_line_error(code, err, *needles)
    assert no_model_load == []  # the input was checked before any model loaded


# ------------------------------------------------------------------- services that are not there


@pytest.mark.timeout(60)
def test_world_bank_down_fails_fast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    started = time.monotonic()
    code, _, err = run_cli(
        [
            "geo",
            "reference",
            "--year",
            "2022",
            "-o",
            tmp_path / "r.csv",
            "--no-cache",
            "--base-url",
            f"http://127.0.0.1:{port}/v2",
        ],
        capsys,
    )
    assert_one_line_error(code, err, f"cannot reach 127.0.0.1:{port}", "check the network")
    assert time.monotonic() - started < 10  # a refused connection is not retried with backoff


@pytest.mark.timeout(60)
def test_fetch_wikidata_down_fails_fast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    started = time.monotonic()
    code, _, err = run_cli(
        [
            "fetch",
            "wikidata",
            "-o",
            tmp_path / "w.parquet",
            "--no-cache",
            "--endpoint",
            f"http://127.0.0.1:{port}/sparql",
        ],
        capsys,
    )
    assert_one_line_error(code, err, "Connection refused", "check the network")
    assert time.monotonic() - started < 10


@pytest.mark.timeout(60)
def test_llm_endpoint_down_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cap.csv").write_text("caption\nA street in Paris\n")
    port = closed_port()
    args = ["geo", "profile", tmp_path / "cap.csv", "-o", tmp_path / "p.csv", "-m", "llm"]
    code, _, err = run_cli([*args, "-O", f"base_url=http://127.0.0.1:{port}/v1", "-O", "model=m"], capsys)
    line = assert_one_line_error(code, err, f"could not reach the llm endpoint 127.0.0.1:{port}", "base_url")
    assert "please report" not in line  # an expected error, not a bug


@pytest.mark.timeout(120)
def test_build_indicfairface_without_network_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped recipe, its services on a closed loopback port: one line, quickly, no traceback."""
    port = closed_port()
    text = (ROOT / "builders" / "indicfairface.toml").read_text(encoding="utf-8")
    text = text.replace("https://query.wikidata.org/sparql", f"http://127.0.0.1:{port}/sparql")
    text = text.replace("https://commons.wikimedia.org/w/api.php", f"http://127.0.0.1:{port}/w/api.php")
    assert f"127.0.0.1:{port}/sparql" in text
    recipe = tmp_path / "indicfairface.toml"
    recipe.write_text(text, encoding="utf-8")
    (tmp_path / "india_states.csv").write_bytes((ROOT / "builders" / "india_states.csv").read_bytes())
    started = time.monotonic()
    code, _, err = run_cli(["build", recipe, "--out", tmp_path / "out", "--quiet"], capsys)
    assert_one_line_error(
        code, err, "source wikidata: the Wikidata query service", f"127.0.0.1:{port}", "Connection refused"
    )
    assert time.monotonic() - started < 30


@pytest.mark.timeout(120)
def test_pretrained_weights_without_hub_fail_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No network (the hub on a closed loopback port): the error comes at once, not after minutes
    of hub retries, and says how to provide the weights."""
    import importlib.util

    if importlib.util.find_spec("open_clip") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("open_clip is not installed")
    from huggingface_hub import constants
    from PIL import Image

    from fairsets.models import ensure_torchvision, hub

    ensure_torchvision()  # before open_clip imports torchvision
    import open_clip  # noqa: F401  (imports are not what this test times)

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    port = closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # nothing cached
    monkeypatch.setattr(hub, "_probed", {})
    for cls in ("cat", "dog"):
        (tmp_path / "data" / cls).mkdir(parents=True)
        Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / "data" / cls / "a.png")

    started = time.monotonic()
    code, _, err = run_cli(
        ["audit", "utility", tmp_path / "data", "-m", "ViT-B-32", "--pretrained", "openai"], capsys
    )
    elapsed = time.monotonic() - started
    line = assert_one_line_error(code, err, f"127.0.0.1:{port} cannot be reached", "hf download", "HF_HOME")
    assert "--pretrained none" in line
    assert elapsed < 10, f"took {elapsed:.1f}s"
    assert constants.HF_HUB_OFFLINE is False  # the offline switch lasted only for the load


@pytest.mark.timeout(120)
def test_a_corrupt_weights_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged local weights file: named, and never torch's advice to unpickle it unsafely."""
    import importlib.util

    if importlib.util.find_spec("open_clip") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("open_clip is not installed")
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "data" / cls).mkdir(parents=True)
        Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / "data" / cls / "a.png")
    weights = tmp_path / "weights.bin"
    weights.write_bytes(BINARY * 10)
    code, _, err = run_cli(
        ["audit", "utility", tmp_path / "data", "-m", "ViT-B-32", "--pretrained", weights], capsys
    )
    line = assert_one_line_error(
        code, err, f"{weights}: not usable weights for open_clip 'ViT-B-32'", "'none'"
    )
    assert "weights_only" not in line and "offline" not in line.lower()


# ----------------------------------------------------------------------------- the catch-all


@pytest.mark.timeout(60)
def test_unexpected_error_is_one_line_and_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import fairsets._cli_util
    import fairsets.pipeline.config

    def boom() -> None:
        raise RuntimeError("something broke\nsecond line")

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", boom)
    monkeypatch.setattr(fairsets._cli_util, "DEBUG", False)
    monkeypatch.delenv("FAIRSETS_DEBUG", raising=False)
    code, _, err = run_cli(["steps"], capsys)
    line = assert_one_line_error(code, err, "RuntimeError: something broke | second line", "--debug")
    assert "please report it" in line

    code, _, err = run_cli(["--debug", "steps"], capsys)
    assert code == 2
    assert "Traceback (most recent call last)" in err and "in boom" in err
    assert err.strip().splitlines()[-1].startswith("error: RuntimeError: something broke")

    # an expected error under --debug: the line, and the traceback of what was caught
    code, _, err = run_cli(["--debug", "validate", "/nonexistent/recipe.toml"], capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.timeout(60)
def test_known_error_types_get_their_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import fairsets.pipeline.config

    def refused() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", refused)
    code, _, err = run_cli(["steps"], capsys)
    assert_one_line_error(code, err, "network:", "Connection refused", "check the network connection")

    def missing() -> None:
        raise FileNotFoundError(2, "No such file or directory", "/data/x.csv")

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", missing)
    code, _, err = run_cli(["steps"], capsys)
    assert_one_line_error(code, err, "/data/x.csv: No such file or directory; check the path")

    def extra_missing() -> None:
        raise ImportError("the wikidata source needs SPARQLWrapper: pip install 'fairsets[fetch]'")

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", extra_missing)
    code, _, err = run_cli(["steps"], capsys)
    line = assert_one_line_error(code, err, "pip install 'fairsets[fetch]'")
    assert "please report it" not in line and "ImportError" not in line

    def module_missing() -> None:
        raise ModuleNotFoundError("No module named 'yaml'", name="yaml")

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", module_missing)
    code, _, err = run_cli(["steps"], capsys)
    line = assert_one_line_error(code, err, "'yaml' is not installed", "fairsets[all]")
    assert "please report it" not in line


@pytest.mark.timeout(60)
def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import fairsets.pipeline.config

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fairsets.pipeline.config, "_import_components", interrupted)
    code, _, err = run_cli(["steps"], capsys)
    assert code == 130 and "Traceback" not in err


@pytest.mark.timeout(120)
def test_console_script_entry_point_in_a_subprocess(tmp_path: Path) -> None:
    """The real entry point (what the ``fairsets`` script calls) in a fresh interpreter."""
    script = (
        "import sys, fairsets.pipeline.config as c\n"
        "def boom():\n    raise ZeroDivisionError('division by zero')\n"
        "c._import_components = boom\n"
        "from fairsets.cli import app\n"
        "sys.argv[0] = 'fairsets'\n"
        "sys.exit(app())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FAIRSETS_DEBUG"}
    res = subprocess.run(
        [sys.executable, "-c", script, "steps"], capture_output=True, text=True, env=env, timeout=100
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: ZeroDivisionError: division by zero (run with --debug for the traceback; please report it)"
    ]
    res = subprocess.run(
        [sys.executable, "-m", "fairsets", "validate", str(tmp_path / "missing.toml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_unreachable_hosts_are_not_retried_but_drops_are() -> None:
    """The root of the fast failures above: refused / unresolvable / unreachable fail at once."""
    import urllib.error

    from fairsets.fetch.retry import RetryPolicy, call_with_retry, unreachable

    policy = RetryPolicy(attempts=4, backoff=0.01, jitter=0)

    def wrapped_refusal() -> ConnectionError:
        """What the wikidata client raises: a ConnectionError raised while handling urllib's error."""
        try:
            try:
                raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
            except urllib.error.URLError as exc:
                raise ConnectionError(f"http://127.0.0.1:1/: {exc.reason}") from None
        except ConnectionError as wrapped:
            return wrapped

    cases: list[tuple[BaseException, int]] = [
        (ConnectionRefusedError(111, "Connection refused"), 1),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), 1),
        (OSError(101, "Network is unreachable"), 1),
        (ConnectionResetError(104, "Connection reset by peer"), 4),
        (TimeoutError("timed out"), 4),
    ]
    for error, calls_expected in cases:
        calls: list[int] = []
        slept: list[float] = []

        def fail(error: BaseException = error, calls: list[int] = calls) -> None:
            calls.append(1)
            raise error

        with pytest.raises(type(error)):
            call_with_retry(fail, policy, sleep=slept.append)
        assert len(calls) == calls_expected, error
        assert len(slept) == calls_expected - 1
    chained = wrapped_refusal()
    assert isinstance(chained.__context__, urllib.error.URLError)
    assert unreachable(chained)  # found through the exception chain and URLError.reason
    assert not unreachable(ConnectionResetError(104, "reset"))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["build", "r.toml", "--out", ""], "--out is empty"),
        (["audit", "vlm", "ds", "--model", "ViT-B-32", "--out", ""], "--out is empty"),
        (["geo", "analyze", "p.parquet", "--out="], "--out is empty"),
        (["geo", "profile", "c.txt", "--out", "   "], "--out is empty"),
        (["validate", ""], "an argument is empty"),
    ],
)
def test_blank_values_are_refused_not_read_as_the_current_folder(
    args: list[str],
    needle: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, needle)
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


def test_the_cli_runs_without_the_click_package(tmp_path: Path) -> None:
    """typer >= 0.24 ships its own click and no longer installs click: a core install has none."""
    code = (
        "import sys; sys.modules['click'] = None\n"
        "sys.argv = ['fairsets', 'validate', sys.argv[1]]\n"
        "from fairsets.cli import main; main()\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "missing.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_one_line_error(res.returncode, res.stderr, "missing.toml")
