"""A scripted OpenAI-compatible chat server on loopback, for tests of model clients.

It serves ``POST /v1/chat/completions``. Each request is answered by the first of:
``server.respond(body)`` (when set and it returns a :class:`Step`), the next step of
``server.script`` (consumed in order), else ``server.default`` (by default an echo of the last
user text). A :class:`Step` can answer text, an HTTP error with ``Retry-After``, a delay (longer
than the client's timeout: a timeout), a malformed body, a refusal, any usage values (``NaN``,
negative…) or a body given byte for byte (``raw``: deeply nested JSON…).

A hostile server echoes the key: :data:`ECHO_KEY` in a step's ``text``, ``refusal``,
``finish_reason``, ``error_message`` or ``raw`` is replaced by the key the request carried
(``Authorization: Bearer …``), so a test can sweep everything written for it.

Constraints and log-probabilities, as real servers answer them (nothing changes unless set):

* ``honours``: the constraint field the server obeys — ``"structured_outputs"`` (vLLM 0.12 and
  later: ``{"choice": [...]}``), ``"guided_choice"`` (older vLLM), ``"grammar"`` (llama.cpp's GBNF;
  only an alternation of string literals, ``root ::= "A" | "B"``, is understood, anything else is
  a 400 as a grammar llama.cpp cannot parse) or ``"response_format"`` (a JSON schema whose root is
  ``{"enum": [...]}`` or whose ``answer`` property is): the answer a step gives is kept when it is
  allowed, else the first allowed one is answered; under ``response_format`` it is sent as JSON
  (``{"answer": "A"}``, or ``"A"`` for a string schema). ``None`` (default): every constraint is
  ignored, as a server that does not know the field ignores it;
* ``rejects``: request fields answered with a 400 (a server that refuses the field outright);
* ``logprobs``: whether the server answers ``logprobs: true`` with ``choices[0].logprobs`` in the
  OpenAI form: the answer cut into tokens (words, spaces, punctuation), each with its logprob and
  a top list; the step's ``top_logprobs`` (``(token, logprob)`` pairs), when given, is the top
  list of the first word token it lists (past a JSON key), else of the first word token; every
  other top list is the chosen token alone at ``log 0.9``; each cut to the
  ``top_logprobs`` the request asked for. A step's ``logprobs`` is sent as ``choices[0].logprobs``
  as it is, whatever was asked (hostile and other servers' forms).

It records every request: ``bodies`` (parsed JSON), ``headers``, arrival ``times``, the most
requests ever in flight (``max_in_flight``) and, with ``image_dir``, each inline image decoded
to ``image_dir/<n>.<ext>`` (``images`` lists the files)::

    with OpenAIServer(image_dir=tmp_path / "seen") as srv:
        srv.script = [Step(status=429, retry_after="1"), Step(text="a woman")]
        ChatEndpoint(base_url=srv.base_url, model="m")
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import LoopbackServer, Request, Response

__all__ = ["ECHO_KEY", "OpenAIServer", "Step", "last_user_text", "nested_json"]

#: Replaced, in what a :class:`Step` answers, by the key the request was sent with.
ECHO_KEY = "<<the key>>"


def nested_json(depth: int = 100_000) -> bytes:
    """A JSON text nested ``depth`` arrays deep: valid, but deeper than Python's decoder goes."""
    return b"[" * depth + b"]" * depth


