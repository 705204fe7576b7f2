"""Licence normalisation, policy decisions and ATTRIBUTION.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fairsets.publish.attribution import (
    license_decision,
    license_info,
    load_policy,
    normalise_license,
    render_attribution,
    requires_attribution,
    strip_html,
)


@pytest.mark.parametrize(
    ("text", "spdx"),
    [
        ("CC BY-SA 4.0", "CC-BY-SA-4.0"),
        ("cc-by-4.0", "CC-BY-4.0"),
        ("CC-BY-SA-3.0", "CC-BY-SA-3.0"),
        ("cc by 2.5", "CC-BY-2.5"),
        ("CC BY 4.0.", "CC-BY-4.0"),
        ("cc-by-sa-4", "CC-BY-SA-4.0"),
        ("Attribution-ShareAlike 3.0 Unported", "CC-BY-SA-3.0"),
        ("Creative Commons Attribution 2.0 Generic", "CC-BY-2.0"),
        ("Creative Commons Attribution-Share Alike 4.0 International", "CC-BY-SA-4.0"),
        ("Attribution 4.0 International (CC BY 4.0)", "CC-BY-4.0"),
        ("CC BY-SA 3.0 de", "CC-BY-SA-3.0-DE"),
        ("https://creativecommons.org/licenses/by-sa/2.0/deed.en", "CC-BY-SA-2.0"),
        ("http://creativecommons.org/licenses/by/3.0/nl/", "CC-BY-3.0-NL"),
        ("GFDL, CC BY-SA 3.0", "CC-BY-SA-3.0"),
        ("CC0", "CC0-1.0"),
        ("CC0 1.0", "CC0-1.0"),
        ("cc-zero", "CC0-1.0"),
        ("https://creativecommons.org/publicdomain/zero/1.0/", "CC0-1.0"),
        ("Public domain", "PDM-1.0"),
        ("PD-old-70", "PDM-1.0"),
        ("Public Domain Mark 1.0", "PDM-1.0"),
        ("CC BY-NC-SA 2.0", "CC-BY-NC-SA-2.0"),
        ("CC BY-ND 4.0", "CC-BY-ND-4.0"),
        ("CC BY-SA", None),
        ("CC BY-SA 4.0 de", None),
        ("All rights reserved", None),
        ("GFDL", None),
        ("", None),
        (None, None),
    ],
)
def test_normalise_license(text: str | None, spdx: str | None) -> None:
    assert normalise_license(text) == spdx


@pytest.mark.parametrize(
    ("text", "allowed", "reason"),
    [
        ("CC BY-SA 4.0", True, ""),
        ("CC0", True, ""),
        ("Public domain", True, ""),
        ("CC BY-SA 3.0 de", True, ""),
        ("CC BY-NC 4.0", False, "non-commercial"),
        ("CC BY-NC-SA 4.0", False, "non-commercial"),
        ("CC BY-ND 2.0", False, "no-derivatives"),
        ("unknown", False, "unknown"),
        (None, False, "unknown"),
    ],
)
def test_license_decision(text: str | None, allowed: bool, reason: str) -> None:
    _, ok, why = license_decision(text)
    assert ok is allowed
    assert reason in why


def test_policy_attribution_rules() -> None:
    policy = load_policy()
    assert policy["version"] == 1
    for spdx in ["CC-BY-2.0", "CC-BY-4.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "CC-BY-SA-2.0-UK"]:
        assert requires_attribution(spdx)
    for spdx in ["CC0-1.0", "PDM-1.0"]:
        assert not requires_attribution(spdx)
    info = license_info("CC-BY-SA-3.0-DE")
    assert info["url"] == "https://creativecommons.org/licenses/by-sa/3.0/de/" and info["share_alike"]
    assert license_info("CC-BY-4.0-DE") is None  # 4.0 is not ported


def test_strip_html() -> None:
    assert strip_html('<a href="https://x/User:A">Jane &amp; <b>Doe</b></a>\n  (talk)') == "Jane & Doe (talk)"
    assert strip_html(None) == ""


def test_attribution_file(layout: tuple[Path, dict[str, Any]]) -> None:
    out, info = layout
    text = (out / "ATTRIBUTION.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("- `")]
    credited = {line.split("`")[1] for line in lines}
    published = {r["key"]: r for r in info["rows"]}
    need = {k for k, r in published.items() if r["license"] in ("CC-BY-4.0", "CC-BY-SA-4.0")}
    aug = info["augmented"][0]
    need.add(aug["key"])  # inherits CC BY-SA from its source
    assert credited == need and len(lines) == len(need)  # one line per image, even if in 2 variants
    no_credit = {k for k, r in published.items() if r["license"] in ("CC0-1.0", "PDM-1.0")}
    assert no_credit and not credited & no_credit
    keys = [line.split("`")[1] for line in lines]
    assert keys == sorted(keys)
    assert "<a href" not in text and "Author & 0" in text
    aug_line = next(line for line in lines if line.startswith(f"- `{aug['key']}`"))
    assert f"augmented from `{aug['augmented_from']}`" in aug_line and "CC BY-SA 4.0" in aug_line
    assert "| [CC0 1.0 Universal](https://creativecommons.org/publicdomain/zero/1.0/) | 3 | no |" in text
    assert render_attribution(reversed(info["rows"])) == text  # order of input does not matter
