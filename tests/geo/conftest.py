"""Fixtures the geo tests share."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def offline() -> Any:
    """The ``offline`` method with its defaults, built once per test module."""
    from fairsets.geo.methods import get_method

    return get_method("offline")
