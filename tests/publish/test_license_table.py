"""The licence gate: a table of licence texts, allowed (with the SPDX id) and refused.

A licence text is recognised whole (a known id, name or deed URL with harmless decoration);
restricting words, unknown leftovers, conflicting licences and unicode tricks make it unknown,
and the ``license`` step rejects it with the original text in the reason.
"""

from __future__ import annotations

import pytest

from fairsets.core.data import Sample
from fairsets.core.step import StepContext, build_step
from fairsets.pipeline.config import _import_components
from fairsets.publish.attribution import license_decision, load_policy, normalise_license, parse_license

_import_components()

# ------------------------------------------------------------------ allowed: text -> SPDX id
ALLOWED = [
    # SPDX ids
    ("CC-BY-4.0", "CC-BY-4.0"),
    ("CC-BY-SA-4.0", "CC-BY-SA-4.0"),
    ("CC-BY-3.0", "CC-BY-3.0"),
    ("CC-BY-2.5", "CC-BY-2.5"),
    ("CC-BY-2.0", "CC-BY-2.0"),
    ("CC-BY-1.0", "CC-BY-1.0"),
    ("CC-BY-SA-3.0", "CC-BY-SA-3.0"),
    ("CC-BY-SA-2.5", "CC-BY-SA-2.5"),
    ("CC-BY-SA-2.0", "CC-BY-SA-2.0"),
    ("CC-BY-SA-1.0", "CC-BY-SA-1.0"),
    ("CC0-1.0", "CC0-1.0"),
    ("PDM-1.0", "PDM-1.0"),
    ("CC-PDDC", "PDM-1.0"),
    ("CC-BY-SA-3.0-DE", "CC-BY-SA-3.0-DE"),
    ("CC-BY-3.0-IGO", "CC-BY-3.0-IGO"),
    ("cc-by-sa-2.0-uk", "CC-BY-SA-2.0-UK"),
    # short names (Commons LicenseShortName and License fields)
    ("CC BY 4.0", "CC-BY-4.0"),
    ("CC BY-SA 4.0", "CC-BY-SA-4.0"),
    ("CC BY-SA 3.0", "CC-BY-SA-3.0"),
    ("CC BY 2.0", "CC-BY-2.0"),
    ("cc-by-sa-4.0", "CC-BY-SA-4.0"),
    ("cc-by-sa-3.0", "CC-BY-SA-3.0"),
    ("cc-by-4.0", "CC-BY-4.0"),
    ("cc by 2.5", "CC-BY-2.5"),
    ("cc-by-sa-4", "CC-BY-SA-4.0"),
    ("CC BY-SA 3.0 de", "CC-BY-SA-3.0-DE"),
    ("CC BY 3.0 NL", "CC-BY-3.0-NL"),
    ("cc-by-sa-3.0,2.5,2.0,1.0", "CC-BY-SA-3.0"),
    ("CC BY v4.0", "CC-BY-4.0"),
    ("CC BY version 2.5", "CC-BY-2.5"),
    ("CC0", "CC0-1.0"),
    ("cc0", "CC0-1.0"),
    ("CC0 1.0", "CC0-1.0"),
    ("CC0 1.0 Universal", "CC0-1.0"),
    ("CC0 1.0 Universal (CC0 1.0) Public Domain Dedication", "CC0-1.0"),
    ("cc-zero", "CC0-1.0"),
    ("cczero", "CC0-1.0"),
    ("CC Zero", "CC0-1.0"),
    ("Public domain", "PDM-1.0"),
    ("public-domain", "PDM-1.0"),
    ("pd", "PDM-1.0"),
    ("PD", "PDM-1.0"),
    ("PDM", "PDM-1.0"),
    ("Public Domain Mark 1.0", "PDM-1.0"),
    ("Public Domain (Public Domain Mark 1.0)", "PDM-1.0"),
    ("PD-old", "PDM-1.0"),
    ("PD-old-70", "PDM-1.0"),
    ("PD-US", "PDM-1.0"),
    ("PD-self", "PDM-1.0"),
    ("PD-USGov-NASA", "PDM-1.0"),
    ("PD-old-auto-expired", "PDM-1.0"),
    ("Public domain (PD-old)", "PDM-1.0"),
    # long names, with harmless decoration
    ("Creative Commons Attribution-ShareAlike 4.0 International", "CC-BY-SA-4.0"),
    ("Creative Commons Attribution-Share Alike 4.0 International", "CC-BY-SA-4.0"),
    ("Creative Commons Attribution 2.0 Generic", "CC-BY-2.0"),
    ("Attribution-ShareAlike 3.0 Unported", "CC-BY-SA-3.0"),
    ("Attribution 4.0 International (CC BY 4.0)", "CC-BY-4.0"),
    ("Licensed under the Creative Commons Attribution 4.0 International License", "CC-BY-4.0"),
    ("Licence: CC BY-SA 4.0", "CC-BY-SA-4.0"),
    ("license: cc-by-4.0", "CC-BY-4.0"),
    ("CC BY 4.0.", "CC-BY-4.0"),
    ("  CC BY 4.0  ", "CC-BY-4.0"),
    ('"CC BY 4.0"', "CC-BY-4.0"),
    ("[CC BY-SA 4.0]", "CC-BY-SA-4.0"),
    ("(CC0)", "CC0-1.0"),
    ("“CC BY 4.0”", "CC-BY-4.0"),
    ("CC BY–SA 4.0", "CC-BY-SA-4.0"),  # en dash
    ("cc\tby\n4.0", "CC-BY-4.0"),
    ("CC BY 4.0 license", "CC-BY-4.0"),
    ("GFDL, CC BY-SA 3.0", "CC-BY-SA-3.0"),
    ("GFDL or CC BY-SA 3.0", "CC-BY-SA-3.0"),
    # deed and legal-code URLs
    ("https://creativecommons.org/licenses/by/4.0/", "CC-BY-4.0"),
    ("https://creativecommons.org/licenses/by/4.0", "CC-BY-4.0"),
    ("http://creativecommons.org/licenses/by-sa/4.0/deed.en", "CC-BY-SA-4.0"),
    ("https://creativecommons.org/licenses/by-sa/2.0/deed.en", "CC-BY-SA-2.0"),
    ("https://creativecommons.org/licenses/by-sa/3.0/legalcode", "CC-BY-SA-3.0"),
    ("https://creativecommons.org/licenses/by/4.0/deed.pt_BR", "CC-BY-4.0"),
    ("https://creativecommons.org/licenses/by/4.0/deed.zh-hans", "CC-BY-4.0"),
    ("http://creativecommons.org/licenses/by/3.0/nl/", "CC-BY-3.0-NL"),
    ("https://creativecommons.org/licenses/by-sa/3.0/de/deed.de", "CC-BY-SA-3.0-DE"),
    ("https://www.creativecommons.org/licenses/by/2.5/", "CC-BY-2.5"),
    ("HTTPS://CREATIVECOMMONS.ORG/LICENSES/BY/4.0/", "CC-BY-4.0"),
    ("creativecommons.org/licenses/by/4.0", "CC-BY-4.0"),
    ("https://creativecommons.org/licenses/by/4.0/?ref=chooser-v1", "CC-BY-4.0"),
    ("http://creativecommons.org/publicdomain/zero/1.0/deed.en", "CC0-1.0"),
    ("https://creativecommons.org/publicdomain/zero/1.0/legalcode", "CC0-1.0"),
    ("https://creativecommons.org/publicdomain/mark/1.0/", "PDM-1.0"),
    ("CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/)", "CC-BY-SA-4.0"),
    # HTML fields (Commons), entities
    ('<a href="https://creativecommons.org/licenses/by/4.0/" class="external">CC BY 4.0</a>', "CC-BY-4.0"),
    ("<span>CC BY-SA 3.0</span>", "CC-BY-SA-3.0"),
    ("CC BY&nbsp;4.0", "CC-BY-4.0"),
    # unicode that NFKC maps to plain text
    ("ＣＣ ＢＹ ４.０", "CC-BY-4.0"),  # fullwidth
    ("CC\u00a0BY-SA\u00a04.0", "CC-BY-SA-4.0"),  # no-break spaces
]

