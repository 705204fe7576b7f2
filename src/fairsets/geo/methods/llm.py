"""Caption → country with a chat LLM behind any OpenAI-compatible endpoint (the paper's Mixtral method).

GeoProfiler maps captions to countries by prompting Mixtral-8x7B Instruct (paper, §3.1 and
Appendix A.4). This method sends one chat request per distinct caption to
``{base_url}/chat/completions`` — vLLM, llama.cpp's server, Ollama, or a hosted API — and
normalises the answer to ISO 3166-1 alpha-3 with :func:`parse_answer`::

    method = get_method("llm", base_url="http://127.0.0.1:8000/v1",
                        model="mistralai/Mixtral-8x7B-Instruct-v0.1")
    method.predict(["Happy boys at Copacabana Beach", "Kitchen and dining space"])
    # ['BRA', None]
    codes, errors = method.predict_with_errors(captions)  # errors[i]: why codes[i] is None, or None

Prompts (``prompt=``):

* ``"paper"`` (default): the paper's Mixtral instruction, one user message (:data:`PAPER_PROMPT`);
* ``"geotagger"``: the system prompt the paper used for llama and gpt-4o
  (:data:`GEOTAGGER_SYSTEM`), with the caption as the user message;
* any other string: a user-message template containing ``{caption}`` (replaced literally, so
  other braces are left alone).

The API key is read from the environment variable *named* by ``api_key_env`` (default
``FAIRSETS_LLM_API_KEY``) when a batch starts and sent as ``Authorization: Bearer``; a local
server needs none. The key is never stored on the object, in :meth:`~GeoMethod.spec`, in
provenance, in cache keys or files, in logs or in error texts (server texts quoted in errors have
it masked). ``base_url`` may not carry ``user:password@``. Redirects are not followed (they
would carry the header elsewhere); a redirect is reported as a misconfiguration.

Raw answers are cached on disk (key: model, prompt, temperature, max_tokens, caption — not the
endpoint, not the key), so a re-run, or the same model served elsewhere, costs no requests, and a
parser fix applies to cached runs.

Error policy:

* **Per caption** (country ``None`` plus a reason in ``predict_with_errors``; the batch goes
  on): an answer that names no country and is not a "no" (``"malformed answer: '…'"``); a 429 or
  5xx still failing after ``max_retries`` retries (``"http 500 after 3 retries"``; ``Retry-After``
  honoured, otherwise exponential backoff with jitter); other 4xx answers (``"http 400: …"``, e.g.
  a caption beyond the context window); a 200 whose body is not a chat completion
  (``"invalid response: …"``); a connection failure or timeout still failing after the retries.
* **Whole batch** (:class:`LLMServiceError`; queued requests are cancelled, in-flight retries
  stop, answers already received stay cached so a re-run resumes):

  - any 401 or 403 (bad or missing key), 404 (unknown model, or ``base_url`` not the API root),
    405, or a redirect — these never depend on the caption;
  - ``abort_after`` (default 5) captions *in a row* (in completion order; any answered request
    resets the count) failing for a non-answer reason (everything above except malformed
    answers): the service is down or misconfigured, and thousands of identical errors would
    help no one;
  - a batch in which no request got any HTTP response at all (connection refused, unknown host,
    timeouts), however small: an unreachable server must not read as "no country".

Malformed answers never abort a batch: the server works, the model is chatty. When a fatal answer
arrives, the requests it stops end "abandoned": they are never counted as failures, and the batch's
error is always the first fatal answer, whatever order the requests complete in.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import json
import logging
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...fetch.cache import DiskCache
from ...fetch.guard import TooSlow, metered_handlers, trusted_policy
from ...fetch.retry import HttpStatusError, RetryPolicy, call_with_retry, user_agent
from ..countries import country_terms, fold, is_none_answer, normalize_country
from .base import GEO_METHODS, GeoMethod

__all__ = [
    "GEOTAGGER_SYSTEM",
    "PAPER_PROMPT",
    "PROMPTS",
    "LLMMethod",
    "LLMServiceError",
    "MalformedAnswer",
    "parse_answer",
]

log = logging.getLogger(__name__)

#: The paper's Mixtral instruction (Appendix A.4), with the PDF's artefacts removed (a Greek
#: "Τ" in "If", line numbers); the space before the comma is the paper's.
PAPER_PROMPT = (
    "Given the caption: {caption} , Identify the country associated with the location mentioned "
    "in the caption. If no location or country is specified, output 'No'. Use the format "
    "'Output: (country name/No)'. The output should only be 'No' or the name of the country."
)

#: The system prompt the paper used for llama and gpt-4o (Appendix A.4; the paper's "coutry" typo
#: corrected). The caption itself is the user message.
GEOTAGGER_SYSTEM = (
    "You are a geotagging agent who tags each given text to a country. The only output you give is "
    "either the country name or 'NO' in case the text cannot be tagged to a country"
)

#: Named prompts: name → (system message or None, user-message template).
PROMPTS: dict[str, tuple[str | None, str]] = {
    "paper": (None, PAPER_PROMPT),
    "geotagger": (GEOTAGGER_SYSTEM, "{caption}"),
}

_ENV_BASE_URL = "FAIRSETS_LLM_BASE_URL"
_ENV_MODEL = "FAIRSETS_LLM_MODEL"
_ENV_KEY = "FAIRSETS_LLM_API_KEY"
_ENV_CACHE = "FAIRSETS_CACHE_DIR"
_CACHE_VERSION = 1
_PROGRESS_MIN = 50  # requests in a batch before a progress bar is worth drawing
_FATAL_STATUSES = frozenset({401, 403, 404, 405})
_UNSET: Any = object()


class MalformedAnswer(ValueError):
    """An LLM answer that names no recognisable country and is not a "no"."""


class LLMServiceError(RuntimeError):
    """The endpoint is misconfigured or unusable (bad key, unknown model, unreachable, failing)."""


# --------------------------------------------------------------------------- answer parsing

_THINK = re.compile(r"<think>.*?(</think>|$)", re.I | re.S)
_OUTPUT = re.compile(r"\boutput\s*:", re.I)
_MARKDOWN = re.compile(r"[*_`#>~]+")
_SEGMENTS = re.compile(r"[,;/|()\[\]{}\n]+")
_WORD = re.compile(r"[^\W_]+(?:[.'’-][^\W_]+)*\.?")
_NO_WORDS = frozenset({"no", "none", "unknown", "nowhere", "not", "cannot", "can't", "unspecified"})
#: Country codes that are also English words: not taken as codes inside a sentence, even in capitals.
_CODE_WORDS = frozenset(
    {
        "am",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "cod",
        "do",
        "fin",
        "gum",
        "in",
        "is",
        "it",
        "lie",
        "mac",
        "mar",
        "me",
        "my",
        "no",
        "pan",
        "per",
        "so",
        "to",
        "ton",
    }
)
_MAX_TERM_WORDS = 7


def _clean(text: str) -> str:
    """Drop markdown, surrounding quotes/brackets and trailing punctuation."""
    text = _MARKDOWN.sub(" ", text).strip()
    while True:
        before = text
        text = text.strip(" \t\"'“”‘’«».,:;!?")
        if len(text) >= 2 and text[0] + text[-1] in ("()", "[]", "{}", "<>"):
            text = text[1:-1]
        if text == before:
            return text


def _is_no(text: str) -> bool:
    """``No``, ``NO.``, ``No country``, ``None specified``, ``Not mentioned``…"""
    if is_none_answer(text):
        return True
    words = fold(text).split()
    return bool(words) and (words[0] in _NO_WORDS or " ".join(words[:2]) == "n a")


def _scan(text: str) -> str | None:
    """The last country named in free text: longest names first; codes only when written upper-case."""
    terms = country_terms()
    words = _WORD.findall(text)
    folded = [fold(w) for w in words]
    found: str | None = None
    i = 0
    while i < len(words):
        step = 1
        for n in range(min(_MAX_TERM_WORDS, len(words) - i), 0, -1):
            key = " ".join(f for f in folded[i : i + n] if f)
            if not key:
                continue
            hit = next((terms[k][key] for k in ("name", "alias", "demonym") if key in terms[k]), None)
            if hit is None and key.startswith("the "):
                hit = next((terms[k][key[4:]] for k in ("name", "alias") if key[4:] in terms[k]), None)
            if hit is None and n == 1:
                letters = words[i].replace(".", "")
                if len(letters) >= 2 and letters.isalpha() and letters.isupper() and key not in _CODE_WORDS:
                    hit = terms["code"].get(key)
            if hit is not None:
                found, step = hit, n
                break
        i += step
    return found


def parse_answer(text: str) -> str | None:
    """Normalise an LLM answer to an ISO alpha-3 code, or ``None`` for a "no country" answer.

    Handles the paper's format and the usual deviations: ``"Output: France"``, ``"France"``,
    ``"Output: (France)"``, ``"**France**"``, ``"'France'."``, ``"Output: No"``, ``"NO"``,
    ``"no."``, ``"United States of America"``, demonyms (``"Brazilian"``), sentences (``"The photo
    was taken in Brazil."``) and places with their country (``"Output: Paris, France"``: the last
    country named wins). ``<think>…</think>`` blocks of reasoning models are ignored.

    Args:
        text: the model's raw answer.

    Returns:
        The ISO 3166-1 alpha-3 code, or ``None`` when the answer says there is no country.

    Raises:
        MalformedAnswer: the answer is empty, or names no country and is not a "no".
    """
    body = _THINK.sub(" ", text or "").strip()
    if not body:
        raise MalformedAnswer("empty answer")
    plain = _MARKDOWN.sub(" ", body)
    marks = list(_OUTPUT.finditer(plain))
    if marks:
        rest = plain[marks[-1].end() :].strip()
        first = rest.splitlines()[0] if rest else ""
    else:
        lines = [ln for ln in plain.splitlines() if ln.strip()]
        first = lines[0] if lines else ""
    for candidate in dict.fromkeys((_clean(first), _clean(plain))):
        if not candidate:
            continue
        if _is_no(candidate):
            return None
        code = normalize_country(candidate)
        if code:
            return code
        for segment in reversed(_SEGMENTS.split(candidate)):
            seg = _clean(segment or "")
            if seg and not _is_no(seg) and (code := normalize_country(seg)):
                return code
        code = _scan(candidate)
        if code:
            return code
    raise MalformedAnswer(f"no country in answer {_clip(body)!r}")


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- the method


@dataclass
class _Outcome:
    """One caption's request: the raw answer, or why there is none."""

    answer: str | None = None
    error: str | None = None
    no_response: bool = False  # never got an HTTP response (refused, unresolvable, timed out)
    abandoned: bool = False  # stopped because the batch is being abandoned: not a failure


