"""Network access: retries with backoff, User-Agent, disk cache, guarded HTTP, URL downloads at scale."""

from .cache import DiskCache
from .retry import (
    HttpStatusError,
    RetryPolicy,
    call_with_deadline,
    call_with_retry,
    parse_retry_after,
    user_agent,
)

__all__ = [
    "DiskCache",
    "HttpStatusError",
    "RetryPolicy",
    "call_with_deadline",
    "call_with_retry",
    "parse_retry_after",
    "user_agent",
]
