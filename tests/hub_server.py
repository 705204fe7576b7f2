"""A Hugging Face Hub on loopback, for tests: the HTTP API the real ``huggingface_hub`` client uses
to publish a dataset, and a store of everything it received.

The protocol is the one the installed client speaks (read from its ``hf_api.py``,
``_commit_api.py`` and ``lfs.py``), with Xet turned off (``HF_HUB_DISABLE_XET=1``: the client
then uploads through the plain LFS "basic" transfer):

- ``POST /api/repos/create``: ``{"name", "organization", "type", "visibility"}``; 409 if it exists.
  A new repository's ``main`` starts with one commit holding ``.gitattributes``, as on the Hub.
- ``POST /api/validate-yaml``: the README's YAML header; 400 with ``errors`` if it does not parse.
- ``POST /api/datasets/ORG/NAME/preupload/REV``: per file ``{"path", "sample", "size"}`` →
  ``{"path", "uploadMode", "shouldIgnore", "oid"}``; ``oid`` (sha256 for LFS files, git blob sha1
  for regular ones) of the file already at that path in REV, so that the client leaves unchanged
  files out of its commit.
- ``POST /datasets/ORG/NAME.git/info/lfs/objects/batch``: the git-lfs batch API; an object already
  stored gets no ``actions`` (the client does not send it again), others an ``upload`` href
  (``PUT /lfs/OID``, no Authorization: a presigned URL on the Hub) and a ``verify`` href
  (``POST .../objects/verify``, authenticated).
- ``POST /api/datasets/ORG/NAME/commit/REV``: NDJSON, a ``header`` line then ``file`` (base64),
  ``lfsFile`` (oid, size: must be stored), ``deletedFile``/``deletedFolder`` lines → a new commit.
- ``POST .../branch/NAME``, ``POST .../tag/REV`` (``{"tag", "message"}``; 409 if it exists),
  ``GET .../refs``, ``GET .../revision/REV``.

Every API call must carry ``Authorization: Bearer <token>`` (401 otherwise); the LFS object
upload carries none. Every request (method, path, query, headers, body) is kept in
``hub.server.requests``. ``hub.fail_lfs_after = N`` makes object uploads beyond the N-th accepted
one fail with 507 (a status the client does not retry), as a quota or a crash half-way would;
``hub.drop_commits = N`` makes the next N commit requests end with the connection closed and no
answer (the client does not retry a commit).

    with LoopbackHub(token) as hub:
        hub.use(monkeypatch)            # HF_ENDPOINT, HF_HUB_DISABLE_XET, online mode
        ...                             # fairsets publish OUT --repo-id org/name
        hub.files("org/name", "main")   # {path: bytes} at that revision
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import yaml

from servers import LoopbackServer, Request, Response, json_response

__all__ = ["Commit", "LoopbackHub", "git_blob_sha1"]

#: Sent as LFS objects, as the Hub's default ``.gitattributes`` for datasets tracks them (and any
#: file with a NUL byte in its first 512 bytes, or of 10 MiB or more).
LFS_SUFFIXES = (".tar", ".parquet", ".arrow", ".jpg", ".jpeg", ".png", ".npz", ".npy", ".gz", ".zip")
LFS_MIN_SIZE = 10 * 1024 * 1024
GITATTRIBUTES = b"".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n".encode() for s in LFS_SUFFIXES)

_REPO = r"/(?P<type>datasets|models|spaces)/(?P<repo>[^/]+/[^/]+)"
_ROUTES = [
    ("POST", r"/api/repos/create", "create_repo"),
    ("POST", r"/api/validate-yaml", "validate_yaml"),
    ("POST", rf"/api{_REPO}/preupload/(?P<rev>[^/]+)", "preupload"),
    ("POST", rf"{_REPO}\.git/info/lfs/objects/batch", "lfs_batch"),
    ("PUT", r"/lfs/(?P<oid>[0-9a-f]{64})", "lfs_put"),
    ("POST", rf"{_REPO}\.git/info/lfs/objects/verify", "lfs_verify"),
    ("POST", rf"/api{_REPO}/commit/(?P<rev>[^/]+)", "push"),
    ("POST", rf"/api{_REPO}/branch/(?P<rev>[^/]+)", "branch"),
    ("POST", rf"/api{_REPO}/tag/(?P<rev>[^/]+)", "tag"),
    ("GET", rf"/api{_REPO}/refs", "refs"),
    ("GET", rf"/api{_REPO}(?:/revision/(?P<rev>[^/]+))?", "info"),
]


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _error(status: int, message: str, code: str | None = None) -> Response:
    return json_response({"error": message}, status, {"X-Error-Code": code} if code else None)


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, bytes]
    #: Paths this commit sent as ``lfsFile`` lines and as base64 ``file`` lines.
    lfs_paths: list[str] = field(default_factory=list)
    regular_paths: list[str] = field(default_factory=list)


@dataclass
class Repo:
    repo_id: str
    type: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    tag_messages: dict[str, str | None] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)


class LoopbackHub:
    """A Hub on 127.0.0.1 that accepts one token (see the module docstring)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.server = LoopbackServer("127.0.0.1")
        self.server.fallback = self._dispatch
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytes] = {}  # sha256 hex -> content, shared by all repositories
        self.lfs_received: list[str] = []  # oids of the object uploads accepted, in order
        self.lfs_refused: list[str] = []  # oids of the object uploads refused by fail_lfs_after
        self.fail_lfs_after: int | None = None
        self.drop_commits = 0
        self._lock = threading.RLock()

    # -- use --------------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self.server.url("").rstrip("/")

    def __enter__(self) -> LoopbackHub:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def env(self) -> dict[str, str]:
        """The environment that points a fresh ``huggingface_hub`` process at this Hub."""
        return {"HF_ENDPOINT": self.endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0"}

    def use(self, monkeypatch: Any) -> None:
        """Point this process's ``huggingface_hub`` at this Hub: the environment, and the constants
        it read from the environment when it was imported."""
        from huggingface_hub import constants

        for k, v in self.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setattr(constants, "ENDPOINT", self.endpoint)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    # -- what arrived -----------------------------------------------------------------------------

    def resolve(self, repo_id: str, revision: str = "main") -> Commit:
        """The commit a branch, a tag or a commit id names."""
        with self._lock:
            repo = self.repos[repo_id]
            oid = repo.branches.get(revision) or repo.tags.get(revision) or revision
            return repo.commits[oid]

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        return dict(self.resolve(repo_id, revision).files)

    def history(self, repo_id: str, branch: str = "main") -> list[Commit]:
        """The commits of a branch, oldest first."""
        with self._lock:
            repo = self.repos[repo_id]
            out, oid = [], repo.branches[branch]
            while oid is not None:
                out.append(repo.commits[oid])
                oid = repo.commits[oid].parent
            return out[::-1]

    # -- dispatch ---------------------------------------------------------------------------------

    def _dispatch(self, req: Request) -> Response:
        for method, pattern, name in _ROUTES:
            m = re.fullmatch(pattern, req.path)
            if m and req.method == method:
                args = {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
                auth = {k.lower(): v for k, v in req.headers.items()}.get("authorization")
                if name != "lfs_put" and auth != f"Bearer {self.token}":
                    return _error(401, "Invalid credentials in Authorization header")
                with self._lock:
                    if "repo" in args:
                        repo = self.repos.get(args["repo"])
                        if repo is None or repo.type + "s" != args["type"]:
                            return _error(404, "Repository not found", "RepoNotFound")
                        args["repo"] = repo
                    args.pop("type", None)
                    return getattr(self, "_" + name)(req, **args)
        return _error(404, f"no such route: {req.method} {req.path}")

    def _json(self, req: Request) -> Any:
        return json.loads(req.body or b"{}")

    def _new_commit(self, repo: Repo, parent: str | None, message: str, files: dict[str, bytes]) -> Commit:
        digest = json.dumps(
            [parent, message, sorted((p, hashlib.sha256(b).hexdigest()) for p, b in files.items())]
        )
        oid = hashlib.sha1(digest.encode()).hexdigest()
        commit = Commit(oid, parent, message, files)
        repo.commits[oid] = commit
        return commit

    def _head(self, repo: Repo, rev: str) -> Commit | None:
        oid = repo.branches.get(rev) or repo.tags.get(rev) or (rev if rev in repo.commits else None)
        return repo.commits.get(oid) if oid else None

    # -- routes -----------------------------------------------------------------------------------

    def _create_repo(self, req: Request) -> Response:
        body = self._json(req)
        repo_id = f"{body['organization']}/{body['name']}"
        if repo_id in self.repos:  # the Hub names the existing repository: exist_ok reads its url
            url = f"{self.endpoint}/{self.repos[repo_id].type}s/{repo_id}"
            return json_response({"error": "You already created this repo", "url": url}, 409)
        repo = Repo(repo_id, body.get("type") or "model", body.get("visibility") == "private")
        first = self._new_commit(repo, None, "initial commit", {".gitattributes": GITATTRIBUTES})
        repo.branches["main"] = first.oid
        self.repos[repo_id] = repo
        return json_response({"url": f"{self.endpoint}/{repo.type}s/{repo_id}", "name": repo_id})

    def _validate_yaml(self, req: Request) -> Response:
        content = self._json(req).get("content", "")
        m = re.match(r"---\n(.*?)\n---\n", content, re.S)
        try:
            meta = yaml.safe_load(m.group(1)) if m else None
        except yaml.YAMLError as e:
            return json_response({"errors": [{"message": f"YAML: {e}"}], "warnings": []}, 400)
        if not isinstance(meta, dict):
            return json_response({"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]})
        return json_response({"errors": [], "warnings": []})

    def _preupload(self, req: Request, repo: Repo, rev: str) -> Response:
        head = self._head(repo, rev)
        if head is None:
            return _error(404, f"Revision Not Found: {rev}", "RevisionNotFound")
        out = []
        for f in self._json(req)["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = f["path"].lower().endswith(LFS_SUFFIXES) or b"\0" in sample or f["size"] >= LFS_MIN_SIZE
            old = head.files.get(f["path"])
            oid = None if old is None else hashlib.sha256(old).hexdigest() if lfs else git_blob_sha1(old)
            out.append(
                {
                    "path": f["path"],
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": oid,
                }
            )
        return json_response({"files": out, "commitOid": head.oid})

    def _lfs_batch(self, req: Request, repo: Repo) -> Response:
        body = self._json(req)
        if body.get("operation") != "upload" or "basic" not in body.get("transfers", ["basic"]):
            return _error(422, "only the basic upload transfer is served here")
        objects = []
        for o in body["objects"]:
            item = {"oid": o["oid"], "size": o["size"]}
            if o["oid"] not in self.lfs:
                verify = f"{self.endpoint}/{repo.type}s/{repo.repo_id}.git/info/lfs/objects/verify"
                item["authenticated"] = True
                item["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs/{o['oid']}"},
                    "verify": {"href": verify},
                }
            objects.append(item)
        return Response(
            200,
            {"Content-Type": "application/vnd.git-lfs+json"},
            json.dumps({"transfer": "basic", "objects": objects}).encode(),
        )

    def _lfs_put(self, req: Request, oid: str) -> Response:
        if self.fail_lfs_after is not None and len(self.lfs_received) >= self.fail_lfs_after:
            self.lfs_refused.append(oid)
            return _error(507, "storage quota exceeded")
        if hashlib.sha256(req.body).hexdigest() != oid:
            return _error(400, "content does not match its oid")
        self.lfs[oid] = req.body
        self.lfs_received.append(oid)
        return Response(200)

    def _lfs_verify(self, req: Request, repo: Repo) -> Response:
        body = self._json(req)
        data = self.lfs.get(body.get("oid", ""))
        if data is None or len(data) != body.get("size"):
            return _error(404, "object not found")
        return json_response({})

    def _push(self, req: Request, repo: Repo, rev: str) -> Response:
        if self.drop_commits > 0:
            self.drop_commits -= 1
            return Response(drop=True)
        branch = rev
        if branch not in repo.branches:
            return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        lines = [json.loads(ln) for ln in req.body.splitlines() if ln.strip()]
        if not lines or lines[0].get("key") != "header":
            return _error(400, "the first line must be the header")
        header = lines[0]["value"]
        parent = repo.commits[repo.branches[branch]]
        if header.get("parentCommit") not in (None, parent.oid):
            return _error(412, "A commit has happened since. Please refresh and try again.")
        files = dict(parent.files)
        lfs_paths, regular_paths = [], []
        for line in lines[1:]:
            key, v = line["key"], line["value"]
            if key == "file":
                files[v["path"]] = base64.b64decode(v["content"])
                regular_paths.append(v["path"])
            elif key == "lfsFile":
                data = self.lfs.get(v["oid"])
                if data is None or ("size" in v and len(data) != v["size"]):
                    return _error(422, f"Your push was rejected: LFS object {v['oid']} is missing")
                files[v["path"]] = data
                lfs_paths.append(v["path"])
            elif key == "deletedFile":
                files.pop(v["path"], None)
            elif key == "deletedFolder":
                prefix = v["path"].rstrip("/") + "/"
                files = {p: b for p, b in files.items() if not p.startswith(prefix)}
            else:
                return _error(400, f"unknown commit line {key!r}")
        commit = self._new_commit(repo, parent.oid, header["summary"], files)
        commit.lfs_paths, commit.regular_paths = lfs_paths, regular_paths
        repo.branches[branch] = commit.oid
        url = f"{self.endpoint}/{repo.type}s/{repo.repo_id}/commit/{commit.oid}"
        return json_response({"commitUrl": url, "commitOid": commit.oid, "pullRequestUrl": None})

    def _branch(self, req: Request, repo: Repo, rev: str) -> Response:
        if rev in repo.branches:
            return _error(409, f"Branch {rev} already exists")
        start = self._head(repo, self._json(req).get("startingPoint") or "main")
        if start is None:
            return _error(404, "Invalid starting point", "RevisionNotFound")
        repo.branches[rev] = start.oid
        return json_response({})

    def _tag(self, req: Request, repo: Repo, rev: str) -> Response:
        body = self._json(req)
        head = self._head(repo, rev)
        if head is None:
            return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        if body["tag"] in repo.tags or body["tag"] in repo.branches:
            return _error(409, f"Tag {body['tag']} already exists")
        repo.tags[body["tag"]] = head.oid
        repo.tag_messages[body["tag"]] = body.get("message")
        return json_response({})

    def _refs(self, req: Request, repo: Repo) -> Response:
        def refs(kind: str, d: dict[str, str]) -> list[dict[str, str]]:
            return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": o} for n, o in sorted(d.items())]

        return json_response(
            {"branches": refs("heads", repo.branches), "converts": [], "tags": refs("tags", repo.tags)}
        )

    def _info(self, req: Request, repo: Repo, rev: str = "main") -> Response:
        head = self._head(repo, rev)
        if head is None:
            return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        siblings = [{"rfilename": p} for p in sorted(head.files)]
        return json_response(
            {"id": repo.repo_id, "sha": head.oid, "private": repo.private, "siblings": siblings}
        )
