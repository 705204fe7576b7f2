"""Publishing to the Hub: dry run, a recording stand-in client, refusals, and no leaked secret.

No test contacts the network: the real client is only used with offline mode forced and its
endpoint pointed at a closed loopback port.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from fairsets.publish import hub
from fairsets.publish.hub import (
    IGNORE_PATTERNS,
    PlannedFile,
    PublishError,
    format_plan,
    format_size,
    publish,
    resolve_token,
    upload_plan,
    validate_repo_id,
)
from fairsets.publish.manifest import MANIFEST

TOKEN = "hf_test_SECRET_123_do_not_leak_4f9a"
REPO = "fairsets-test/example"


def _expected(out: Path) -> dict[str, int]:
    """``{relpath: size on disk}`` of what must be uploaded: the manifest's files + the manifest."""
    files = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["files"]
    return {rel: (out / rel).stat().st_size for rel in [*files, MANIFEST]}


# Signatures of the methods the stand-ins mirror. upload_folder / create_repo / create_branch come
# from the installed huggingface_hub; upload_large_folder (0.25 <= huggingface_hub < 2) is written
# out because the installed version may no longer have it.
def _upload_large_folder_sig(
    self: Any,
    repo_id: str,
    folder_path: str | Path,
    *,
    repo_type: str,
    revision: str | None = None,
    private: bool | None = None,
    allow_patterns: list[str] | str | None = None,
    ignore_patterns: list[str] | str | None = None,
    num_workers: int | None = None,
    print_report: bool = True,
    print_report_every: int = 60,
) -> None: ...


def _signature(name: str) -> inspect.Signature:
    if name == "upload_large_folder":
        return inspect.signature(_upload_large_folder_sig)
    from huggingface_hub import HfApi

    return inspect.signature(getattr(HfApi, name))


