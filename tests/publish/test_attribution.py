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
    safe_link_url,
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
    # source images, then published files (augmented copies included): what each count counts is said
    assert "| [CC0 1.0 Universal](https://creativecommons.org/publicdomain/zero/1.0/) | 3 | 3 | no |" in text
    assert "| Source images | Published files (all configs, incl. augmented copies) |" in text
    assert render_attribution(reversed(info["rows"])) == text  # order of input does not matter


@pytest.mark.parametrize(
    ("url", "link"),
    [
        ("https://commons.wikimedia.org/wiki/File:A.jpg", "https://commons.wikimedia.org/wiki/File:A.jpg"),
        ("http://example.org/x?a=1&b=2#f", "http://example.org/x?a=1&b=2#f"),
        ("HTTPS://EXAMPLE.ORG/A", "HTTPS://EXAMPLE.ORG/A"),
        ("https://example.org/Café_(1).jpg", "https://example.org/Caf%C3%A9_%281%29.jpg"),
        ("https://example.org/a)[b](javascript:x)", "https://example.org/a%29%5Bb%5D%28javascript:x%29"),
        ("https://example.org/<script>|`x`", "https://example.org/%3Cscript%3E%7C%60x%60"),
        ("javascript:alert(1)", None),
        ("JavaScript:alert(1)", None),
        ("data:text/html;base64,PHNjcmlwdD4=", None),
        ("file:///etc/passwd", None),
        ("vbscript:msgbox(1)", None),
        ("ftp://example.org/a.jpg", None),
        ("mailto:a@example.org", None),
        ("//example.org/a.jpg", None),
        ("/wiki/File:A.jpg", None),
        (" https://example.org/", None),
        ("https://example.org/a b", None),
        ("https://example.org/a\nb", None),
        ("https://example.org/\x00", None),
        ("https://example.org/\u202e", None),
        ("https://user:pass@example.org/", None),
        ("https://example.org@evil.example/", None),
        ("https://exаmple.org/", None),  # Cyrillic a in the host
        ("https://example.org:99999/", None),
        ("https://", None),
        ("https://example.org/" + "a" * 3000, None),
        ("", None),
        (None, None),
    ],
)
def test_safe_link_url(url: str | None, link: str | None) -> None:
    assert safe_link_url(url) == link


HOSTILE_ROWS = [
    {
        "key": "k_js",
        "license": "CC-BY-4.0",
        "author": "Jane](javascript:alert(1)) &lt;script&gt;alert(2)&lt;/script&gt;",
        "source_url": "javascript:alert(document.cookie)",
        "title": "[click](javascript:alert(3))",
    },
    {"key": "k_data", "license": "CC-BY-SA-4.0", "author": "A", "source_url": "data:text/html,<b>x</b>"},
    {"key": "k_file", "license": "CC-BY-4.0", "author": "B", "source_url": "file:///home/curator/a.jpg"},
    {"key": "k_cred", "license": "CC-BY-4.0", "author": "C", "source_url": "https://u:p@example.org/a.jpg"},
    {"key": "k_ws", "license": "CC-BY-4.0", "author": "D\u202e", "source_url": "https://example.org/a b.jpg"},
    {"key": "k`tick", "license": "CC-BY-4.0", "author": "E\n# heading", "source_url": "vbscript:x"},
    {"key": "k_ok", "license": "CC-BY-4.0", "author": "F", "source_url": "https://example.org/F_(1).jpg"},
]


def _links(markdown: str) -> list[str]:
    """Targets of every Markdown link and autolink in ``markdown`` (escaped brackets skipped)."""
    import re

    inline = re.findall(r"(?<!\\)\]\(([^)\s]*)\)", markdown)
    auto = re.findall(r"(?<!\\)<([a-zA-Z][a-zA-Z0-9+.-]*:[^<>\s]*)>", markdown)
    return inline + auto


def test_attribution_never_links_unsafe_urls() -> None:
    text = render_attribution(HOSTILE_ROWS)
    links = _links(text)
    assert links and all(link.startswith("https://") for link in links), links
    assert "https://example.org/F_%281%29.jpg" in links
    assert "<script>" not in text and "\u202e" not in text
    assert "\\<script\\>" in text  # shown as text
    for line in text.splitlines():
        assert not line.startswith("#") or line in (
            "# Attribution",
            "## Licences",
            "## Credits (7 published files)",
        )
    credit = {line.split(":", 1)[0]: line for line in text.splitlines() if line.startswith("- ")}
    assert "`javascript:alert(document.cookie)` (not a web link)" in credit["- `k_js`"]
    assert "`file:///home/curator/a.jpg` (not a web link)" in credit["- `k_file`"]
    assert "`https://u:p@example.org/a.jpg` (not a web link)" in credit["- `k_cred`"]
    assert "- ``k`tick``" in credit  # a key with a backtick stays one code span
    assert len(credit) == len(HOSTILE_ROWS)


def test_card_never_links_unsafe_licence_urls(
    layout: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairsets.publish import card
    from fairsets.publish.card import body as card_body

    real = card_body.license_info

    def hostile(spdx: str | None, policy: Any = None) -> dict[str, Any] | None:
        info = real(spdx, policy)
        return info and {**info, "url": "javascript:alert(1)"}

    monkeypatch.setattr(card_body, "license_info", hostile)
    text = card.render_card(layout[1]["summary"])
    assert not [link for link in _links(text) if "javascript" in link]  # never a link ...
    assert "| CC0 1.0 Universal | 3 |" in text  # ... the licence is named without one
    monkeypatch.setattr(card_body, "license_info", real)
    assert "](https://creativecommons.org/publicdomain/zero/1.0/)" in card.render_card(layout[1]["summary"])


@pytest.mark.parametrize(
    ("url", "published"),
    [
        ("http://user:secret@127.0.0.1/x.jpg", "http://127.0.0.1/x.jpg"),
        ("https://a:b@example.org:8443/p?q=1#f", "https://example.org:8443/p?q=1#f"),
        ("https://token@example.org/p", "https://example.org/p"),
        ("https://example.org/@user/photo.jpg", "https://example.org/@user/photo.jpg"),
        ("mailto:someone@example.org", "mailto:someone@example.org"),
        (None, None),
    ],
)
def test_redact_url_drops_credentials_only(url: str | None, published: str | None) -> None:
    from fairsets.publish.attribution import redact_url

    assert redact_url(url) == published
