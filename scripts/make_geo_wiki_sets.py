"""Unlabelled candidates for the Wikipedia sets of the ``geo`` methods: two evaluation sets and
a development set.

The source is the shortened English Wikipedia dump that ships in the ``gensim`` 4.4.0 wheel as
test data (``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``,
text by Wikipedia contributors, CC BY-SA). Three files are written, all deterministically:

* image captions: the caption of every ``[[File:…]]``/``[[Image:…]]`` link and every
  ``<gallery>`` line in every article (the last parameter that is not an image option), rendered
  to plain text; kept when it has at least 3 words; first occurrence kept of captions equal after
  lower-casing and removing punctuation;
* encyclopedia sentences: the prose of the place articles listed in ``PLACE_ARTICLES`` (headings,
  lists, tables, templates, references, images and the closing sections dropped), split into
  sentences, kept at 6–60 words, deduplicated as above, at most ``PER_ARTICLE`` per article drawn
  with ``random.Random(SEED)``, then ``SENTENCES`` of those drawn with the same generator;
* development sentences: the same prose and sentence rules applied to every article that is not
  in ``PLACE_ARTICLES``; sentences equal (as above) to a row of the two evaluation files are
  dropped; those with a capitalised word that is not the first word are preferred (place names
  are likely there), at most ``DEV_PER_ARTICLE`` per article drawn with
  ``random.Random(DEV_SEED)``, then ``DEV_SENTENCES`` of those drawn with the same generator
  (topped up from the other sentences only if the preferred ones are too few).

All three carry the article title for provenance and an empty ``country`` column, to be labelled by
reading. The script uses no fairsets code. The committed files were made with mwparserfromhell
0.7.2 (``pip install mwparserfromhell==0.7.2``); another version may render a caption differently.

    pip download --no-deps gensim==4.4.0 -d /tmp/gensim-wheel
    python scripts/make_geo_wiki_sets.py /tmp/gensim-wheel/gensim-4.4.0-*.whl --out /tmp/wiki
"""

from __future__ import annotations

import argparse
import bz2
import csv
import io
import random
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import mwparserfromhell
from mwparserfromhell.nodes import Comment, Heading, Tag, Template, Text, Wikilink

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedupe_geo_train import _words  # a sibling script: the same equality everywhere

MEMBER = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SEED = 20261129
SENTENCES = 400
PER_ARTICLE = 40
MIN_CAPTION_WORDS = 3
SENTENCE_WORDS = (6, 60)
DEV_SEED = 20261130
DEV_SENTENCES = 500
DEV_PER_ARTICLE = 25
CAPITALISED = re.compile(r"^[\"“‘(\[]*[A-Z]")

# Articles whose subject is a place: countries, a territory, states and a province, the sub-pages
# of Angola, a continent and an ocean. Chosen by title; every other article is not a place.
PLACE_ARTICLES = (
    "Afghanistan",
    "Alabama",
    "Alaska",
    "Albania",
    "Alberta",
    "Algeria",
    "Andorra",
    "Angola",
    "Angolan Armed Forces",
    "Aruba",
    "Asia",
    "Atlantic Ocean",
    "Azerbaijan",
    "Demographics of Angola",
    "Economy of Angola",
    "Foreign relations of Angola",
    "Politics of Angola",
    "Transport in Angola",
)

IMAGE_PREFIXES = ("file:", "image:")
IMAGE_OPTIONS = {
    "thumb",
    "thumbnail",
    "frame",
    "framed",
    "frameless",
    "border",
    "left",
    "right",
    "center",
    "centre",
    "none",
    "upright",
    "baseline",
    "middle",
    "sub",
    "super",
    "top",
    "text-top",
    "bottom",
    "text-bottom",
}
IMAGE_KEYS = {"alt", "link", "page", "class", "lang", "upright", "thumb", "thumbnail", "frame", "border"}
SIZE = re.compile(r"^\s*(\d+\s*)?(x\s*\d+\s*)?px\s*$", re.IGNORECASE)
CLOSING_SECTION = re.compile(
    r"^==\s*(see also|references|notes|footnotes|further reading|external links|bibliography|"
    r"sources|citations|notes and references|references and notes)\s*==\s*$",
    re.IGNORECASE | re.MULTILINE,
)
DROPPED_TAGS = {"ref", "references", "gallery", "table", "math", "timeline", "imagemap", "div", "center"}
ABBREVIATIONS = {
    "e.g.",
    "i.e.",
    "c.",
    "ca.",
    "cf.",
    "vs.",
    "etc.",
    "mr.",
    "mrs.",
    "dr.",
    "st.",
    "no.",
    "gen.",
    "lt.",
    "col.",
    "jr.",
    "sr.",
    "approx.",
    "est.",
    "pop.",
    "jan.",
    "feb.",
    "mar.",
    "apr.",
    "aug.",
    "sept.",
    "sep.",
    "oct.",
    "nov.",
    "dec.",
}
BOUNDARY = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“‘(]?[A-Z0-9])")