@dataclass
class Step:
    """How to answer one request."""

    text: str | None = None  # None: echo the last user text
    status: int = 200
    retry_after: str | None = None
    delay: float = 0.0
    malformed: bool = False  # a 200 whose body is not JSON
    refusal: str | None = None
    finish_reason: str = "stop"
    usage: tuple[Any, Any] | None = (11, 3)  # (prompt, completion) tokens; None: no usage field
    error_message: str = "scripted error"
    raw: bytes | None = None  # the body sent as is (with ``status``), instead of a completion
    headers: dict[str, str] | None = None  # extra response headers (e.g. a Location), ECHO_KEY replaced
    top_logprobs: list[tuple[str, float]] | None = None  # the answer's first word's alternatives
    logprobs: Any = None  # sent as choices[0].logprobs as it is (not None: whatever was asked)


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a request body."""
    for msg in reversed(body.get("messages", [])):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


class OpenAIServer:
    """See the module docstring; use as a context manager, or :meth:`start` / :meth:`stop`."""

    path = "/v1/chat/completions"

    def __init__(self, image_dir: Path | None = None) -> None:
        self.script: list[Step] = []
        self.respond: Callable[[dict[str, Any]], Step | None] | None = None
        self.default = Step()
        self.honours: str | None = None
        self.rejects: frozenset[str] = frozenset()
        self.logprobs = False
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self.images: list[Path] = []
        self.image_dir = image_dir
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._srv = LoopbackServer()
        self._srv.route(self.path, self._handle)
        self.base_url = self._srv.url("/v1")

    @property
    def hits(self) -> int:
        with self._lock:
            return len(self.bodies)

    def start(self) -> OpenAIServer:
        self._srv.__enter__()
        return self

    def stop(self) -> None:
        self._srv.__exit__(None, None, None)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _save_images(self, body: dict[str, Any]) -> None:
        for msg in body.get("messages", []):
            content = msg.get("content")
            for part in content if isinstance(content, list) else []:
                url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
                if not url.startswith("data:"):
                    continue
                head, _, payload = url.partition(",")
                ext = head.removeprefix("data:").split(";")[0].split("/")[-1] or "bin"
                with self._lock:
                    path = self.image_dir / f"{len(self.images)}.{ext}"  # type: ignore[operator]
                    self.images.append(path)
                path.write_bytes(base64.b64decode(payload))

    def _step(self, body: dict[str, Any]) -> Step:
        if self.respond is not None:
            step = self.respond(body)
            if step is not None:
                return step
        with self._lock:
            if self.script:
                return self.script.pop(0)
        return self.default

    def _handle(self, req: Request) -> Response:
        try:
            body = json.loads(req.body.decode("utf-8"))
        except ValueError:
            return Response(400, {"Content-Type": "application/json"}, b'{"error": {"message": "bad json"}}')
        with self._lock:
            self.bodies.append(body)
            self.headers.append(dict(req.headers))
            self.times.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.image_dir is not None:
                self.image_dir.mkdir(parents=True, exist_ok=True)
                self._save_images(body)
            step = self._step(body)
            if step.delay:
                time.sleep(step.delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        return self._answer(_echo(step, req.headers.get("Authorization", "")), body)

    def _answer(self, step: Step, body: dict[str, Any]) -> Response:
        json_type = {"Content-Type": "application/json"}
        json_type |= step.headers or {}
        if step.raw is not None:
            return Response(step.status, json_type, step.raw)
        refused = sorted(set(body) & set(self.rejects))
        if refused and step.status == 200:
            step = _replace(step, status=400, error_message=f"unsupported field: {refused[0]}")
        if step.status != 200:
            headers = dict(json_type)
            if step.retry_after is not None:
                headers["Retry-After"] = step.retry_after
            err = {"error": {"message": step.error_message, "type": "scripted"}}
            return Response(step.status, headers, json.dumps(err).encode())
        if step.malformed:
            return Response(200, json_type, b'{"choices": [ {"message": ')
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if step.refusal is not None:
            message["refusal"] = step.refusal
        else:
            text = step.text if step.text is not None else f"echo: {last_user_text(body)}"
            try:
                message["content"] = self._constrained(text, body)
            except ValueError as exc:
                err = {"error": {"message": str(exc), "type": "invalid_request_error"}}
                return Response(400, json_type, json.dumps(err).encode())
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": step.finish_reason}
        if step.logprobs is not None:
            choice["logprobs"] = step.logprobs
        elif self.logprobs and body.get("logprobs") is True and isinstance(message["content"], str):
            choice["logprobs"] = _logprobs(message["content"], step.top_logprobs, body.get("top_logprobs"))
        out: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.bodies)}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [choice],
        }
        if step.usage is not None:
            p, c = step.usage
            total = p + c if all(type(v) in (int, float) for v in (p, c)) else None
            out["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": total}
        return Response(200, json_type, json.dumps(out).encode())  # NaN and Infinity as Python writes them

    def _constrained(self, text: str, body: dict[str, Any]) -> str:
        """``text`` as a server that honours :attr:`honours` answers it (``ValueError``: a 400)."""
        field = self.honours
        if field is None or field not in body:
            return text
        value = body[field]
        if field == "structured_outputs":
            allowed = value.get("choice") if isinstance(value, dict) else None
        elif field == "guided_choice":
            allowed = value
        elif field == "grammar":
            allowed = _grammar_choices(value)
        else:
            return _json_answer(text, value)
        if not isinstance(allowed, list) or not allowed or not all(isinstance(a, str) for a in allowed):
            raise ValueError(f"{field}: expected a list of choices")
        return text if text in allowed else allowed[0]


def _replace(step: Step, **changes: Any) -> Step:
    import dataclasses

    return dataclasses.replace(step, **changes)


_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _grammar_choices(grammar: Any) -> list[str]:
    """The literals of ``root ::= "A" | "B"``; ``ValueError`` for any other grammar."""
    head, sep, rule = grammar.partition("::=") if isinstance(grammar, str) else ("", "", "")
    alternatives = [a.strip() for a in rule.split("|")]
    if head.strip() != "root" or not sep or not all(_LITERAL.fullmatch(a) for a in alternatives):
        raise ValueError("failed to parse grammar")
    return [json.loads(a) for a in alternatives]  # a GBNF literal of these escapes is a JSON string


def _json_answer(text: str, response_format: Any) -> str:
    """``text`` (or the first allowed answer) as JSON the request's schema allows."""
    try:
        schema = response_format["json_schema"]["schema"]
        inner = schema["properties"]["answer"] if schema.get("type") == "object" else schema
        allowed = inner["enum"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"response_format: unsupported schema ({exc})") from None
    answer = text if text in allowed else allowed[0]
    return json.dumps({"answer": answer} if inner is not schema else answer)