# ------------------------------------------------------------ identified, refused by the policy
IDENTIFIED_REFUSED = [
    ("CC BY-NC 4.0", "CC-BY-NC-4.0", "non-commercial"),
    ("CC BY-NC-SA 2.0", "CC-BY-NC-SA-2.0", "non-commercial"),
    ("CC BY-NC-ND 4.0", "CC-BY-NC-ND-4.0", "non-commercial"),
    ("CC BY-ND 4.0", "CC-BY-ND-4.0", "no-derivatives"),
    ("Attribution-NonCommercial-ShareAlike 4.0 International", "CC-BY-NC-SA-4.0", "non-commercial"),
    ("Creative Commons Attribution-NoDerivatives 4.0 International", "CC-BY-ND-4.0", "no-derivatives"),
    ("Attribution-NoDerivs 3.0 Unported", "CC-BY-ND-3.0", "no-derivatives"),
    ("https://creativecommons.org/licenses/by-nc/4.0/", "CC-BY-NC-4.0", "non-commercial"),
    ("https://creativecommons.org/licenses/by-nc-sa/2.0/", "CC-BY-NC-SA-2.0", "non-commercial"),
    ("https://creativecommons.org/licenses/by-nd/3.0/de/", "CC-BY-ND-3.0-DE", "no-derivatives"),
]