class _NoResponse(ConnectionError):
    """No HTTP response: retried by :func:`call_with_retry` like any ``ConnectionError``."""


class _StatusError(HttpStatusError):
    """An HTTP error answer; keeps the server's (masked) message apart for per-caption reasons."""

    def __init__(self, status: int, retry_after: str | None, url: str, detail: str) -> None:
        super().__init__(status, retry_after, url=url, detail=detail)
        self.detail = detail


class _BadResponse(Exception):
    """A 200 whose body is not a chat completion (not retried)."""


class _Aborted(Exception):
    """The batch is being abandoned: stop retrying."""


def _default_cache_dir() -> Path:
    root = os.environ.get(_ENV_CACHE, "").strip()
    return Path(root) / "geo-llm" if root else Path.home() / ".cache" / "fairsets" / "geo-llm"


def _error_detail(body: bytes) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": …}}``), else its text."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _clip(text, 200)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for field in ("message", "detail", "error"):
                if isinstance(err.get(field), str):
                    return _clip(err[field], 200)
        if isinstance(err, str):
            return _clip(err, 200)
        if isinstance(data.get("detail"), str):
            return _clip(data["detail"], 200)
    return _clip(text, 200)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects become errors: a redirected request would carry the key to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@GEO_METHODS.register("llm")
