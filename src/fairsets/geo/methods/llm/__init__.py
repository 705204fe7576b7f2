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

Requests go through the shared chat client (:class:`fairsets.fetch.chat.ChatClient`: concurrency
cap, retries, the key handling above); this package adds the geo prompts, the answer parser, the
cache layout and the batch policy below. :class:`LLMServiceError` is a
:class:`~fairsets.fetch.chat.ChatServiceError`.

Raw answers are cached on disk (key: model, prompt, temperature, max_tokens, caption — not the
endpoint, not the key), so a re-run, or the same model served elsewhere, costs no requests, and a
parser fix applies to cached runs. A malformed answer (no country and no "no") is not cached: it
is never final, the next run asks it again. Answers, errors and logs never hold the key, whole or
in part: the shared client masks every text the server sends before anything clips it. The
layout is unchanged since the first version: existing cache folders stay valid.

Error policy:

* **Per caption** (country ``None`` plus a reason in ``predict_with_errors``; the batch goes
  on): an answer that names no country and is not a "no" (``"malformed answer: '…'"``); a 429 or
  5xx still failing after ``max_retries`` retries (``"http 500 after 3 retries"``; ``Retry-After``
  honoured, otherwise exponential backoff with jitter); other 4xx answers (``"http 400: …"``, e.g.
  a caption beyond the context window); a 200 whose body is not a chat completion
  (``"invalid response: …"``); a refusal by the model (``"refused: …"``); a timeout or dropped
  connection still failing after the retries (``"no answer from host:port within 60s after 3
  retries"``); a refused connection or unknown host, at once (``"cannot connect to host:port: …"``).
* **Whole batch** (:class:`LLMServiceError`; queued requests are cancelled, in-flight retries
  stop, answers already received stay cached so a re-run resumes):

  - any 401 or 403 (bad or missing key), 404 (unknown model, or ``base_url`` not the API root),
    405, or a redirect — these never depend on the caption;
  - ``abort_after`` (default 5) captions *in a row* (in completion order; any answered request
    resets the count) failing for a non-answer reason (everything above except malformed
    answers and refusals): the service is down or misconfigured, and thousands of identical errors would
    help no one;
  - a batch in which no request got any HTTP response at all (connection refused, unknown host,
    timeouts), however small: an unreachable server must not read as "no country".

Malformed answers and refusals never abort a batch: the server works, the model is chatty. When a fatal answer
arrives, the requests it stops end "abandoned": they are never counted as failures, and the batch's
error is always the first fatal answer, whatever order the requests complete in.
"""

from __future__ import annotations

from .answers import MalformedAnswer, parse_answer
from .batch import LLMServiceError
from .method import GEOTAGGER_SYSTEM, PAPER_PROMPT, PROMPTS, LLMMethod  # importing registers ``llm``

__all__ = [
    "GEOTAGGER_SYSTEM",
    "PAPER_PROMPT",
    "PROMPTS",
    "LLMMethod",
    "LLMServiceError",
    "MalformedAnswer",
    "parse_answer",
]
