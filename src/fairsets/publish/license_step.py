"""The ``license`` step: normalise each candidate's licence and apply the licence policy.

Runs first (before any pixel work, and before the image is even read or downloaded): a candidate
whose licence the policy does not allow (NC, ND, unknown, missing) is rejected with the reason,
and an allowed one has its ``license`` metadata replaced by the normalised id (the original text
is kept in ``license_text``).

A licence text is recognised whole (see :func:`fairsets.publish.attribution.parse_license`):
"CC BY 4.0 NonCommercial" or "CC0 (non-commercial use only)" is unknown, never CC BY / CC0, and
the reject reason quotes the original text and says what was not understood.

Candidates awaiting manual review (``review = "pending"``, e.g. web-search results) often carry
no exact licence yet: the reviewer supplies it (``fairsets review import`` checks it against the
same policy). They pass this step unless the licence they do carry is identified and refused, or
names a restriction ("non-commercial", "all rights reserved", ...).
"""

from __future__ import annotations

from typing import Any

from fairsets.core.data import Sample
from fairsets.core.licenses import RESTRICTING_PREFIX, parse_license
from fairsets.core.registry import STEPS
from fairsets.core.step import Step, StepContext, StepParams

from .attribution import license_decision, load_policy

__all__ = ["LicenseStep"]


class LicenseParams(StepParams):
    policy: str | None = None
    """Path of a policy TOML (default: the policy that ships with fairsets, ``licenses/policy.toml``)."""


@STEPS.register("license")
class LicenseStep(Step):
    Params = LicenseParams
    needs_bytes = False

    def __init__(self, params: Any = None) -> None:
        super().__init__(params)
        self._policy = load_policy(self.params.policy)

    def decide(self, text: str | None) -> tuple[str | None, bool, str]:
        """``(spdx, allowed, reason)`` for a licence text under this step's policy."""
        return license_decision(text, self._policy)

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        text = sample.meta.get("license")
        spdx, allowed, reason = self.decide(text)
        pending = sample.meta.get("review") == "pending" and not allowed and spdx is None
        if pending and not parse_license(text)[1].startswith(RESTRICTING_PREFIX):
            sample.annotations["license"] = "deferred to manual review"
            return sample
        if not allowed:
            return sample.reject(self.name, reason)
        sample.meta["license_text"] = text
        sample.meta["license"] = spdx
        return sample
