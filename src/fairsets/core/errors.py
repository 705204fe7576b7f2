"""Marks that error types carry for the command line, so it can print them well without importing
the packages that raise them (the commands' ground, ``fairsets._cli_util``, imports only core).

* :class:`SaysTheFix` — the message already states the problem and the fix: printed as it is
  (a recipe, source, build or model error, a missing optional dependency);
* :class:`NetworkFailure` — an HTTP answer that failed the request: the message gets the hint to
  check the connection and the address.
"""

from __future__ import annotations

__all__ = ["NetworkFailure", "SaysTheFix"]


class SaysTheFix(Exception):
    """An error whose message is written as problem + fix already."""


class NetworkFailure(Exception):
    """A failed HTTP exchange (a status that is not success)."""