def read_dump(path: Path) -> bytes:
    """The dump's XML from the gensim wheel, the ``.bz2`` file or the ``.xml`` file."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            return bz2.decompress(wheel.read(MEMBER))
    data = path.read_bytes()
    return bz2.decompress(data) if path.suffix == ".bz2" else data


def articles(xml: bytes) -> list[tuple[str, str]]:
    """(title, wikitext) of every article (namespace 0, not a redirect), in dump order."""
    out = []
    for _, elem in ET.iterparse(io.BytesIO(xml)):
        if elem.tag.rsplit("}", 1)[-1] != "page":
            continue
        fields = {child.tag.rsplit("}", 1)[-1]: child for child in elem}
        if fields["ns"].text == "0" and "redirect" not in fields:
            text = next(c for c in fields["revision"] if c.tag.endswith("}text")).text or ""
            out.append((fields["title"].text, text))
        elem.clear()
    return out


def plain(wikitext: str) -> str:
    """Plain text: links as their displayed text, templates and references removed, bold and
    italic marks stripped, whitespace collapsed."""
    text = mwparserfromhell.parse(wikitext).strip_code(normalize=True, collapse=True)
    text = text.replace("\u00a0", " ").replace("'''", "").replace("''", "")
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\(\s*[,;]?\s*\)", "", text)  # parentheses emptied by a removed template
    text = re.sub(r"\s+([,.;:!?)])", r"\1", text)
    text = re.sub(r"\(\s+", "(", text)
    return re.sub(r"\s+", " ", text).strip()


def key(text: str) -> str:
    """Equality key: lower case, punctuation removed (the words the training sets are deduplicated
    by, ``dedupe_geo_train.py``)."""
    return " ".join(_words(text))


def is_option(segment: str) -> bool:
    s = segment.strip()
    if s.lower() in IMAGE_OPTIONS or SIZE.match(s):
        return True
    name, eq, _ = s.partition("=")
    return bool(eq) and name.strip().lower() in IMAGE_KEYS


def segments(code: mwparserfromhell.wikicode.Wikicode) -> list[str]:
    """The parameters of an image link's text: split on the pipes outside nested markup."""
    parts = [""]
    for node in code.nodes:
        if isinstance(node, Text):
            pieces = str(node).split("|")
            parts[-1] += pieces[0]
            parts.extend(pieces[1:])
        else:
            parts[-1] += str(node)
    return parts


def caption_of(params: list[str]) -> str | None:
    """The last parameter that is not an image option, as plain text."""
    captions = [p for p in params if p.strip() and not is_option(p)]
    return plain(captions[-1]) if captions else None


def image_captions(title: str, wikitext: str) -> list[tuple[str, str]]:
    code = mwparserfromhell.parse(wikitext)
    found = []
    for link in code.filter_wikilinks():
        if str(link.title).strip().lower().startswith(IMAGE_PREFIXES) and link.text is not None:
            found.append(caption_of(segments(link.text)))
    for tag in code.filter_tags():
        if str(tag.tag).strip().lower() == "gallery" and tag.contents is not None:
            for line in str(tag.contents).splitlines():
                params = segments(mwparserfromhell.parse(line))
                if len(params) > 1:
                    found.append(caption_of(params[1:]))
    return [(c, title) for c in found if c and len(c.split()) >= MIN_CAPTION_WORDS]


def prose(wikitext: str) -> list[str]:
    """Paragraphs of running prose: closing sections cut, templates, headings, comments, tables,
    references, images, categories and interlanguage links removed, list and table lines dropped."""
    cut = CLOSING_SECTION.search(wikitext)
    code = mwparserfromhell.parse(wikitext[: cut.start()] if cut else wikitext)
    for node in code.filter(recursive=False, forcetype=(Template, Heading, Comment, Tag, Wikilink)):
        if isinstance(node, Tag) and str(node.tag).strip().lower() not in DROPPED_TAGS:
            continue
        if isinstance(node, Wikilink):
            target = str(node.title).strip().lower()
            if not (target.startswith((*IMAGE_PREFIXES, "category:")) or re.match(r"^[a-z-]{2,12}:", target)):
                continue
        code.remove(node)
    paragraphs = []
    for line in str(code).splitlines():
        s = line.strip()
        if not s or s[0] in "*#:;|!{}=" or s.startswith(("__", "<")):
            continue
        text = plain(s)
        if text:
            paragraphs.append(text)
    return paragraphs