class LLMMethod(GeoMethod):
    """Caption → country by prompting a chat model behind an OpenAI-compatible endpoint.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; default ``$FAIRSETS_LLM_BASE_URL``.
        model: the served model's name; default ``$FAIRSETS_LLM_MODEL``.
        api_key_env: the *name* of the environment variable holding the key (optional for local
            servers); the key itself is never an option.
        prompt: ``"paper"``, ``"geotagger"`` or a user-message template containing ``{caption}``.
        concurrency: requests in flight at most.
        timeout: seconds per request (connect and read).
        max_retries: retries of a request on 429, 5xx, connection errors and timeouts.
        backoff: first retry wait in seconds (doubles each retry, with jitter) when the server
            sends no ``Retry-After``.
        max_wait: cap on one wait, ``Retry-After`` included.
        temperature: sampling temperature (0: greedy, reproducible).
        max_tokens: answer length cap.
        cache_dir: raw-answer cache folder; default ``$FAIRSETS_CACHE_DIR/geo-llm``, else
            ``~/.cache/fairsets/geo-llm``; ``None`` or ``""`` disables caching.
        abort_after: abandon the batch after this many captions in a row fail without an answer
            (0: never); see the module's error policy.
        progress: draw a progress bar for large batches (default: when stderr is a terminal).

    Raises:
        ValueError: ``base_url`` or ``model`` missing, an unusable prompt, or a bad number.
    """

    name = "llm"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = _ENV_KEY,
        prompt: str = "paper",
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_wait: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int = 16,
        cache_dir: str | os.PathLike[str] | None = _UNSET,
        abort_after: int = 5,
        progress: bool | None = None,
    ) -> None:
        base_url = (base_url or os.environ.get(_ENV_BASE_URL, "")).strip()
        if not base_url:
            raise ValueError(
                f"the llm method needs an endpoint: pass base_url= (e.g. 'http://127.0.0.1:8000/v1') "
                f"or set {_ENV_BASE_URL}"
            )
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "base_url must be an http(s) URL with a host, such as 'http://127.0.0.1:8000/v1' "
                f"(got scheme {parts.scheme!r})"
            )
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "base_url must not carry credentials (user:password@host); put the API key in the "
                f"environment variable named by api_key_env (default {_ENV_KEY})"
            )
        model = (model or os.environ.get(_ENV_MODEL, "")).strip()
        if not model:
            raise ValueError(f"the llm method needs a model name: pass model= or set {_ENV_MODEL}")
        if not api_key_env or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
            raise ValueError(
                "api_key_env is the NAME of an environment variable holding the key "
                f"(such as {_ENV_KEY}), not the key itself"
            )
        if isinstance(prompt, str) and prompt in PROMPTS:
            system, user = PROMPTS[prompt]
            prompt_name = prompt
        elif isinstance(prompt, str) and "{caption}" in prompt:
            system, user, prompt_name = None, prompt, "custom"
        else:
            raise ValueError(
                f"prompt must be one of {sorted(PROMPTS)} or a template containing '{{caption}}', "
                f"got {_clip(str(prompt))!r}"
            )
        for label, value, low in (
            ("concurrency", concurrency, 1),
            ("max_tokens", max_tokens, 1),
            ("max_retries", max_retries, 0),
            ("abort_after", abort_after, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
        for label, number in (
            ("timeout", timeout),
            ("backoff", backoff),
            ("max_wait", max_wait),
            ("temperature", temperature),
        ):
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not number >= 0:
                raise ValueError(f"{label} must be a number >= 0, got {number!r}")
        if timeout == 0:
            raise ValueError("timeout must be a positive number of seconds")

        options: dict[str, Any] = {
            "base_url": base_url,
            "model": model,
            "api_key_env": api_key_env,
            "prompt": prompt,
            "concurrency": int(concurrency),
            "timeout": float(timeout),
            "max_retries": int(max_retries),
            "backoff": float(backoff),
            "max_wait": float(max_wait),
            "temperature": float(temperature),
            "max_tokens": int(max_tokens),
            "abort_after": int(abort_after),
            "progress": progress,
        }
        if cache_dir is not _UNSET:
            options["cache_dir"] = os.fspath(cache_dir) if cache_dir else None
        super().__init__(**options)

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.prompt_name = prompt_name
        self.system_prompt = system
        self.user_template = user
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.abort_after = int(abort_after)
        self.retry_policy = RetryPolicy(
            attempts=int(max_retries) + 1, backoff=float(backoff), max_wait=float(max_wait)
        )
        folder = _default_cache_dir() if cache_dir is _UNSET else (Path(cache_dir) if cache_dir else None)
        self.cache = DiskCache(folder)
        self._endpoint = f"{self.base_url}/chat/completions"
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self._where = f"{host}:{parts.port}" if parts.port else host  # what errors, logs, provenance name
        # the timeout is per socket operation; the deadline bounds one whole request (a drip)
        handlers: list[Any] = [
            _NoRedirect(),
            *metered_handlers(trusted_policy(timeout=self.timeout, deadline=2 * self.timeout)),
        ]
        if _is_loopback(parts.hostname):
            handlers.append(urllib.request.ProxyHandler({}))  # a local server is never behind a proxy
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("captions", "cache_hits", "requests", "retries", "answered", "malformed", "failed"), 0
        )

    # -- prompt and cache key

    @property
    def prompt_sha256(self) -> str:
        """SHA-256 of the prompt (system message and user template), for provenance."""
        blob = json.dumps({"system": self.system_prompt, "user": self.user_template}, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def messages(self, caption: str) -> list[dict[str, str]]:
        """The chat messages sent for ``caption``."""
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        out.append({"role": "user", "content": self.user_template.replace("{caption}", caption)})
        return out

    def _cache_key(self, caption: str) -> dict[str, Any]:
        return {
            "v": _CACHE_VERSION,
            "model": self.model,
            "system": self.system_prompt,
            "user": self.user_template,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "caption": caption,
        }

    # -- prediction

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        """One ISO alpha-3 code (or ``None``) per caption, in order; see :meth:`predict_with_errors`."""
        return self.predict_with_errors(captions)[0]

    def predict_with_errors(self, captions: Sequence[str]) -> tuple[list[str | None], list[str | None]]:
        """Codes per caption, and per caption the reason its code is ``None`` because of a failure.

        A ``None`` code with a ``None`` reason is the model saying "no country"; with a reason it is
        a request that failed or an answer that could not be read. Missing or blank captions are
        ``None`` without a request.

        Args:
            captions: the captions, duplicates allowed (each distinct caption is asked once).

        Returns:
            ``(codes, errors)``, both as long as ``captions``.

        Raises:
            LLMServiceError: the endpoint is misconfigured or unusable (see the module's error policy).
        """
        texts = [c if isinstance(c, str) and c.strip() else None for c in captions]
        unique = list(dict.fromkeys(t for t in texts if t is not None))
        answers: dict[str, str] = {}
        errors: dict[str, str] = {}
        for caption in unique:
            raw = self.cache.get(self._cache_key(caption))
            if raw is not None:
                answers[caption] = raw.decode("utf-8")
        todo = [c for c in unique if c not in answers]
        with self._lock:
            self._counts["captions"] += len(unique)
            self._counts["cache_hits"] += len(answers)
        if todo:
            self._run(todo, answers, errors)

        parsed: dict[str, tuple[str | None, str | None]] = {}
        malformed = 0
        for caption in unique:
            if caption in errors:
                parsed[caption] = (None, errors[caption])
                continue
            try:
                parsed[caption] = (parse_answer(answers[caption]), None)
            except MalformedAnswer:
                malformed += 1
                parsed[caption] = (None, f"malformed answer: {_clip(answers[caption])!r}")
        with self._lock:
            self._counts["malformed"] += malformed
            self._counts["failed"] += len(errors)
        if errors or malformed:
            first = next(iter(errors.values()), None) or next(e for _, e in parsed.values() if e)
            log.warning(
                "llm geotagging: %d of %d distinct captions failed, %d malformed answers (e.g. %s)",
                len(errors),
                len(unique),
                malformed,
                first,
            )
        codes = [parsed[t][0] if t is not None else None for t in texts]
        reasons = [parsed[t][1] if t is not None else None for t in texts]
        return codes, reasons

    def _run(self, todo: list[str], answers: dict[str, str], errors: dict[str, str]) -> None:
        """Ask the endpoint about ``todo``, at most ``concurrency`` at a time, applying the error policy."""
        from fairsets.core.progress import Progress

        key = os.environ.get(self.api_key_env, "").strip() or None
        stop = threading.Event()
        log.info("llm geotagging: %d captions to ask %s at %s", len(todo), self.model, self._where)
        bar = Progress(self.options.get("progress")) if len(todo) >= _PROGRESS_MIN else Progress(False)
        in_a_row = 0
        got_response = False
        last_error = ""
        # The first fatal answer (401, 404, redirect, ...), recorded by the worker that got it before it
        # sets ``stop``: the batch's error must be that one, whatever order the futures complete in.
        fatal: list[LLMServiceError] = []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo)), thread_name_prefix="geo-llm")
        futures: dict[Future[_Outcome], str] = {}
        try:
            with bar.stage(f"llm geotagging ({self.model})", len(todo)) as advance:
                futures = {pool.submit(self._ask, c, key, stop, fatal): c for c in todo}
                for fut in as_completed(futures):
                    caption = futures[fut]
                    try:
                        outcome = fut.result()
                    except LLMServiceError as exc:  # a misconfiguration: abort with the first one
                        raise (fatal[0] if fatal else exc) from None
                    advance()
                    if outcome.abandoned:
                        # Only a fatal answer (or this loop giving up) stops the workers; an abandoned
                        # request says nothing about the server and is never counted as a failure.
                        if fatal:
                            raise fatal[0]
                        errors[caption] = "abandoned"
                        continue
                    if outcome.answer is not None:
                        answers[caption] = outcome.answer
                        in_a_row = 0
                        got_response = True
                        continue
                    errors[caption] = last_error = outcome.error or "failed"
                    got_response = got_response or not outcome.no_response
                    in_a_row += 1
                    if self.abort_after and in_a_row >= self.abort_after:
                        if fatal:
                            raise fatal[0]
                        if not got_response:
                            raise self._unreachable(last_error)
                        raise LLMServiceError(
                            f"llm endpoint {self._where} failed {in_a_row} captions in a row "
                            f"(last: {last_error}); stopping the batch — check that the server is up "
                            f"and serves model {self.model!r}"
                        )
            if fatal:
                raise fatal[0]
            if not got_response and len(errors) == len(todo):
                raise self._unreachable(last_error)
        except BaseException:
            stop.set()
            for fut in futures:
                fut.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _unreachable(self, last_error: str) -> LLMServiceError:
        return LLMServiceError(
            f"could not reach the llm endpoint {self._where} ({last_error}); is the server running "
            "and base_url right?"
        )

    def _sleep(self, stop: threading.Event) -> Callable[[float], None]:
        def sleep(seconds: float) -> None:
            if stop.wait(seconds):
                raise _Aborted()

        return sleep

    def _ask(
        self,
        caption: str,
        key: str | None,
        stop: threading.Event,
        fatal: list[LLMServiceError] | None = None,
    ) -> _Outcome:
        """One caption, with retries; caches the raw answer. Raises :class:`LLMServiceError` when fatal.

        A fatal error is appended to ``fatal`` *before* ``stop`` is set, so that whoever sees the other
        workers' requests abandoned can already read the reason.
        """
        payload = {
            "model": self.model,
            "messages": self.messages(caption),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        attempts = 0

        def once() -> str:
            nonlocal attempts
            if stop.is_set():
                raise _Aborted()
            attempts += 1
            with self._lock:
                self._counts["requests"] += 1
            return self._post(body, key)

        outcome: _Outcome
        try:
            answer = call_with_retry(
                once, self.retry_policy, what=f"llm {self._where}", sleep=self._sleep(stop)
            )
        except LLMServiceError as exc:
            if fatal is not None:
                with self._lock:
                    fatal.append(exc)
            stop.set()  # no other worker starts a request once a fatal answer is in
            raise
        except _Aborted:
            outcome = _Outcome(error="abandoned", abandoned=True)
        except _StatusError as exc:
            detail = f"http {exc.status}"
            if attempts > 1:
                detail += f" after {attempts - 1} retries"
            elif exc.status not in self.retry_policy.statuses and exc.detail:
                detail += f": {exc.detail}"
            outcome = _Outcome(error=detail)
        except _NoResponse as exc:
            detail = str(exc) + (f" after {attempts - 1} retries" if attempts > 1 else "")
            outcome = _Outcome(error=detail, no_response=True)
        except _BadResponse as exc:
            outcome = _Outcome(error=f"invalid response: {exc}")
        else:
            self.cache.put(self._cache_key(caption), answer.encode("utf-8"))
            outcome = _Outcome(answer=answer)
        with self._lock:
            self._counts["retries"] += max(0, attempts - 1)
            if outcome.answer is not None:
                self._counts["answered"] += 1
        return outcome

    def _post(self, body: bytes, key: str | None) -> str:
        """POST one chat completion; the answer text, or a classified exception."""

        def mask(text: str) -> str:
            return text.replace(key, "***") if key else text

        req = urllib.request.Request(self._endpoint, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", user_agent())
        if key:
            req.add_unredirected_header("Authorization", f"Bearer {key}")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                detail = mask(_error_detail(exc.read()))
            except (OSError, http.client.HTTPException):
                detail = ""
            finally:
                exc.close()
            if 300 <= status < 400:
                target = urllib.parse.urlsplit(exc.headers.get("Location", "") or "").hostname or "elsewhere"
                raise LLMServiceError(
                    f"llm endpoint {self._where} redirects (HTTP {status} to {target}); set base_url to the "
                    "final address (redirects are not followed so the key is never sent elsewhere)"
                ) from None
            if status in (401, 403):
                sent = (
                    f"the key from ${self.api_key_env} was refused"
                    if key
                    else f"no key was sent (${self.api_key_env} is unset)"
                )
                raise LLMServiceError(
                    f"llm endpoint {self._where} refused the request (HTTP {status}): {sent}"
                    + (f"; server says: {detail}" if detail else "")
                ) from None
            if status in _FATAL_STATUSES:
                raise LLMServiceError(
                    f"llm endpoint {self._where} answered HTTP {status} for "
                    f"{urllib.parse.urlsplit(self._endpoint).path}"
                    + (f" ({detail})" if detail else "")
                    + f"; check the model name {self.model!r} and that base_url is the API root "
                    "(e.g. ending in /v1)"
                ) from None
            raise _StatusError(status, exc.headers.get("Retry-After"), self._where, detail) from None
        except urllib.error.URLError as exc:
            raise _NoResponse(f"cannot connect to {self._where}: {mask(str(exc.reason))}") from None
        except TooSlow as exc:  # the deadline or the minimum rate (a server that drips)
            raise _NoResponse(f"{self._where}: {exc}") from None
        except TimeoutError:
            raise _NoResponse(f"no answer from {self._where} within {self.timeout:g}s") from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise _NoResponse(f"connection to {self._where} failed: {type(exc).__name__}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _BadResponse(f"not JSON: {mask(_clip(raw.decode('utf-8', 'replace'), 60))!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _BadResponse("no choices[0].message.content") from None
        if not isinstance(content, str):
            raise _BadResponse(f"choices[0].message.content is {type(content).__name__}, not text")
        return content

    # -- provenance

    def provenance(self) -> dict[str, Any]:
        """Method, model, prompt (name, SHA-256), endpoint host, sampling settings and counts; no secrets."""
        with self._lock:
            counts = dict(self._counts)
        return {
            "method": self.name,
            "model": self.model,
            "prompt": self.prompt_name,
            "prompt_sha256": self.prompt_sha256,
            "base_url_host": self._where,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "counts": counts,
        }