class RecordingApi:
    """Stand-in for ``HfApi``: records calls, checks arguments against the real signatures.

    Any other attribute access fails the test (``unexpected`` is also checked afterwards).
    """

    ALLOWED = ("create_repo", "create_branch", "upload_large_folder")

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.unexpected: list[str] = []
        self.fail = fail or {}

    def _record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        assert name in self.ALLOWED, f"unexpected client method {name}"
        _signature(name).bind(self, *args, **kwargs)  # TypeError on an argument the real method lacks
        assert not args, f"{name} should be called with keyword arguments only"
        self.calls.append((name, dict(kwargs)))
        if name in self.fail:
            raise self.fail[name]
        if name == "create_repo":
            return f"https://huggingface.co/datasets/{kwargs['repo_id']}"
        return None

    def create_repo(self, *args: Any, **kwargs: Any) -> Any:
        return self._record("create_repo", args, kwargs)

    def create_branch(self, *args: Any, **kwargs: Any) -> Any:
        return self._record("create_branch", args, kwargs)

    def upload_large_folder(self, *args: Any, **kwargs: Any) -> Any:
        return self._record("upload_large_folder", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self.unexpected.append(name)
        raise AssertionError(f"unexpected client attribute {name}")

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


class RecordingApiV2(RecordingApi):
    """A huggingface_hub >= 2 client: no ``upload_large_folder``, resumable ``upload_folder``."""

    ALLOWED = ("create_repo", "create_branch", "upload_folder")
    upload_large_folder = None  # type: ignore[assignment]  # not callable: absent in this version

    def upload_folder(self, *args: Any, **kwargs: Any) -> Any:
        return self._record("upload_folder", args, kwargs)


# Give the stand-ins the real signatures so that publish() sees what it would see on HfApi.
RecordingApi.upload_large_folder.__signature__ = inspect.signature(_upload_large_folder_sig)  # type: ignore[attr-defined]
with contextlib.suppress(ImportError):  # huggingface_hub is a dev dependency
    RecordingApiV2.upload_folder.__signature__ = _signature("upload_folder")  # type: ignore[attr-defined]


@pytest.fixture()
def no_login(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No token anywhere: no env variable, an empty login cache, no OIDC."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "hf_home"
    home.mkdir()
    monkeypatch.setenv("HF_HOME", str(home))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    return home


@pytest.fixture()
def secret_env(monkeypatch: pytest.MonkeyPatch, no_login: Path) -> str:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return TOKEN


@pytest.fixture()
def copy(example_out: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "OUT"
    shutil.copytree(example_out, dst)
    return dst


def _assert_no_secret(
    secret: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    *texts: str,
    folder: Path,
) -> None:
    out, err = capsys.readouterr()
    assert secret not in caplog.text
    assert all(secret not in r.getMessage() for r in caplog.records)
    assert secret not in out and secret not in err
    for t in texts:
        assert secret not in t
    for p in folder.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


# --- dry run -----------------------------------------------------------------------------------


def test_dry_run_lists_every_file_with_its_size(example_out: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fairsets")
    report = publish(example_out, REPO, dry_run=True)
    expected = _expected(example_out)
    assert {f.path: f.bytes for f in report.files} == expected
    assert [f.path for f in report.files] == sorted(expected)
    assert report.total_bytes == sum(expected.values())
    assert report.dry_run and report.url is None and report.revision == "main" and not report.private
    assert not any(f.path.startswith(".") or "/." in f.path for f in report.files)
    assert (example_out / ".fairsets").is_dir()  # there is a work dir, and it is not in the plan
    assert any(f.path.startswith("shards/") for f in report.files)

    text = format_plan(report)
    lines = text.splitlines()
    assert lines[0].startswith(f"Dry run: would upload {len(expected)} files") and REPO in lines[0]
    for f in report.files:
        (row,) = [line for line in lines if line.split()[:1] == [f.path]]
        assert row.split()[-1] == str(f.bytes) and format_size(f.bytes) in row
    assert lines[-1].split()[:3] == ["total", f"({len(expected)}", "files)"]
    assert lines[-1].split()[-1] == str(report.total_bytes)
    assert ".fairsets" not in text
    assert "would be uploaded" in caplog.text


def test_dry_run_needs_no_token_and_no_client(example_out: Path, no_login: Path) -> None:
    api = RecordingApi()
    report = publish(example_out, REPO, dry_run=True, api=api, private=True, revision="v1")
    assert api.calls == [] and api.unexpected == []
    assert report.private and report.revision == "v1"
    assert "private" in format_plan(report) and "revision v1" in format_plan(report)


def test_plan_matches_manifest_and_hashes(example_out: Path) -> None:
    plan = upload_plan(example_out)
    files = json.loads((example_out / MANIFEST).read_text(encoding="utf-8"))["files"]
    by_path = {f.path: f for f in plan}
    for rel, entry in files.items():
        assert by_path[rel] == PlannedFile(rel, entry["bytes"], entry["sha256"])
    from fairsets.core.atomic import sha256_file

    assert by_path[MANIFEST].sha256 == sha256_file(example_out / MANIFEST)


def test_format_size() -> None:
    assert format_size(0) == "0 B"
    assert format_size(1023) == "1023 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(5 * 1024**3) == "5.0 GiB"


# --- real run against the recording stand-in ---------------------------------------------------


@pytest.mark.parametrize(
    ("api_cls", "revision", "private"),
    [(RecordingApi, "v1", True), (RecordingApi, None, False), (RecordingApiV2, "v2.0", False)],
)
def test_real_run_calls_and_no_leak(
    copy: Path,
    secret_env: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    api_cls: type[RecordingApi],
    revision: str | None,
    private: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    api = api_cls()
    report = publish(copy, REPO, private=private, revision=revision, api=api, num_workers=3)
    plan = [f.path for f in upload_plan(copy)]
    upload = "upload_large_folder" if api_cls is RecordingApi else "upload_folder"

    expected_names = ["create_repo", "create_branch", upload] if revision else ["create_repo", upload]
    assert api.names == expected_names and api.unexpected == []
    calls = dict(api.calls)
    assert calls["create_repo"] == {
        "repo_id": REPO,
        "repo_type": "dataset",
        "private": private,
        "exist_ok": True,
    }
    if revision:
        assert calls["create_branch"] == {
            "repo_id": REPO,
            "repo_type": "dataset",
            "branch": revision,
            "exist_ok": True,
        }
    up = calls[upload]
    assert up["repo_id"] == REPO and up["repo_type"] == "dataset" and up["revision"] == revision
    assert Path(up["folder_path"]) == copy
    assert up["allow_patterns"] == plan
    assert set(IGNORE_PATTERNS) <= set(up["ignore_patterns"])
    if upload == "upload_large_folder":  # takes workers, prints no report, has no commit message
        assert up["num_workers"] == 3 and up["print_report"] is False and "commit_message" not in up
    else:  # huggingface_hub >= 2: upload_folder takes a commit message, no workers
        assert "num_workers" not in up and up["commit_message"].startswith("Upload ")
    assert "token" not in json.dumps([c for _, c in api.calls], default=str).lower()

    assert not report.dry_run and report.files == upload_plan(copy)
    assert report.url is not None and report.url.startswith(f"https://huggingface.co/datasets/{REPO}")
    assert report.url.endswith(f"/tree/{revision}") if revision else report.url.endswith(REPO)
    text = format_plan(report)
    assert text.startswith(f"Uploaded {len(plan)} files") and report.url in text
    print(text)
    _assert_no_secret(secret_env, caplog, capsys, repr(report), text, repr(api.calls), folder=copy)


def test_explicit_token_and_login_cache(no_login: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (no_login / "token").write_text("hf_cached_SECRET_789\n")
    assert resolve_token() == "hf_cached_SECRET_789"
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert resolve_token() == TOKEN
    assert resolve_token("hf_explicit_SECRET") == "hf_explicit_SECRET"
    assert resolve_token("  ") == TOKEN


def test_hub_errors_are_wrapped_without_the_token(
    copy: Path, secret_env: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from huggingface_hub.errors import HfHubHTTPError

    caplog.set_level(logging.DEBUG)
    response = SimpleNamespace(status_code=403, headers={}, request=None)
    err = HfHubHTTPError(f"403 Forbidden: token {secret_env} cannot write to {REPO}", response=response)
    api = RecordingApi(fail={"create_repo": err})
    with pytest.raises(PublishError) as info:
        publish(copy, REPO, api=api)
    msg = str(info.value)
    assert "create_repo failed" in msg and "403" in msg and "write access" in msg and REPO in msg
    assert secret_env not in msg and "***" in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert api.names == ["create_repo"]
    _assert_no_secret(secret_env, caplog, capsys, repr(info.value), folder=copy)


def test_real_client_offline_is_wrapped(
    copy: Path, secret_env: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys
) -> None:
    """The real HfApi, with offline mode forced and a closed loopback endpoint: a clean error."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(PublishError, match="create_repo failed") as info:
        publish(copy, REPO)
    assert secret_env not in str(info.value)
    _assert_no_secret(secret_env, caplog, capsys, repr(info.value), folder=copy)


# --- refusals ----------------------------------------------------------------------------------


def test_tampered_shard_is_refused_before_any_call(copy: Path, secret_env: str) -> None:
    shard = sorted((copy / "shards").rglob("*.tar"))[0]
    rel = shard.relative_to(copy).as_posix()
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    want = json.loads((copy / MANIFEST).read_text(encoding="utf-8"))["files"][rel]["sha256"]

    api = RecordingApi()
    with pytest.raises(PublishError) as info:
        publish(copy, REPO, api=api)
    msg = str(info.value)
    assert rel in msg and want in msg and "nothing was uploaded" in msg
    assert api.calls == [] and api.unexpected == []
    with pytest.raises(PublishError, match=rel):  # a dry run refuses it too
        publish(copy, REPO, dry_run=True)


def test_stray_file_is_an_error_not_skipped(copy: Path, secret_env: str) -> None:
    """Decision: a stray (non-hidden, unlisted) file fails the publish; hidden files are skipped."""
    (copy / "notes.txt").write_text("scratch\n")
    api = RecordingApi()
    with pytest.raises(PublishError, match=r"notes\.txt: on disk but not listed in the manifest"):
        publish(copy, REPO, api=api)
    assert api.calls == []

    (copy / "notes.txt").unlink()
    (copy / ".cache" / "huggingface").mkdir(parents=True)
    (copy / ".cache" / "huggingface" / "state.json").write_text("{}")
    (copy / ".DS_Store").write_bytes(b"\0")
    assert [f.path for f in upload_plan(copy)] == sorted(_expected(copy))


def test_several_problems_are_all_listed(copy: Path) -> None:
    (copy / "stray.bin").write_bytes(b"x")
    (copy / "ATTRIBUTION.md").unlink()
    with pytest.raises(PublishError) as info:
        upload_plan(copy)
    msg = str(info.value)
    assert "stray.bin" in msg and "ATTRIBUTION.md" in msg and "problems" in msg


def test_no_token_is_refused_for_a_real_run(copy: Path, no_login: Path) -> None:
    api = RecordingApi()
    with pytest.raises(PublishError, match="no Hugging Face token: set HF_TOKEN or run `hf auth login`"):
        publish(copy, REPO, api=api)
    assert api.calls == []
    assert publish(copy, REPO, dry_run=True).files == upload_plan(copy)


@pytest.mark.parametrize(
    "repo_id",
    [
        "",
        "name-only",
        "org/",
        "/name",
        "a/b/c",
        "org/na me",
        "org/-name",
        "org/name.",
        "org/na--me",
        "org/na..me",
        "org/name.git",
        "org/" + "x" * 97,
        "org/café",
        "datasets/org/name",
    ],
)
def test_invalid_repo_ids_are_rejected(repo_id: str, example_out: Path) -> None:
    with pytest.raises(PublishError, match="repository id"):
        validate_repo_id(repo_id)
    with pytest.raises(PublishError, match="repository id"):
        publish(example_out, repo_id, dry_run=True)


@pytest.mark.parametrize("repo_id", ["org/name", "Org-1/my_data.v2", " org/name ", "a/" + "x" * 96])
def test_valid_repo_ids(repo_id: str) -> None:
    assert validate_repo_id(repo_id) == repo_id.strip()


@pytest.mark.parametrize("revision", ["", "  ", "a b", "v..1"])
def test_invalid_revision_is_rejected(revision: str, example_out: Path) -> None:
    with pytest.raises(PublishError, match="invalid revision"):
        publish(example_out, REPO, revision=revision, dry_run=True)


def test_module_never_logs_or_reprs_tokens() -> None:
    """The report type has no token field: nothing to leak through its repr."""
    assert "token" not in {f.lower() for f in hub.PublishReport.__dataclass_fields__}


def test_hub_pattern_matching_selects_exactly_the_plan(copy: Path) -> None:
    """huggingface_hub's own filter, on everything in the folder, keeps the plan and nothing else."""
    from huggingface_hub.utils import filter_repo_objects

    (copy / ".cache" / "huggingface" / "upload").mkdir(parents=True)
    (copy / ".cache" / "huggingface" / "upload" / "README.md.metadata").write_text("x")
    (copy / "shards" / "balanced" / ".DS_Store").write_bytes(b"x")
    on_disk = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
    assert any(r.startswith(".fairsets/") for r in on_disk)
    plan = [f.path for f in upload_plan(copy)]
    everything_but_plan = [r for r in on_disk if r not in plan]
    assert everything_but_plan and all(r.startswith(".") or "/." in r for r in everything_but_plan)
    kept = filter_repo_objects(on_disk, allow_patterns=plan, ignore_patterns=list(IGNORE_PATTERNS))
    assert sorted(kept) == plan
    hidden_only = filter_repo_objects(on_disk, ignore_patterns=list(IGNORE_PATTERNS))
    assert sorted(hidden_only) == plan


def test_a_huge_hostile_hub_error_is_cut_to_one_short_line_without_the_token(
    copy: Path, secret_env: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from huggingface_hub.errors import HfHubHTTPError

    other = "hf_" + "Q" * 34  # another token echoed back, and ours cut by the server
    body = (
        f"500 oops {secret_env}\r\n\x1b[31mred\x1b[0m\x07 {other} {secret_env[:-3]}{'A' * 40} "
        + "junk\n" * 400_000
        + f" tail {secret_env}"
    )
    response = SimpleNamespace(status_code=500, headers={}, request=None)
    api = RecordingApi(fail={"create_repo": HfHubHTTPError(body, response=response)})
    with pytest.raises(PublishError) as info:
        publish(copy, REPO, api=api)
    msg = str(info.value)
    assert len(msg) < 700 and "\n" not in msg and "\r" not in msg, msg[:1000]
    assert all(c.isprintable() for c in msg), repr(msg)
    assert "create_repo failed" in msg and "500 oops" in msg and "characters in all" in msg
    assert secret_env not in msg and other not in msg and secret_env[:12] not in msg
    _assert_no_secret(secret_env, caplog, capsys, repr(info.value), folder=copy)