def sentences(paragraph: str) -> list[str]:
    """Split after . ! ? followed by space and a capital or digit, unless the period ends an
    abbreviation or a single initial."""
    out, start = [], 0
    for m in BOUNDARY.finditer(paragraph):
        before = paragraph[start : m.start() + 1].split()
        last = before[-1].lower() if before else ""
        if last in ABBREVIATIONS or re.fullmatch(r"(\w\.)+", last):
            continue
        out.append(paragraph[start : m.end()].strip())
        start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def keep_sentence(s: str) -> bool:
    lo, hi = SENTENCE_WORDS
    return lo <= len(s.split()) <= hi and not re.search(r"[{}\[\]|<>=]", s) and s[-1] in '.!?"”)'


def caption_rows(pages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    rows, seen = [], set()
    for title, text in pages:
        for caption, article in image_captions(title, text):
            if key(caption) not in seen:
                seen.add(key(caption))
                rows.append((caption, article))
    return rows


def sentence_rows(pages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    by_title = dict(pages)
    missing = [t for t in PLACE_ARTICLES if t not in by_title]
    if missing:
        raise SystemExit(f"place articles not in the dump: {', '.join(missing)}")
    rng = random.Random(SEED)
    pool, seen = [], set()
    for rank, title in enumerate(PLACE_ARTICLES):
        found = []
        for paragraph in prose(by_title[title]):
            for s in sentences(paragraph):
                if keep_sentence(s) and key(s) not in seen:
                    seen.add(key(s))
                    found.append((rank, len(found), s, title))
        pool.extend(rng.sample(found, PER_ARTICLE) if len(found) > PER_ARTICLE else found)
    chosen = rng.sample(pool, SENTENCES) if len(pool) > SENTENCES else pool
    return [(s, title) for _, _, s, title in sorted(chosen)]


def has_inner_capital(s: str) -> bool:
    """A word after the first that starts with a capital letter ("I" aside)."""
    return any(CAPITALISED.match(w) and w.strip('"“‘(,.;:!?’”)') != "I" for w in s.split()[1:])


def dev_rows(pages: list[tuple[str, str]], evaluation: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Sentences of the articles that are not place articles, none equal to an evaluation row."""
    rng = random.Random(DEV_SEED)
    seen = {key(text) for text, _ in evaluation}
    preferred, others = [], []
    for rank, (title, wikitext) in enumerate(pages):
        if title in PLACE_ARTICLES:
            continue
        found, rest = [], []
        for paragraph in prose(wikitext):
            for s in sentences(paragraph):
                if keep_sentence(s) and key(s) not in seen:
                    seen.add(key(s))
                    row = (rank, len(found) + len(rest), s, title)
                    (found if has_inner_capital(s) else rest).append(row)
        preferred.extend(rng.sample(found, DEV_PER_ARTICLE) if len(found) > DEV_PER_ARTICLE else found)
        others.append(rest)
    if len(preferred) >= DEV_SENTENCES:
        chosen = rng.sample(preferred, DEV_SENTENCES)
    else:
        counts = {}
        for rank, *_ in preferred:
            counts[rank] = counts.get(rank, 0) + 1
        extra = [r for rest in others for r in rest if counts.get(r[0], 0) < DEV_PER_ARTICLE]
        chosen = preferred + rng.sample(extra, min(len(extra), DEV_SENTENCES - len(preferred)))
    return [(s, title) for _, _, s, title in sorted(chosen)]


def write(path: Path, rows: list[tuple[str, str]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["caption", "country", "article"])
    writer.writerows((text, "", article) for text, article in rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the gensim 4.4.0 wheel, or the dump (.bz2 or .xml)")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for the three candidate files")
    args = parser.parse_args(argv)
    try:
        pages = articles(read_dump(args.source))
        args.out.mkdir(parents=True, exist_ok=True)
        caps, sents = caption_rows(pages), sentence_rows(pages)
        dev = dev_rows(pages, caps + sents)
        write(args.out / "geo-wiki-captions.candidates.csv", caps)
        write(args.out / "geo-wiki-sentences.candidates.csv", sents)
        write(args.out / "geo-wiki-dev.candidates.csv", dev)
    except (OSError, KeyError, StopIteration, ValueError, EOFError, ET.ParseError, zipfile.BadZipFile) as exc:
        print(
            f"error: {args.source}: not the gensim 4.4.0 wheel or its Wikipedia dump "
            f"({type(exc).__name__}: {exc}); give the wheel from 'pip download --no-deps gensim==4.4.0'",
            file=sys.stderr,
        )
        return 2
    print(
        f"{len(pages)} articles: {len(caps)} captions, {len(sents)} sentences, "
        f"{len(dev)} development sentences -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