def _logprobs(content: str, top: list[tuple[str, float]] | None, asked: Any) -> dict[str, Any]:
    """``choices[0].logprobs`` in the OpenAI form for ``content`` (see the module docstring)."""
    n = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else 1
    tokens = re.findall(r"\w+|\s+|[^\w\s]+", content) or [content]
    listed = {t.strip() for t, _ in top or []}
    words = [i for i, t in enumerate(tokens) if re.match(r"\w", t)] or [0]
    first_word = next((i for i in words if tokens[i] in listed), words[0])
    entries = []
    for i, tok in enumerate(tokens):
        alternatives = top if i == first_word and top is not None else [(tok, math.log(0.9))]
        own = dict(alternatives).get(tok, -0.01)
        entries.append(
            {
                "token": tok,
                "logprob": own,
                "bytes": list(tok.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives[:n]
                ],
            }
        )
    return {"content": entries}


def _echo(step: Step, authorization: str) -> Step:
    """``step`` with :data:`ECHO_KEY` replaced by the key of ``authorization``."""
    import dataclasses

    key = authorization.removeprefix("Bearer ")
    texts = {
        name: getattr(step, name).replace(ECHO_KEY, key)
        for name in ("text", "refusal", "finish_reason", "error_message")
        if isinstance(getattr(step, name), str)
    }
    raw = step.raw.replace(ECHO_KEY.encode(), key.encode()) if step.raw is not None else None
    headers = {k: v.replace(ECHO_KEY, key) for k, v in (step.headers or {}).items()} or None
    return dataclasses.replace(step, **texts, raw=raw, headers=headers)
