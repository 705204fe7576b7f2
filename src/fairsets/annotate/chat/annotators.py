"""``annotators.toml``: the chat endpoints that vote on boxes, write captions and judge captions.

Each ``[annotators.NAME]`` table is one OpenAI-compatible chat-completions endpoint
(:class:`fairsets.fetch.chat.ChatEndpoint`: vLLM, llama.cpp's server, Ollama, TGI or a hosted
API)::

    [annotators.qwen]
    base_url = "http://127.0.0.1:8000/v1"
    model = "Qwen/Qwen2.5-VL-7B-Instruct"
    api_key_env = ""            # a local server needs no key
    max_concurrency = 16
    timeout = 120

    [annotators.gpt]
    base_url = "https://api.example.com/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"   # the NAME of the variable holding the key, never the key

A table may also shape its requests for its server (every setting off by default; see
:mod:`fairsets.fetch.chat.endpoint` and docs/vote.md, *Request shaping*)::

    [annotators.o4]
    base_url = "https://api.example.com/v1"
    model = "o4-mini"
    api_key_env = "OPENAI_API_KEY"
    token_limit_field = "max_completion_tokens"   # or "max_tokens" (default)
    temperature = "server-default"                # send none (default: the request's own)
    reasoning = true                              # cut <think>…</think>, budget reasoning_tokens
    constrain = "json_schema"                     # or "choice", "guided_choice", "grammar", "none"
    on_ignored_constraint = "fail"                # or "parse"
    logprobs = true                               # each option letter's probability
    extra_body = {reasoning_effort = "low"}       # any server-specific field

``fairsets annotate probe annotators.toml`` tells what each server answers to these.

Names are what results, logs and ``--a`` / ``--b`` / ``--judge`` / ``--captioner`` call them
(letters, digits, ``_``, ``-`` and ``.``). The file never holds a key: ``api_key_env`` names the
environment variable the key is read from when a batch starts. One file may hold voters, captioners
and judges: :func:`load_voters` takes the tables ``annotate vote --voters`` names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.fetch.chat import ChatEndpoint

from ..layout import ANNOTATOR_NAME, AnnotationError

__all__ = ["Annotators", "load_annotators", "load_voters"]

_MAX_FILE = 1_000_000


@dataclass(frozen=True)
class Annotators:
    """The endpoints of one ``annotators.toml``, by name, in file order."""

    endpoints: dict[str, ChatEndpoint]
    path: Path

    @property
    def names(self) -> list[str]:
        return list(self.endpoints)

    def __iter__(self) -> Iterator[tuple[str, ChatEndpoint]]:
        return iter(self.endpoints.items())

    def __len__(self) -> int:
        return len(self.endpoints)

    def get(self, name: str, option: str = "annotator") -> ChatEndpoint:
        """The endpoint called ``name``; an :class:`AnnotationError` naming the known ones otherwise."""
        if name not in self.endpoints:
            raise AnnotationError(
                f"{option} {name!r} is not in {self.path}; its annotators are {', '.join(self.endpoints)}"
            )
        return self.endpoints[name]

    def pick(self, names: Sequence[str], option: str = "--annotator") -> Annotators:
        """Only ``names`` (in that order); every one must exist."""
        return Annotators({n: self.get(n, option) for n in names}, self.path)


def load_annotators(path: str | os.PathLike[str], *, at_least: int = 1) -> Annotators:
    """Read ``annotators.toml`` (see the module docstring).

    Args:
        path: the file.
        at_least: how many annotators the command needs (a vote needs 2).

    Raises:
        AnnotationError: the file is missing, not TOML, has no ``[annotators.NAME]`` tables, too
            few of them, a bad name, or a table ``ChatEndpoint`` refuses (the message names the
            table and the field, never a value that could be a key).
    """
    p = Path(path)
    if not p.is_file():
        raise AnnotationError(
            f"{p}: no such file; write an annotators.toml with one [annotators.NAME] per model"
        )
    if p.stat().st_size > _MAX_FILE:
        raise AnnotationError(f"{p}: larger than {_MAX_FILE} bytes; is this an annotators.toml?")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AnnotationError(f"{p}: not valid TOML ({exc}); fix the file") from None
    unknown = sorted(set(data) - {"annotators"})
    if unknown:
        raise AnnotationError(
            f"{p}: unknown top-level entries {', '.join(unknown)}; "
            "put each model in an [annotators.NAME] table"
        )
    tables = data.get("annotators")
    if not isinstance(tables, dict) or not tables:
        raise AnnotationError(f"{p}: no [annotators.NAME] tables; add one per model")
    endpoints: dict[str, ChatEndpoint] = {}
    for name, table in tables.items():
        if not ANNOTATOR_NAME.match(name):
            raise AnnotationError(
                f"{p}: annotator name {name[:40]!r} must be letters, digits, '_', '-' or '.' (at most 64)"
            )
        try:
            endpoints[name] = ChatEndpoint.from_dict(table, name=name)
        except ValueError as exc:
            raise AnnotationError(f"{p}: {exc}") from None
    if len(endpoints) < at_least:
        raise AnnotationError(
            f"{p}: {len(endpoints)} annotator(s); this needs at least {at_least} [annotators.NAME] tables"
        )
    return Annotators(endpoints, p)


def load_voters(path: str | os.PathLike[str], voters: Sequence[str] | None = None) -> Annotators:
    """The annotators that vote: the tables ``voters`` names (in that order), or every table.

    Raises:
        AnnotationError: as :func:`load_annotators`; a name not in the file (the message lists the
            file's tables), or fewer than two voters.
    """
    if voters is None:
        return load_annotators(path, at_least=2)
    everyone = load_annotators(path)
    picked = everyone.pick(list(dict.fromkeys(voters)), "--voters")
    if len(picked) < 2:
        raise AnnotationError(
            f"--voters {','.join(picked.names) or '(none)'}: a vote needs at least 2 annotators; "
            f"name 2 or more of {', '.join(everyone.names)}"
        )
    return picked
