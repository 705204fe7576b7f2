"""A removal end to end on the audit example (``builders/example-audit.toml``): build → ``fairsets
remove --identity`` → rebuild. The person is in no shard, table or document; the cell is shrunk (the
example has no spare real image) and the card section and CHANGELOG.md say so; with ``--quota 1``
the cell is refilled from the pool instead; the rebuild is byte-identical in a second folder.

Numbers are recomputed here from the published tables and tars, not from the summary code.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cli_helpers import assert_one_line_error, run_cli
from fairsets.cli import app
from fairsets.publish.card.changes import changes_section

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "builders" / "example-audit.toml"
runner = CliRunner()

pytestmark = pytest.mark.slow


def _build(out: Path, *extra: str) -> None:
    res = runner.invoke(app, ["build", str(RECIPE), "--out", str(out), "-q", *extra])
    assert res.exit_code == 0, res.output


def _rows(out: Path, variant: str) -> list[dict]:
    files = [out / "metadata" / variant / f"{split}.parquet" for split in ("train", "test")]
    return [r for f in files if f.is_file() for r in pq.read_table(f).to_pylist()]


def _tar_identities(out: Path) -> list[str]:
    found = []
    for tar in sorted((out / "shards").rglob("*.tar")):
        with tarfile.open(tar) as tf:
            for m in tf:
                if m.name.endswith(".json"):
                    found.append(json.loads(tf.extractfile(m).read())["identity"])  # type: ignore[union-attr]
    return found


def _published(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".fairsets" not in p.relative_to(out).parts
    }


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    if importlib.util.find_spec("ultralytics") is None:
        pytest.skip("the audit example reads the sample photos of the ultralytics wheel (fairsets[persons])")
    out = tmp_path_factory.mktemp("removals") / "rev1"
    _build(out)
    return out


def test_remove_one_identity_end_to_end(first: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from hub_server import LoopbackHub

    out = tmp_path / "a"
    shutil.copytree(first, out)
    # revision 1 goes to the (loopback) Hub as release v1 before anything is removed
    home = tmp_path / "hf_home"
    home.mkdir()
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_TOKEN", "hf_removals_test_token_0000000000")
    hub = LoopbackHub("hf_removals_test_token_0000000000")
    hub.__enter__()
    hub.use(monkeypatch)
    repo = "org/example-audit"
    code, stdout, err = run_cli(["publish", out, "--repo-id", repo, "--tag", "v1"], capsys)
    assert code == 0, err + stdout
    before = _rows(out, "balanced")
    kerala = sorted({r["identity"] for r in before if r["state"] == "Kerala"})
    assert len(kerala) == 2
    gone = kerala[0]
    real_before = {r["key"] for r in before if r["state"] == "Kerala" and not r["augmented_from"]}

    # bad input: one line, exit 2, nothing recorded
    code, _, err = run_cli(["remove", out, "--identity", "nobody-here", "--reason", "x"], capsys)
    assert_one_line_error(code, err, "unknown identity 'nobody-here'")
    code, _, err = run_cli(["remove", out, "--reason", "consent withdrawn"], capsys)
    assert_one_line_error(code, err, "nothing selected")
    code, _, err = run_cli(["remove", out, "--identity", gone, "--reason", "   "], capsys)
    assert_one_line_error(code, err, "reason is empty")
    code, _, err = run_cli(["remove", tmp_path, "--identity", gone, "--reason", "x"], capsys)
    assert_one_line_error(code, err, "not a built dataset")
    assert not (out / ".fairsets" / "removals.jsonl").exists()

    code, stdout, err = run_cli(["remove", out, "--identity", gone, "--reason", "consent withdrawn"], capsys)
    assert code == 0, err
    assert "1 published real image(s) (state=Kerala: 1)" in stdout
    deny = (out / ".fairsets" / "removals.jsonl").read_text()
    assert gone not in deny  # hashes only

    _build(out)
    after = _rows(out, "balanced")
    assert gone not in {r["identity"] for r in _rows(out, "imbalanced") + after + _rows(out, "augmented")}
    ids = _tar_identities(out)
    assert ids and gone not in ids  # the person is in no shard
    for doc in ("ATTRIBUTION.md", "README.md", "CHANGELOG.md", "croissant.json", "manifest.json"):
        assert gone not in (out / doc).read_text(), doc
    assert gone not in json.dumps(pq.read_table(out / "rejects.parquet").to_pylist())

    # the cell lost one real image (no spare in the pool): shrunk, and the quota still met
    real_after = {r["key"] for r in after if r["state"] == "Kerala" and not r["augmented_from"]}
    assert len(real_before) - len(real_after) == 1
    assert sum(r["state"] == "Kerala" for r in after) == 16 // 2  # quota 8 (train + test)
    manifest = json.loads((out / "manifest.json").read_text())
    rem = manifest["removals"]
    assert rem["revision"] == 2 and rem["requests"] == 1 and rem["reasons"] == {"consent withdrawn": 1}
    assert rem["removed_by_cell"] == {"state=Kerala": 1}
    assert rem["shrunk_cells"] == {"state=Kerala": 1} and rem["refilled_by_cell"] == {}
    changelog = (out / "CHANGELOG.md").read_text()
    assert "## Revision 2" in changelog and "consent withdrawn: 1 request" in changelog
    assert "| state=Kerala | 1 | 0 | 1 | 1 | quota filled with augmentations" in changelog
    lines = changes_section(manifest)
    assert lines[0] == "## Changes and removals" and "This is revision 2" in lines[2]
    assert any("| state=Kerala | 1 | 0 | 1 | 1 |" in line for line in lines)

    # determinism: the same deny list on a fresh copy of revision 1 gives the same bytes
    twin = tmp_path / "b"
    shutil.copytree(first, twin)
    shutil.copy(out / ".fairsets" / "removals.jsonl", twin / ".fairsets" / "removals.jsonl")
    _build(twin)
    assert _published(twin) == _published(out)
    _build(out)  # and again in place
    assert _published(twin) == _published(out)

    # the new revision lands on the Hub as release v2, with its changelog; v1 is left as it was
    try:
        code, stdout, err = run_cli(["publish", out, "--repo-id", repo, "--tag", "v2"], capsys)
        assert code == 0, err + stdout
        v1, v2 = hub.files(repo, "v1"), hub.files(repo, "v2")
        assert hub.resolve(repo, "v2").parent == hub.resolve(repo, "v1").oid  # a new commit on top
    finally:
        hub.__exit__(None, None, None)
    assert "CHANGELOG.md" in v2 and "CHANGELOG.md" not in v1
    assert v2["CHANGELOG.md"] == (out / "CHANGELOG.md").read_bytes()
    assert v2["manifest.json"] == (out / "manifest.json").read_bytes()
    assert all(v2[p] == (out / p).read_bytes() for p in v2 if p.endswith(".tar"))  # the tars read above
    assert not any(gone.encode() in b for p, b in v2.items() if not p.endswith(".tar"))
    assert any(gone.encode() in b for b in v1.values())  # the old release still holds the person


def test_a_cell_with_a_spare_image_is_refilled(tmp_path: Path) -> None:
    if importlib.util.find_spec("ultralytics") is None:
        pytest.skip("the audit example reads the sample photos of the ultralytics wheel (fairsets[persons])")
    out = tmp_path / "q1"
    _build(out, "--quota", "1")  # one balanced image per cell: the cell's other person is a spare
    chosen = [r for r in _rows(out, "balanced") if r["state"] == "Kerala" and not r["augmented_from"]]
    assert len(chosen) == 1
    spare = {r["identity"] for r in _rows(out, "imbalanced") if r["state"] == "Kerala"} - {
        chosen[0]["identity"]
    }
    res = runner.invoke(
        app, ["remove", str(out), "--key", chosen[0]["key"], "--reason", "licence found wrong"]
    )
    assert res.exit_code == 0, res.output
    _build(out, "--quota", "1")
    now = [r for r in _rows(out, "balanced") if r["state"] == "Kerala" and not r["augmented_from"]]
    assert {r["identity"] for r in now} == spare  # the other person took the place
    rem = json.loads((out / "manifest.json").read_text())["removals"]
    assert rem["refilled_by_cell"] == {"state=Kerala": 1} and rem["shrunk_cells"] == {}
    assert "licence found wrong: 1 request" in (out / "CHANGELOG.md").read_text()