# ------------------------------------------------------------------ refused: unknown
REFUSED = [
    # the examples of issue 11, verbatim
    "cc by 4.0 (with NC clause)",
    "CC BY 4.0 NonCommercial",
    "CC-BY-4.0-NC",
    "CC BY 4.0, no derivative works",
    "NoDerivatives CC BY 4.0",
    "CC0 (non-commercial use only)",
    "Not public domain",
    "Copyright (c) PD Studios, all rights reserved",
    "https://creativecommons.org/licenses/by/4.0/ but NonCommercial",
    # restricting words around an allowed licence
    "CC BY-SA 4.0 only",
    "CC BY 4.0 except commercial use",
    "CC BY 4.0 without modification",
    "CC BY 4.0 for personal use",
    "CC BY 4.0 restricted",
    "CC BY 4.0 - non commercial",
    "CC BY 4.0 (NC)",
    "CC BY 4.0 ND",
    "CC BY 3.0 no derivatives",
    "CC0 except faces",
    "CC0, not for commercial use",
    "public domain only in the US",
    "Public domain? No",
    "PD-US-no notice",
    "Editorial use only, CC BY 4.0",
    "All rights reserved",
    "No rights reserved",
    "© 2020 Jane Doe",
    "Copyright Jane Doe, CC BY 4.0",
    "CC BY 4.0 unless stated otherwise",
    "CC BY 4.0 if credited as 'Jane'",
    "Research use: CC BY 4.0",
    # leftover text that is not understood
    "CC BY 4.0 and GFDL",
    "CC BY 4.0 with attribution to the studio",
    "CC BY 4.0 (see website)",
    "This photo is CC BY 4.0",
    "CC BY 4.0 + extra terms",
    "CC BY 4.0 & NC",
    "CC BY 4.0 #nc",
    "CC BY 4.0; see terms",
    "free to use",
    "royalty free",
    "GFDL",
    "unknown",
    "other",
    "MIT",
    "Apache-2.0",
    "Free Art License",
    # incomplete, wrong or conflicting
    "CC BY-SA",
    "CC BY",
    "Creative Commons",
    "by 4.0",
    "BY-SA 4.0",
    "CC BY 5.0",
    "CC BY 4.1",
    "CC BY 1.0.0",
    "CC BY-SA-ND 4.0",
    "CC BY-SA-SA 4.0",
    "CC BY-SA 4.0 de",
    "CC BY 3.0 XX",
    "CC BY 4.0 or CC BY-SA 4.0",
    "CC BY 4.0 CC BY-NC 4.0",
    "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-nc-sa/4.0/)",
    "CC0 or CC BY-NC 4.0",
    "license",
    "",
    "   ",
    "---",
    # URLs that are not Creative Commons deeds
    "https://creativecommons.org/licenses/by/4.0/#nc",
    "https://creativecommons.org.evil.example/licenses/by/4.0/",
    "https://evil.example/creativecommons.org/licenses/by/4.0/",
    "https://user:pw@creativecommons.org/licenses/by/4.0/",
    "https://creativecommons.org:8080/licenses/by/4.0/",
    "https://creativecommons.org/licenses/by/4.0/de/",
    "https://creativecommons.org/licenses/by/4.0/deed.en/extra",
    "https://creativecommons.org/licenses/by/4.0/?nc=1",
    "ftp://creativecommons.org/licenses/by/4.0/",
    "javascript:alert('CC BY 4.0')",
    "https://www.gnu.org/copyleft/fdl.html",
    "https://creativecommons.org/licenses/by/5.0/",
    # unicode tricks
    "СС BY 4.0",  # Cyrillic Es
    "CC BY 4.0 ΝC",  # Greek Nu
    "C\u200bC BY 4.0",  # zero-width space
    "CC BY 4.0\u200b NC",
    "CC BY\u00ad-SA 4.0",  # soft hyphen
    "CC BY 4.0 \u202eCN",  # right-to-left override
    "CC BY 4.0\x00NC",
    "ＣＣ ＢＹ ４.０ ＮＣ",  # fullwidth, NFKC -> "CC BY 4.0 NC"
    "ℂℂ BY 4.0 ℕℂ",  # double-struck letters, NFKC -> "CC BY 4.0 NC"
    # HTML that hides terms
    '<a href="https://creativecommons.org/licenses/by-nc/4.0/">CC BY 4.0</a>',
    '<span title="NonCommercial">CC BY 4.0</span>',
    '<span>CC BY 4.0</span><span style="display:none">NonCommercial</span>',
    "CC BY 4.0 <!-- NonCommercial -->",
    "CC BY 4.0 <script>nc</script>",
    "CC BY 4.0&#32;NC",
    '<a NC href="https://creativecommons.org/licenses/by/4.0/">CC BY 4.0</a>',
    "<nc>CC BY 4.0</nc>",
    # very long
    "CC BY 4.0 " + "x" * 5000,
    "CC BY 4.0 " * 200,
    "public domain " * 100 + "not",
]


