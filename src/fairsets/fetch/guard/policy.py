"""What a guarded fetch may reach and accept (:class:`FetchPolicy`), and the relaxed policy for
endpoints the curator configures (:func:`trusted_policy`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class FetchPolicy(BaseModel):
    """What a guarded fetch may reach and accept."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow_loopback: bool = Field(default=False, description="allow 127.0.0.0/8 and ::1 (tests)")
    allow_private: bool = Field(
        default=False,
        description="allow private, link-local, CGNAT (100.64/10), unique-local (fc00::/7), "
        "link-local IPv6 (fe80::/10) and the other blocks the IANA special-purpose registries mark "
        "not globally reachable (192.0.0.0/24, documentation, benchmarking, ...)",
    )
    max_bytes: int = Field(default=20_000_000, ge=1, description="largest body accepted, in bytes")
    max_pixels: int = Field(
        default=40_000_000,
        ge=1,
        description="largest downloaded image accepted, in pixels (width x height from its header, "
        "checked before it is decoded: a 650 kB PNG can decode to gigabytes)",
    )
    timeout: float = Field(default=20, gt=0, description="seconds per connect / socket read")
    deadline: float = Field(
        default=60,
        gt=0,
        description="wall-clock seconds for one download: connect, redirects, headers and body together",
    )
    min_rate: float = Field(
        default=1024,
        ge=0,
        description="least average bytes/s over a download once rate_grace seconds have passed (0: off)",
    )
    rate_grace: float = Field(
        default=20,
        gt=0,
        description="seconds before min_rate applies (connect, a slow first byte; as long as timeout)",
    )
    per_host_rate: float = Field(
        default=5.0,
        ge=0,
        description="requests started per second per host name, at most (0: no limit); shared by the "
        "threads of a process and divided between a download's processes (fetch/guard/hosts.py)",
    )
    per_host_connections: int = Field(
        default=2,
        ge=0,
        description="requests open at once per host name, at most (0: no limit); 2 is Wikimedia's robot "
        "policy for upload.wikimedia.org ('a total concurrency of at most 2')",
    )
    pace_loopback: bool = Field(
        default=False,
        description="apply per_host_rate and per_host_connections to loopback host names too (a local "
        "mirror or test server is otherwise not paced; a command sets it when the limits are given)",
    )
    retry_after_max: float = Field(
        default=60,
        ge=0,
        description="longest pause a 429 (Retry-After) is waited out for; a longer one fails the host's "
        "rows at once (too slow (retry_after)), sending nothing before it ends",
    )
    throttle_retries: int = Field(
        default=3, ge=0, description="times one URL is sent again after a 429 (or a 503 with Retry-After)"
    )
    max_redirects: int = Field(default=5, ge=0, description="redirects followed at most")
    disallowed_directives: tuple[str, ...] = Field(
        default=("noai", "noimageai"), description="X-Robots-Tag directives that forbid our use"
    )
    user_agent_token: str = Field(
        default="fairsets", min_length=1, description="robot name matched in `X-Robots-Tag: <token>: ...`"
    )
    schemes: tuple[str, ...] = Field(default=("http", "https"), description="URL schemes that may be opened")

    @field_validator("disallowed_directives", "schemes")
    @classmethod
    def _lower_all(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v.strip().lower() for v in values if v.strip())

    @field_validator("user_agent_token")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @field_validator("schemes")
    @classmethod
    def _known_schemes(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(values) - {"http", "https"})
        if unknown:
            raise ValueError(f"only http and https can be guarded, not {unknown}")
        return values


def trusted_policy(**overrides: Any) -> FetchPolicy:
    """A policy for API endpoints the curator configures (a query service, a mirror, a local server).

    Such endpoints may be private or loopback (the curator chose them), and their answers are
    not images, so no opt-out directive applies. An answer may take long to start (a query
    being computed), so there is no minimum rate unless asked for; the deadline, byte cap and
    timeout still hold, so no API call can hang on a server that drips or never answers.

    Args:
        **overrides: :class:`FetchPolicy` fields (``timeout``, ``deadline``, ``max_bytes``, ...).
    """
    fields: dict[str, Any] = {
        "allow_loopback": True,
        "allow_private": True,
        "disallowed_directives": (),
        "max_bytes": 200_000_000,
        "min_rate": 0,
    }
    return FetchPolicy(**(fields | overrides))
