"""Data → model bias transfer: how much of a model's gender bias about a social category the
co-occurrence of that category with perceived gender in the alt-texts predicts.

After design 4 of the LAION-400M person-centric annotation study, for each social category ``c``
(an occupation, role or trait: ``nurse``, ``engineer``, ``CEO``; the list that ships with fairsets
is ``data/social_categories.toml``, see its header, and :func:`load_categories` reads your own):

* **data bias** (:func:`data_bias`) — among the *single-gender* images (image-level gender
  ``female`` or ``male`` by the rule of :mod:`.tables`) whose alt-text names ``c`` (whole words,
  case-insensitive, plural-tolerant: ``nurses`` counts for ``nurse``, ``nursery`` does not), the
  ``female`` and ``male`` counts and ``bias = (female − male) / (female + male)`` in [−1, 1]
  (``share_female = female / (female + male)`` beside it). Categories named in fewer than
  ``min_count`` single-gender images are dropped, and listed with their counts. One DuckDB query
  over the ``person_images`` view (one constant regular expression per category), streamed.
* **CLIP model bias** (:func:`model_bias`, :func:`model_bias_many`) — with probe images of
  perceived women ``F`` and men ``M`` and the text embedding of a prompt about ``c`` ("a photo of
  a nurse"), the standardised difference of cosine similarities

      d(c) = (mean_{x∈F} cos(x, c) − mean_{y∈M} cos(y, c)) / std_{w∈F∪M} cos(w, c)

  in the manner of an effect size (positive: the model puts ``c`` nearer the women).
  The standard deviation is the **population** one (``ddof = 0``): the probe set is the whole
  population the number describes, not a sample of a larger one, and this is what ``numpy.std``
  and common WEAT implementations compute; with probe sets of hundreds of images the sample
  standard deviation would differ by a factor √(n/(n−1)) < 1.01. ``ddof=1`` is a parameter.
  :func:`category_embeddings` embeds the prompts with a model from :func:`fairsets.models.load_vlm`.
* **generated bias** (:func:`generated_bias`, :func:`read_generated`) — for a text-to-image model,
  the share of the images generated for the prompt about ``c`` that a gender classifier labels
  ``female`` (and the same ``bias`` as above over female + male).
* **relation** (:func:`relation`) — Pearson ρ (p-value when scipy is installed) between data bias
  and model bias across categories, R² of the least-squares line (the share of model-bias
  variance that co-occurrence predicts linearly), and how much Chebyshev polynomials of degree
  2–5 add to R² (the study reports 1–3 points: first-order co-occurrence carries most of it).
  :func:`scatter_plot` draws it.

Every function returns a JSON-ready dict (plain numbers, lists and strings; None where a number is
undefined) with the counts behind each number and a ``definitions`` entry.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .words import word_forms

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

if TYPE_CHECKING:
    import duckdb

    from fairsets.models.base import VLM

__all__ = [
    "DEFAULT_TEMPLATE",
    "category_embeddings",
    "category_pattern",
    "data_bias",
    "default_categories_path",
    "generated_bias",
    "load_categories",
    "model_bias",
    "model_bias_many",
    "model_bias_report",
    "read_generated",
    "relation",
    "scatter_plot",
]

#: The default probe prompt; ``{category}`` is the category, ``{a}`` the article "a" or "an".
DEFAULT_TEMPLATE = "a photo of {a} {category}"

#: Image file suffixes :func:`read_generated` reads.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")

#: The highest Chebyshev degree :func:`relation` fits.
MAX_DEGREE = 5


# --- categories ------------------------------------------------------------------------------------


def default_categories_path() -> Path:
    """The category file that ships with fairsets (see its header for provenance and licence)."""
    return Path(str(resources.files("fairsets.audit.persons").joinpath("data", "social_categories.toml")))


def load_categories(path: str | os.PathLike[str] | None = None) -> list[str]:
    """Read a category file: one or more TOML tables (kinds), each with ``categories = [...]``.

    ``None`` reads the list that ships with fairsets; a file of yours replaces it (it is not
    merged). Categories keep the file's order; the same category twice (any case) is an error.

    Raises:
        ValueError: a missing or unreadable file, a table without a non-empty ``categories`` list
            of non-empty strings, a duplicate, or no category at all (one line each).
    """
    p = Path(path) if path is not None else default_categories_path()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: no such category file; give a TOML file with categories = [...]") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{p}: not a readable TOML category file ({reason})") from None
    out: list[str] = []
    seen: dict[str, str] = {}
    for kind, table in data.items():
        words = table.get("categories") if isinstance(table, dict) else None
        if (
            not isinstance(words, list)
            or not words
            or not all(isinstance(w, str) and w.strip() for w in words)
        ):
            raise ValueError(f"{p}: [{kind}] needs categories = a non-empty list of non-empty strings")
        for w in words:
            word = " ".join(w.split())
            if word.lower() in seen:
                raise ValueError(f"{p}: {word!r} is listed twice ([{seen[word.lower()]}] and [{kind}])")
            seen[word.lower()] = kind
            out.append(word)
    if not out:
        raise ValueError(f"{p}: no categories; write a [kind] table with categories = [...]")
    return out


def _check_categories(categories: Sequence[str]) -> list[str]:
    if isinstance(categories, str):
        raise TypeError("categories is a sequence of strings, not one string")
    cats = [" ".join(str(c).split()) for c in categories]
    if not cats or not all(cats):
        raise ValueError("categories: give at least one category, none empty")
    lows = [c.lower() for c in cats]
    dups = sorted({c for c in lows if lows.count(c) > 1})
    if dups:
        raise ValueError(f"categories: {', '.join(dups)} given more than once; give each once")
    return cats


# --- data bias ------------------------------------------------------------------------------------

#: Not a word character (a letter or digit of any script, or ``_``), in RE2 syntax as DuckDB runs it.
_NOT_WORD = r"[^\pL\pN_]"


def _plural(word: str) -> str:
    """RE2 source matching ``word`` or its plurals (:func:`.words.word_forms`), literally."""
    return "(?:" + "|".join(re.escape(f) for f in word_forms(word)) + ")"


def category_pattern(category: str) -> str:
    """The regular expression (RE2 syntax, as DuckDB's ``regexp_matches`` runs it) that finds
    ``category`` in an alt-text: case-insensitive, whole words, the last word also in its plural
    (``nurses``, ``secretaries``, ``police officers``, ``people``), a space matching hyphens and
    runs of spaces (``make-up artist`` is not ``makeup artist``, though). :func:`data_bias` runs
    it on the lower-cased alt-text."""
    words = [w for w in re.split(r"[\s\-]+", category.strip()) if w]
    if not words:
        raise ValueError("category_pattern: an empty category")
    parts = [re.escape(w.lower()) for w in words[:-1]] + [_plural(words[-1])]
    return f"(?i)(?:^|{_NOT_WORD})" + r"[\s\-]+".join(parts) + f"(?:$|{_NOT_WORD})"


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _token_forms(category: str) -> list[str] | None:
    """The lower-case words (letter, digit and ``_`` runs) the last word of ``category`` matches as
    (itself and its plurals, as :func:`category_pattern` allows), or None when a word of the
    category holds another character (``c++``): such a category is searched with its pattern alone."""
    words = [w.lower() for w in re.split(r"[\s\-]+", category.strip()) if w]
    if not words or not all(ch.isalnum() or ch == "_" for w in words for ch in w):
        return None
    return word_forms(words[-1])


def _category_counts(con: duckdb.DuckDBPyConnection, cats: list[str]) -> dict[tuple[str, int], int]:
    """``{(gender, category index): images}`` of the single-gender person images naming each category.

    One pass over the alt-texts: each lower-cased alt-text is cut into its words once, and only the
    images with a word that can end a category (``nurse``, ``nurses``, ``officers``) are candidates.
    A candidate of a one-word category is a match (the word rule of :func:`category_pattern` is
    exactly "one of the alt-text's words"); one of a longer category is checked with its pattern.
    A category with a character outside words (``c++``) is matched with its pattern on every
    alt-text that contains its longest word. Counting every alt-text against every pattern instead
    costs one regular-expression pass per category (about 10x slower with a hundred categories).
    """
    forms, patterns = [], []
    for i, c in enumerate(cats):
        tokens = _token_forms(c)
        single = len([w for w in re.split(r"[\s\-]+", c.strip()) if w]) == 1
        if tokens is None:
            patterns.append((i, c))
            continue
        forms += [(w, i, None if single else category_pattern(c)) for w in tokens]
    out: dict[tuple[str, int], int] = {}
    base = (
        "SELECT shard, key, gender, lower(caption) AS lc FROM person_images "
        "WHERE gender IN ('female', 'male') AND caption IS NOT NULL"
    )
    if forms:
        values = ", ".join(f"({_sql_str(w)}, {i})" for w, i, _ in forms)
        # One constant pattern per longer category (compiled once), not a pattern column.
        checks = {i: p for _, i, p in forms if p}
        check = (
            "CASE f.cat "
            + " ".join(f"WHEN {i} THEN regexp_matches(w.lc, {_sql_str(p)})" for i, p in checks.items())
            + " ELSE true END"
            if checks
            else "true"
        )
        rows = con.execute(
            f"WITH forms(word, cat) AS (VALUES {values}), "
            f"words AS (SELECT shard, key, gender, lc, unnest(list_distinct(regexp_extract_all(lc, "
            f"'[\\pL\\pN_]+'))) AS word FROM ({base})) "
            "SELECT gender, cat, count(*) FROM (SELECT DISTINCT w.shard, w.key, w.gender, f.cat "
            f"FROM words w JOIN forms f ON w.word = f.word WHERE {check}) GROUP BY ALL"
        ).fetchall()
        out.update({(g, int(i)): int(n) for g, i, n in rows})
    for i, c in patterns:
        stem = max((w.lower() for w in re.split(r"[\s\-]+", c.strip()) if w), key=len)
        rows = con.execute(
            f"SELECT gender, count(*) FROM ({base}) WHERE contains(lc, {_sql_str(stem)}) "
            f"AND regexp_matches(lc, {_sql_str(category_pattern(c))}) GROUP BY gender"
        ).fetchall()
        out.update({(g, i): int(n) for g, n in rows})
    return out


def data_bias(con: duckdb.DuckDBPyConnection, categories: Sequence[str], *, min_count: int = 100) -> dict:
    """Per category, the female and male single-gender images whose alt-text names it.

    Args:
        con: a connection from :func:`fairsets.audit.persons.tables.connect` (needs gender labels).
        categories: the categories (:func:`load_categories`).
        min_count: keep a category when female + male ≥ this; the others are listed in ``dropped``.

    Returns:
        ``{"categories": [{"category", "female", "male", "n", "bias", "share_female"}, ...]`` (kept,
        in the order given), ``"dropped": [{"category", "female", "male", "n"}, ...]``,
        ``"n_single_gender"`` (single-gender images with an alt-text), ``"n_female"``,
        ``"n_male"``, ``"min_count"`` and ``"definitions"``.

    Raises:
        ValueError: no gender labels in the folder, a bad ``min_count`` or bad categories.
    """
    cats = _check_categories(categories)
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be a whole number ≥ 1, not {min_count!r}")
    columns = {row[0] for row in con.execute("DESCRIBE boxes").fetchall()}
    if "perceived_gender" not in columns:
        raise ValueError("the folder has no gender labels; run fairsets annotate classify --attribute gender")
    counts = _category_counts(con, cats)
    rows = con.execute(
        "SELECT gender, count(*) FROM person_images WHERE gender IN ('female', 'male') "
        "AND caption IS NOT NULL GROUP BY gender"
    ).fetchall()
    rows = [(g, n, *(counts.get((g, i), 0) for i in range(len(cats)))) for g, n in rows]
    by = {r[0]: r[1:] for r in rows}
    zero = (0,) * (len(cats) + 1)
    fem, mal = by.get("female", zero), by.get("male", zero)
    kept, dropped = [], []
    for i, c in enumerate(cats):
        f, m = int(fem[i + 1]), int(mal[i + 1])
        n = f + m
        if n >= min_count:
            kept.append(
                {"category": c, "female": f, "male": m, "n": n, "bias": (f - m) / n, "share_female": f / n}
            )
        else:
            dropped.append({"category": c, "female": f, "male": m, "n": n})
    return {
        "categories": kept,
        "dropped": dropped,
        "n_single_gender": int(fem[0]) + int(mal[0]),
        "n_female": int(fem[0]),
        "n_male": int(mal[0]),
        "min_count": min_count,
        "definitions": {
            "images": "images with at least one kept box whose image-level gender is female or male "
            "(every gender-labelled box of one gender; unclear boxes beside them allowed) and an alt-text",
            "match": "the alt-text names the category: case-insensitive, whole words, the last word "
            "also in its plural",
            "bias": "(female − male) / (female + male), in [-1, 1]; positive: named more with women",
            "share_female": "female / (female + male)",
            "kept": f"categories named in at least {min_count} such images",
        },
    }


# --- model bias -----------------------------------------------------------------------------------


def _unit(a: Any, what: str, ndim: int) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    if x.ndim != ndim:
        raise ValueError(f"{what}: expected a {ndim}-d array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if not np.all(np.isfinite(x)) or np.any(norms == 0):
        raise ValueError(f"{what}: embeddings must be finite and non-zero")
    return x / norms


def model_bias_many(
    image_emb_female: Any, image_emb_male: Any, text_emb: Any, *, ddof: int = 0
) -> np.ndarray:
    """``d(c)`` (module docstring) for each row of ``text_emb`` (``(k, dim)``); NaN where every
    probe image is equally similar to the text (the standard deviation is 0).

    Args:
        image_emb_female: ``(n_f, dim)`` probe image embeddings of perceived women (any scale).
        image_emb_male: ``(n_m, dim)`` of perceived men.
        text_emb: ``(k, dim)`` category text embeddings.
        ddof: 0 (population standard deviation, the default; see the module docstring) or 1.
    """
    f = _unit(image_emb_female, "female image embeddings", 2)
    m = _unit(image_emb_male, "male image embeddings", 2)
    t = _unit(text_emb, "text embeddings", 2)
    if len(f) == 0 or len(m) == 0:
        raise ValueError("model bias needs at least one female and one male probe image")
    if not f.shape[1] == m.shape[1] == t.shape[1]:
        raise ValueError(f"embedding sizes differ: female {f.shape[1]}, male {m.shape[1]}, text {t.shape[1]}")
    if ddof not in (0, 1) or (ddof == 1 and len(f) + len(m) < 2):
        raise ValueError("ddof is 0 or 1 (1 needs at least two probe images)")
    cf, cm = f @ t.T, m @ t.T
    sd = np.concatenate([cf, cm]).std(axis=0, ddof=ddof)
    diff = cf.mean(axis=0) - cm.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 1e-12, diff / np.where(sd > 1e-12, sd, 1.0), np.nan)


def model_bias(image_emb_female: Any, image_emb_male: Any, text_emb: Any, *, ddof: int = 0) -> float:
    """``d(c)`` for one category text embedding ``(dim,)``; NaN when undefined (see
    :func:`model_bias_many`)."""
    t = np.asarray(text_emb, dtype=np.float64)
    if t.ndim != 1:
        raise ValueError(f"text embedding: expected a 1-d vector, got shape {t.shape}")
    return float(model_bias_many(image_emb_female, image_emb_male, t[None, :], ddof=ddof)[0])


def _prompt(template: str, category: str) -> str:
    article = "an" if category[:1].lower() in "aeiou" else "a"
    try:
        return template.format(category=category, a=article)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"prompt template {template!r}: only {{category}} and {{a}} (a/an) may be used ({e})"
        ) from None


def category_embeddings(
    vlm: VLM, categories: Sequence[str], *, template: str = DEFAULT_TEMPLATE, batch_size: int = 64
) -> tuple[list[str], np.ndarray]:
    """The probe prompts (``template`` filled per category) and their ``(k, dim)`` embeddings by
    ``vlm`` (a model from :func:`fairsets.models.load_vlm`).

    Raises:
        ValueError: a template without ``{category}`` or with other fields, or bad categories.
    """
    from fairsets.audit.embeddings import embed_texts

    cats = _check_categories(categories)
    if "{category}" not in template:
        raise ValueError(f"prompt template {template!r} has no {{category}}; e.g. {DEFAULT_TEMPLATE!r}")
    prompts = [_prompt(template, c) for c in cats]
    return prompts, embed_texts(vlm, prompts, batch_size=batch_size)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def model_bias_report(
    vlm: VLM,
    image_emb_female: Any,
    image_emb_male: Any,
    categories: Sequence[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    ddof: int = 0,
) -> dict:
    """``d(c)`` of ``vlm`` for each category, with the prompts, probe counts and definitions.

    Returns:
        ``{"categories": [{"category", "prompt", "d"}, ...], "n_female_probes", "n_male_probes",
        "model", "template", "definitions"}``; ``d`` is None where undefined.
    """
    cats = _check_categories(categories)
    prompts, text = category_embeddings(vlm, cats, template=template)
    d = model_bias_many(image_emb_female, image_emb_male, text, ddof=ddof)
    return {
        "categories": [
            {"category": c, "prompt": p, "d": _num(v)} for c, p, v in zip(cats, prompts, d, strict=True)
        ],
        "n_female_probes": len(image_emb_female),
        "n_male_probes": len(image_emb_male),
        "model": vlm.provenance(),
        "template": template,
        "definitions": {
            "d": "(mean cos(female probe, prompt) − mean cos(male probe, prompt)) / std of cos over "
            f"all probes ({'population' if ddof == 0 else 'sample'} std); positive: nearer the women",
        },
    }


# --- generated images ------------------------------------------------------------------------------


def generated_bias(labels: Mapping[str, Sequence[str | None]]) -> dict:
    """The share of generated images classified ``female``, per prompt.

    Args:
        labels: ``prompt (or category) → the classifier's label per generated image`` (``female``,
            ``male``, anything else or None: neither).

    Returns:
        ``{"prompts": [{"prompt", "n", "female", "male", "other", "share_female", "bias"}, ...],
        "definitions"}`` — ``share_female = female / n`` (the study's measure), ``bias = (female −
        male) / (female + male)`` as for data bias; None where the denominator is 0.
    """
    out = []
    for prompt, labs in labels.items():
        labs = list(labs)
        f = sum(1 for x in labs if x == "female")
        m = sum(1 for x in labs if x == "male")
        n = len(labs)
        out.append(
            {
                "prompt": prompt, "n": n, "female": f, "male": m, "other": n - f - m,
                "share_female": f / n if n else None, "bias": (f - m) / (f + m) if f + m else None,
            }
        )  # fmt: skip
    return {
        "prompts": out,
        "definitions": {
            "share_female": "images classified female / all images generated for the prompt",
            "bias": "(female − male) / (female + male) among the images classified female or male",
        },
    }


def read_generated(
    folder: str | os.PathLike[str],
    classify: Callable[[list[Any]], Sequence[str | None]],
    *,
    batch_size: int = 32,
) -> tuple[dict[str, list[str | None]], list[dict[str, str]]]:
    """Classify the generated images of ``folder``: one sub-folder per prompt (its name is the
    prompt or category), image files inside.

    Args:
        folder: the folder of prompt folders.
        classify: PIL RGB images → one label per image (e.g. a gender classifier head).
        batch_size: images per ``classify`` call.

    Returns:
        ``(labels, rejected)``: ``prompt → labels`` (for :func:`generated_bias`), and each file that
        could not be read as ``{"path", "reason"}`` (it counts nowhere).

    Raises:
        ValueError: ``folder`` is not a folder, holds no prompt folder, or ``classify`` returns a
            wrong number of labels.
    """
    from PIL import Image, UnidentifiedImageError

    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder; give a folder with one sub-folder of images per prompt")
    prompts = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not prompts:
        raise ValueError(
            f"{root}: no prompt folders; put each prompt's images in a sub-folder named after it"
        )
    labels: dict[str, list[str | None]] = {}
    rejected: list[dict[str, str]] = []
    for sub in prompts:
        files = sorted(p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        out: list[str | None] = []
        for i in range(0, len(files), batch_size):
            batch = []
            for path in files[i : i + batch_size]:
                try:
                    with Image.open(path) as im:
                        batch.append(im.convert("RGB"))
                except (OSError, UnidentifiedImageError, ValueError) as e:
                    rejected.append({"path": str(path), "reason": f"unreadable image ({type(e).__name__})"})
            if batch:
                got = list(classify(batch))
                if len(got) != len(batch):
                    raise ValueError(f"the classifier returned {len(got)} labels for {len(batch)} images")
                out += got
        labels[sub.name] = out
    return labels, rejected


# --- relation -------------------------------------------------------------------------------------


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot


def relation(x: Iterable[float], y: Iterable[float]) -> dict:
    """How well ``x`` (data bias) predicts ``y`` (model bias) across categories.

    Pairs where either value is None or not finite are left out (counted in ``n_skipped``).

    Returns:
        ``{"n", "n_skipped", "pearson_r", "p_value" (None without scipy), "slope", "intercept",
        "r2", "chebyshev": [{"degree", "r2", "r2_gain"}, ...], "definitions"}``; Chebyshev degrees
        that need more points than there are (degree + 2) are left out.

    Raises:
        ValueError: x and y of different lengths, fewer than 3 usable pairs, or a constant x or y.
    """
    xs, ys = list(x), list(y)
    if len(xs) != len(ys):
        raise ValueError(f"relation: x has {len(xs)} values and y {len(ys)}; give one pair per category")

    def ok(v: Any) -> bool:
        return v is not None and math.isfinite(float(v))

    keep = [i for i in range(len(xs)) if ok(xs[i]) and ok(ys[i])]
    xa = np.array([float(xs[i]) for i in keep])
    ya = np.array([float(ys[i]) for i in keep])
    n = len(keep)
    if n < 3:
        raise ValueError(f"relation: {n} usable pairs; at least 3 are needed")
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        raise ValueError("relation: x or y is constant; a correlation is undefined")
    r = float(np.corrcoef(xa, ya)[0, 1])
    p = None
    try:
        from scipy import stats
    except ImportError:
        pass
    else:
        p = float(stats.pearsonr(xa, ya).pvalue)
    slope, intercept = np.polyfit(xa, ya, 1)
    r2 = _r2(ya, slope * xa + intercept)
    lo, hi = float(xa.min()), float(xa.max())
    t = (2 * xa - (lo + hi)) / (hi - lo)
    cheb = []
    for deg in range(2, MAX_DEGREE + 1):
        if n < deg + 2:
            break
        coef = np.polynomial.chebyshev.chebfit(t, ya, deg)
        r2k = _r2(ya, np.polynomial.chebyshev.chebval(t, coef))
        cheb.append({"degree": deg, "r2": r2k, "r2_gain": r2k - r2})
    return {
        "n": n,
        "n_skipped": len(xs) - n,
        "pearson_r": r,
        "p_value": p,
        "slope": float(slope),
        "intercept": float(intercept),
        "r2": r2,
        "chebyshev": cheb,
        "definitions": {
            "pearson_r": "Pearson correlation of x and y",
            "p_value": "two-sided p-value of Pearson's r (scipy), None without scipy",
            "r2": "R² of the least-squares line y ≈ slope·x + intercept: the share of y's variance "
            "that x predicts linearly",
            "chebyshev": "R² of a least-squares Chebyshev series of the given degree in x scaled to "
            "[-1, 1], and its gain over the line's R²",
        },
    }


def scatter_plot(
    x: Sequence[float],
    y: Sequence[float],
    labels: Sequence[str],
    fit: Mapping[str, Any] | None,
    path: str | os.PathLike[str],
    *,
    xlabel: str = "data bias (female − male) / (female + male)",
    ylabel: str = "model bias d(c)",
    max_labels: int = 30,
) -> Path:
    """A PNG scatter of the categories with the fitted line (``fit``: a :func:`relation` dict, or
    None for no line), written atomically to ``path``.

    With many points only the most telling are named (the extremes of x and y and the largest
    residuals, up to ``max_labels``), and a name that would sit on one already drawn is skipped.
    Needs matplotlib.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from fairsets.core.atomic import atomic_path

    if not len(x) == len(y) == len(labels):
        raise ValueError("scatter_plot: x, y and labels must have one entry per category")
    pts = [
        (float(a), float(b), str(lab))
        for a, b, lab in zip(x, y, labels, strict=True)
        if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    fig = Figure(figsize=(7.0, 5.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if pts:
        xa = np.array([p[0] for p in pts])
        ya = np.array([p[1] for p in pts])
        ax.scatter(xa, ya, s=14, alpha=0.7)
        if fit and fit.get("slope") is not None:
            xs = np.linspace(xa.min(), xa.max(), 50)
            ax.plot(xs, fit["slope"] * xs + fit["intercept"], color="#c0392b", linewidth=1.2,
                    label=f"linear fit, R² = {fit['r2']:.2f}, ρ = {fit['pearson_r']:.2f}")  # fmt: skip
            ax.legend(loc="upper left", fontsize="small")
            resid = np.abs(ya - (fit["slope"] * xa + fit["intercept"]))
        else:
            resid = np.abs(ya - ya.mean())
        order = list(dict.fromkeys(
            [int(np.argmin(xa)), int(np.argmax(xa)), int(np.argmin(ya)), int(np.argmax(ya))]
            + [int(i) for i in np.argsort(-resid)]
        ))[: max(0, max_labels)]  # fmt: skip
        spanx = float(np.ptp(xa)) or 1.0
        spany = float(np.ptp(ya)) or 1.0
        placed: list[tuple[float, float]] = []
        for i in order:
            px, py = (xa[i] - xa.min()) / spanx, (ya[i] - ya.min()) / spany
            if any(abs(px - qx) < 0.08 and abs(py - qy) < 0.035 for qx, qy in placed):
                continue
            placed.append((px, py))
            ax.annotate(pts[i][2], (xa[i], ya[i]), xytext=(3, 3), textcoords="offset points", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.axhline(0, color="#999999", linewidth=0.6)
    ax.axvline(0, color="#999999", linewidth=0.6)
    target = Path(path)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return target