def test_table_is_large_enough() -> None:
    assert len(ALLOWED) + len(IDENTIFIED_REFUSED) + len(REFUSED) >= 100
    assert len(REFUSED) >= 60 and len(ALLOWED) >= 40


@pytest.mark.parametrize(("text", "spdx"), ALLOWED)
def test_allowed(text: str, spdx: str) -> None:
    assert normalise_license(text) == spdx
    got, allowed, reason = license_decision(text)
    assert (got, allowed, reason) == (spdx, True, "")


@pytest.mark.parametrize(("text", "spdx", "why"), IDENTIFIED_REFUSED)
def test_identified_and_refused(text: str, spdx: str, why: str) -> None:
    got, allowed, reason = license_decision(text)
    assert (got, allowed) == (spdx, False)
    assert why in reason and spdx in reason and repr(text) in reason  # the id and the original text


@pytest.mark.parametrize("text", REFUSED)
def test_refused(text: str) -> None:
    spdx, why = parse_license(text)
    assert spdx is None and why
    got, allowed, reason = license_decision(text)
    assert got is None and allowed is False
    assert reason.startswith("unknown or unrecognised licence: ")
    assert repr(text[:200]).rstrip("'\"") in reason  # the original text (long ones shortened)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("CC BY 4.0 NonCommercial", "restricting term 'noncommercial'"),
        ("CC-BY-4.0-NC", "restricting term 'nc'"),
        ("Not public domain", "restricting term 'not'"),
        ("cc by 4.0 (with NC clause)", "'with' not understood"),
        ("CC BY-SA", "without a version"),
        ("СС BY 4.0", "U+0421"),
        ("CC BY 4.0 or CC BY-SA 4.0", "conflicting licences CC-BY-4.0 and CC-BY-SA-4.0"),
        ("x" * 1001, "longer than 1000 characters"),
    ],
)
def test_reason_says_what_was_not_understood(text: str, why: str) -> None:
    assert why in license_decision(text)[2]


