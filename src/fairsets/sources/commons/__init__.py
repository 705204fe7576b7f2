"""Wikimedia Commons: licence, author and image URLs of files, through the MediaWiki API.

For each file the MediaWiki API (``action=query&prop=imageinfo``) gives the original URL, a
thumbnail URL at a requested width, the file page (``descriptionurl``), size, MIME type, SHA-1
and the *extmetadata* that Commons derives from the file page's licence templates:
``LicenseShortName`` (``"CC BY-SA 4.0"``), ``LicenseUrl``, ``Artist`` (HTML), ``Credit``
(HTML), ``AttributionRequired`` (``"true"``/``"false"``) and ``UsageTerms``.

:func:`file_info` asks for up to 50 titles per request (the API returns at most 50 scaled
image URLs per request), follows ``continue``, maps ``normalized`` and ``redirects`` titles back
to the caller's titles, reports ``missing``/``invalid`` files as per-file errors, retries 429/5xx
answers and ``maxlag``/``ratelimited`` API errors (honouring ``Retry-After``) and caches the raw
answers on disk. Every request carries the project User-Agent (Wikimedia's User-Agent policy).

Licences are normalised to SPDX ids with :func:`fairsets.publish.attribution.normalise_license`
(each licence field recognised whole; the fields must agree and none may name a restriction);
the ``license`` step then applies ``licenses/policy.toml`` (CC0, public domain, CC BY, CC BY-SA
allowed; NC, ND and unknown rejected with a reason). :func:`license_row_fields` turns one
answer into the metadata fields a candidate row needs (``license``, ``author``, ``source_url``,
``url``, ``title``, ``attribution_required``).

API:
    * ``COMMONS_API`` — the Commons API endpoint.
    * ``file_title(url_or_title) -> str`` — ``"File:Foo bar.jpg"`` from a title or a Commons URL.
    * ``file_info(titles, *, api_url, width, cache_dir, policy, contact, batch_size, session,
      sleep, progress) -> dict[str, dict]`` — one dict per input title (see :func:`file_info`).
    * ``license_row_fields(info) -> dict`` — the candidate-row fields of one answer.
    * ``commons_image_url(title, width=None) -> str`` — a ``Special:FilePath`` URL, the fallback
      when no API answer exists.

Requires ``requests`` (imported when :func:`file_info` runs without a ``session``).

Modules, one idea each: :mod:`.titles` (file titles and fallback URLs), :mod:`.pages` (reading one
file's answer), :mod:`.api` (the requests) and :mod:`.lookup` (:func:`file_info`).
"""

from __future__ import annotations

# Settings a test may change live in the module that reads them (patch ``api.DEADLINE``,
# ``api.MAX_ANSWER_BYTES``...); the names below are copies for reading.
from .api import COMMONS_API, EXTMETADATA_FIELDS, CommonsError
from .api import DEADLINE as DEADLINE
from .api import MAXLAG as MAXLAG
from .api import TIMEOUT as TIMEOUT
from .lookup import MAX_BATCH as MAX_BATCH
from .lookup import file_info
from .pages import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from .pages import _parse_page as _parse_page
from .pages import license_row_fields
from .titles import COMMONS_FILEPATH as COMMONS_FILEPATH
from .titles import commons_image_url, file_title

__all__ = [
    "COMMONS_API",
    "EXTMETADATA_FIELDS",
    "CommonsError",
    "commons_image_url",
    "file_info",
    "file_title",
    "license_row_fields",
]
