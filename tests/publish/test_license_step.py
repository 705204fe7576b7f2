"""The license step: policy-gated, normalised, reasons recorded."""

from __future__ import annotations

import pytest

from fairsets.core.data import Sample
from fairsets.core.step import StepContext, build_step
from fairsets.pipeline.config import _import_components

_import_components()


@pytest.mark.parametrize(
    ("text", "ok", "spdx_or_reason"),
    [
        ("CC BY-SA 4.0", True, "CC-BY-SA-4.0"),
        ("cc0", True, "CC0-1.0"),
        ("Public domain", True, "PDM-1.0"),
        ("CC BY-NC 4.0", False, "CC-BY-NC-4.0"),
        ("CC BY-ND 2.0", False, "CC-BY-ND-2.0"),
        ("All rights reserved", False, "unknown"),
        (None, False, "None"),
    ],
)
def test_license_step(text: str | None, ok: bool, spdx_or_reason: str) -> None:
    step = build_step("license", {})
    s = step.process(Sample(key="k", meta={"license": text}), StepContext())
    assert s.ok is ok
    if ok:
        assert s.meta["license"] == spdx_or_reason and s.meta["license_text"] == text
    else:
        assert s.step == "license" and spdx_or_reason in s.reason


@pytest.mark.parametrize(
    ("text", "deferred"),
    [
        ("", True),
        (None, True),
        ("see the page", True),
        ("CC BY 4.0", False),  # allowed: passes, not deferred
        ("CC BY 4.0 NonCommercial", False),  # names a restriction: rejected now
        ("All rights reserved", False),
        ("CC BY-NC 4.0", False),  # identified and refused
    ],
)
def test_pending_review_defers_only_unknown_licences(text: str | None, deferred: bool) -> None:
    step = build_step("license", {})
    s = step.process(Sample(key="k", meta={"license": text, "review": "pending"}), StepContext())
    assert (s.annotations.get("license") == "deferred to manual review") is deferred
    assert s.ok is (deferred or text == "CC BY 4.0")
    if not s.ok:
        assert repr(text) in s.reason or "CC-BY-NC-4.0" in s.reason