def test_every_policy_id_and_name_normalises_to_itself() -> None:
    """Published rows carry the SPDX id; ATTRIBUTION.md and the card normalise it again."""
    for spdx, entry in load_policy()["licenses"].items():
        assert normalise_license(spdx) == spdx
        assert normalise_license(entry["name"]) == spdx
        assert normalise_license(entry["url"]) == spdx


def test_non_text_values_are_unknown() -> None:
    for value in (None, float("nan"), 4.0, b"CC BY 4.0", ["CC BY 4.0"]):
        assert normalise_license(value) is None


@pytest.mark.parametrize(
    "text",
    [
        "cc by 4.0 (with NC clause)",
        "CC0 (non-commercial use only)",
        "Copyright (c) PD Studios, all rights reserved",
        "https://creativecommons.org/licenses/by/4.0/ but NonCommercial",
        "C\u200bC BY 4.0",
    ],
)
def test_license_step_rejects_with_the_original_text(text: str) -> None:
    step = build_step("license", {})
    s = step.process(Sample(key="k", meta={"license": text}), StepContext())
    assert not s.ok and s.step == "license"
    assert repr(text) in s.reason
    assert s.meta["license"] == text  # the original text is kept, not replaced by an id


def test_license_step_shortens_a_huge_licence_in_the_reason() -> None:
    text = "CC BY 4.0 " + "NC " * 100_000
    step = build_step("license", {})
    s = step.process(Sample(key="k", meta={"license": text}), StepContext())
    assert not s.ok and repr(text[:200])[:-1] in s.reason and len(s.reason) < 400


def test_a_restricting_word_anywhere_is_never_allowed() -> None:
    """Insert one restricting word at every position of every allowed text: never allowed."""
    words = ["NC", "ND", "NonCommercial", "NoDerivatives", "no", "not", "only", "except", "but", "without"]
    words += ["restricted", "reserved", "all", "copyright", "Non-Commercial", "No-Derivs"]
    tried = 0
    for text, _ in ALLOWED:
        parts = text.split()
        for i in range(len(parts) + 1):
            for word in words:
                mutated = " ".join([*parts[:i], word, *parts[i:]])
                spdx, allowed, _ = license_decision(mutated)
                assert not allowed, (mutated, spdx)
                assert spdx is None or "-NC" in spdx or "-ND" in spdx, (mutated, spdx)
                tried += 1
    assert tried > 2000


def test_random_noise_never_raises() -> None:
    """Seeded random edits of allowed texts: always an answer, never an exception."""
    import random

    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABCNDSY0123456789.-/:()[]<>&;#'\"\u200b\u0421\uff23\u00a0\x00\n"
    for _ in range(3000):
        text = list(rng.choice(ALLOWED)[0])
        for _ in range(rng.randint(1, 4)):
            op, at = rng.randrange(3), rng.randrange(len(text) + 1)
            if op == 0:
                text.insert(at, rng.choice(alphabet))
            elif op == 1 and at < len(text):
                del text[at]
            elif at < len(text):
                text[at] = rng.choice(alphabet)
        _, allowed, reason = license_decision("".join(text))
        assert allowed == (reason == "")
