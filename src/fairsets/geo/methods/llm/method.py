"""The ``llm`` method: its options, prompts and provenance (the requests and the answer cache are in
:mod:`~fairsets.geo.methods.llm.batch`, the answer parsing in :mod:`~fairsets.geo.methods.llm.answers`)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ....fetch.cache import DiskCache
from ....fetch.chat import ChatEndpoint
from ..base import GEO_METHODS, GeoMethod
from .answers import MalformedAnswer, _clip, parse_answer
from .batch import _AnswerClient, _Requests

__all__ = ["GEOTAGGER_SYSTEM", "PAPER_PROMPT", "PROMPTS", "LLMMethod"]

log = logging.getLogger(__package__)  # the package's logger, as before the split

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
_UNSET: Any = object()


def _default_cache_dir() -> Path:
    root = os.environ.get(_ENV_CACHE, "").strip()
    return Path(root) / "geo-llm" if root else Path.home() / ".cache" / "fairsets" / "geo-llm"


@GEO_METHODS.register("llm")
class LLMMethod(_Requests, GeoMethod):
    """Caption → country by prompting a chat model behind an OpenAI-compatible endpoint.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; default ``$FAIRSETS_LLM_BASE_URL``.
        model: the served model's name; default ``$FAIRSETS_LLM_MODEL``.
        api_key_env: the *name* of the environment variable holding the key (optional for local
            servers); the key itself is never an option.
        prompt: ``"paper"``, ``"geotagger"`` or a user-message template containing ``{caption}``.
        concurrency: requests in flight at most.
        timeout: seconds per request (connect and read).
        max_retries: retries of a request on 429, 5xx, timeouts and dropped connections (a refused
            connection or unknown host fails at once).
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
        endpoint = ChatEndpoint.from_dict(
            {
                "base_url": self.base_url,
                "model": model,
                "api_key_env": api_key_env,
                "max_concurrency": self.concurrency,
                "timeout": self.timeout,
            },
            name="llm",
        )
        folder = _default_cache_dir() if cache_dir is _UNSET else (Path(cache_dir) if cache_dir else None)
        # the cache key leaves the endpoint out: the same model served elsewhere costs no requests
        self._client = _AnswerClient(
            endpoint,
            cache_dir=folder,
            max_retries=int(max_retries),
            backoff=float(backoff),
            max_wait=float(max_wait),
            key_by_endpoint=False,
            system=system,
            user=user,
        )
        self._where = endpoint.where  # what errors, logs and provenance name
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            (
                "captions",
                "cache_hits",
                "requests",
                "retries",
                "answered",
                "malformed",
                "failed",
                "prompt_tokens",
                "completion_tokens",
            ),
            0,
        )

    @property
    def cache(self) -> DiskCache:
        """The raw-answer cache (its ``folder`` is ``None`` when caching is off)."""
        return self._client.cache

    # -- prompt

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
        with self._lock:
            self._counts["captions"] += len(unique)
        answers, errors = self._ask_all(unique) if unique else ({}, {})

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
