"""``fairsets publish`` with the real ``huggingface_hub`` client against a Hub on loopback
(``tests/hub_server.py``), for a built face dataset and for an annotation folder.

What the Hub received is checked against the folder's own manifest (sha256 recomputed here on
the bytes that arrived), an upload that fails half-way is re-run and must send only what is
missing, a second release lands as a new commit with its own tag, and the token travels only in
the Authorization header of the API calls: in no path, query, body, other header, file or log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from annotate.publish_ann import make_ann
from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.layout import KIND
from fairsets.annotate.publish.dataset import prepared_dir
from fairsets.publish.manifest import MANIFEST, file_entries, write_manifest
from hub_server import LoopbackHub
from secret_sweep import leaks

TOKEN = "hf_Zq8XwV3kP9mT2rL6nB4cJ7yD1sF5gH0aW"
FACES = "fairsets-test/faces"
PEOPLE = "fairsets-test/people"


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    home = tmp_path / "hf_home"  # the client's own files (token cache, registries) land here
    home.mkdir()
    for var in ("HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with LoopbackHub(TOKEN) as h:
        h.use(monkeypatch)
        yield h


def _arrived(hub: LoopbackHub, repo: str, revision: str, folder: Path) -> None:
    """The files at ``revision`` are exactly the manifest's files plus manifest.json, with the
    manifest's sha256 (recomputed on the bytes that arrived) and the folder's manifest.json."""
    files = hub.files(repo, revision)
    files.pop(".gitattributes")  # the repository's own, from its creation
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    assert sorted(files) == sorted([*manifest["files"], MANIFEST])
    got = {p: hashlib.sha256(b).hexdigest() for p, b in files.items() if p != MANIFEST}
    assert got == {p: e["sha256"] for p, e in manifest["files"].items()}
    assert all(len(files[p]) == e["bytes"] for p, e in manifest["files"].items())
    assert files[MANIFEST] == (folder / MANIFEST).read_bytes()


def _puts(hub: LoopbackHub, since: int) -> list[str]:
    """The LFS objects whose bytes were sent (accepted or refused) after request number ``since``."""
    return [r.path.rsplit("/", 1)[1] for r in hub.server.requests[since:] if r.method == "PUT"]


def _token_only_in_authorization(hub: LoopbackHub) -> None:
    api_calls = 0
    for r in hub.server.requests:
        assert TOKEN not in r.path and TOKEN not in json.dumps(r.query), r.path
        assert TOKEN.encode() not in r.body, r.path
        for k, v in r.headers.items():
            if k.lower() == "authorization":
                assert v == f"Bearer {TOKEN}" and r.method != "PUT", r.path
                api_calls += 1
            else:
                assert TOKEN[:12] not in v, (r.path, k)
        if r.method == "PUT":  # an object upload goes to a presigned URL: no credentials
            assert not any(k.lower() == "authorization" for k in r.headers), r.path
    assert api_calls >= 5  # create, preupload, LFS batch, commit, tag all authenticated


def _error_line(code: int, err: str, *needles: str) -> str:
    """The one ``error:`` line of a failed publish (the client's upload progress bars may precede
    it on stderr), exit code 2, no traceback."""
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and "Traceback" not in err and len(errors) == 1, err
    assert all(n in errors[0] for n in needles), errors[0]
    return errors[0]


#: The person-written facts an annotation folder's card and croissant.json need (``--rai``), so the
#: publish gate (``fairsets card lint``) lets the upload through as a curator's would be.
RAI_TOML = """\
data_use_cases = "Tests of the publish path."
out_of_scope_uses = "Anything else."
data_social_impact = "None: made-up images."
data_release_maintenance_plan = "Rebuilt by each test run."
annotator_demographics = "No human annotators."
contact = "The fairsets maintainers."
recommendations = "Do not use."
source_data_producers = "The test suite."
data_collection_timeframe = "2026-01-01"
"""


def _publish(
    target: Path, repo: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    manifest = target / "manifest.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("kind") == KIND:  # an annotation folder
        rai = target.parent / f"{target.name}.rai.toml"
        rai.write_text(RAI_TOML)
        extra = ("--rai", str(rai), *extra)
    return run_cli(["publish", target, "--repo-id", repo, *extra], capsys)


def _resume_then_tag(
    hub: LoopbackHub,
    target: Path,
    folder: Path,
    repo: str,
    capsys: pytest.CaptureFixture[str],
    fail_after: int,
) -> tuple[str, str]:
    """Publish with the Hub failing after ``fail_after`` objects, re-run, check; return the output."""
    hub.fail_lfs_after = fail_after
    code, _, err = _publish(target, repo, capsys, "--tag", "v1")
    line = _error_line(code, err, "507", "run the same command again to resume")
    assert "Error while uploading" in line and TOKEN[:12] not in line
    first = set(hub.lfs_received)
    assert len(first) == fail_after and hub.lfs_refused
    assert [c.message for c in hub.history(repo)] == ["initial commit"]  # nothing committed
    assert hub.repos[repo].tags == {}  # a failed upload is not tagged

    hub.fail_lfs_after = None
    mark = len(hub.server.requests)
    code, out, err = _publish(target, repo, capsys, "--tag", "v1")
    assert code == 0, err
    second = _puts(hub, mark)
    head = hub.history(repo)[-1]
    lfs_oids = {hashlib.sha256(head.files[p]).hexdigest() for p in head.lfs_paths}
    assert len(lfs_oids) > fail_after  # the failure really was half-way
    # the re-run sent exactly the objects the Hub did not have, each once
    assert sorted(second) == sorted(lfs_oids - first) and not first & set(second)
    assert hub.repos[repo].tags == {"v1": head.oid}
    assert f"as tag v1: {hub.endpoint}/datasets/{repo}" in out.splitlines()[0]
    _arrived(hub, repo, "v1", folder)
    return out, err


def _same_tag_is_refused(
    hub: LoopbackHub, target: Path, folder: Path, repo: str, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """Publishing with the tag of an earlier release is refused before anything is sent.
    Returns the commit that tag names."""
    v1 = hub.repos[repo].tags["v1"]
    mark = len(hub.server.requests)
    code, _, err = _publish(target, repo, capsys, "--tag", "v1")
    _error_line(code, err, "tag 'v1' already exists", v1[:12], "--tag")
    assert not [r for r in hub.server.requests[mark:] if r.method == "PUT" or "/commit/" in r.path]
    return [v1]


@pytest.mark.slow
def test_a_built_dataset_arrives_resumes_and_is_released_twice(
    example_out: Path,
    tmp_path: Path,
    hub: LoopbackHub,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "OUT"
    shutil.copytree(example_out, out)
    printed, errors = _resume_then_tag(hub, out, out, FACES, capsys, fail_after=2)
    (v1,) = _same_tag_is_refused(hub, out, out, FACES, capsys)

    # release 2: the card gains a line (as a corrected card would); the manifest follows it
    card = out / "README.md"
    card.write_text(card.read_text(encoding="utf-8") + "\nRelease 2: the card was corrected.\n")
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    manifest["files"].update(file_entries(out, ["README.md"]))
    write_manifest(out / MANIFEST, manifest)
    mark = len(hub.server.requests)
    code, _, err = _publish(out, FACES, capsys, "--tag", "v2")
    assert code == 0, err
    tags = hub.repos[FACES].tags
    assert set(tags) == {"v1", "v2"} and tags["v1"] == v1 != tags["v2"]
    new = hub.resolve(FACES, "v2")
    assert new.parent == v1 and hub.history(FACES)[-1] is new
    assert sorted(new.regular_paths) == ["README.md", MANIFEST] and new.lfs_paths == []
    assert _puts(hub, mark) == []  # the shards and tables were already there: nothing re-sent
    _arrived(hub, FACES, "v2", out)
    assert b"Release 2" in hub.files(FACES, "v2")["README.md"]
    assert b"Release 2" not in hub.files(FACES, "v1")["README.md"]  # the first release is intact
    assert "fairsets publish: " in (hub.repos[FACES].tag_messages["v2"] or "")

    _token_only_in_authorization(hub)
    logs = printed + errors + capsys.readouterr().err + caplog.text
    assert not leaks(TOKEN, out, tmp_path / "hf_home", text=logs)


@pytest.mark.slow
def test_an_annotation_folder_arrives_resumes_and_is_released_twice(
    tmp_path: Path, hub: LoopbackHub, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ann = tmp_path / "ANN"
    make_ann(ann, n_images=6)
    printed, errors = _resume_then_tag(hub, ann, prepared_dir(ann), PEOPLE, capsys, fail_after=1)
    (v1,) = _same_tag_is_refused(hub, ann, prepared_dir(ann), PEOPLE, capsys)
    first_files = hub.files(PEOPLE, "v1")

    # release 2: the same repository from a larger run of the annotator
    ann2 = tmp_path / "ANN2"
    make_ann(ann2, n_images=9)
    code, _, err = _publish(ann2, PEOPLE, capsys, "--tag", "v2")
    assert code == 0, err
    tags = hub.repos[PEOPLE].tags
    assert tags["v1"] == v1 != tags["v2"] and hub.resolve(PEOPLE, "v2").parent == v1
    _arrived(hub, PEOPLE, "v2", prepared_dir(ann2))
    assert hub.files(PEOPLE, "v1") == first_files
    changed = {p for p, b in hub.files(PEOPLE, "v2").items() if first_files.get(p) != b}
    assert {p for p in changed if p.endswith(".parquet")}  # the tables themselves changed

    _token_only_in_authorization(hub)
    logs = printed + errors + capsys.readouterr().err + caplog.text
    assert not leaks(TOKEN, ann, ann2, tmp_path / "hf_home", text=logs)


def test_a_commit_cut_off_is_resumed_without_sending_the_files_again(
    tmp_path: Path, hub: LoopbackHub, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = tmp_path / "ANN"
    make_ann(ann)
    hub.drop_commits = 1  # every object arrives, then the connection drops during the commit
    code, _, err = _publish(ann, PEOPLE, capsys)
    _error_line(code, err, "upload_folder failed", "run the same command again to resume")
    assert hub.lfs_received and [c.message for c in hub.history(PEOPLE)] == ["initial commit"]
    mark = len(hub.server.requests)
    code, _, err = _publish(ann, PEOPLE, capsys)
    assert code == 0, err
    assert _puts(hub, mark) == []  # every object was already there
    _arrived(hub, PEOPLE, "main", prepared_dir(ann))
    assert len(hub.history(PEOPLE)) == 2


def test_a_bad_tag_is_refused_before_any_call(
    example_out: Path, hub: LoopbackHub, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in ("v1..2", "-v1", "v 1", "v1.lock", "refs/tags/v1"):
        code, _, err = _publish(example_out, FACES, capsys, "--tag", bad)
        assert_one_line_error(code, err, "invalid tag", "e.g. v1.0")
    assert hub.server.requests == []
