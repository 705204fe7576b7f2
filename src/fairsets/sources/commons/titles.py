"""Commons file titles: the canonical ``File:`` title of a title or Commons URL (:func:`file_title`)
and the ``Special:FilePath`` fallback URL (:func:`commons_image_url`).
"""

from __future__ import annotations

import re
import urllib.parse

COMMONS_FILEPATH = "https://commons.wikimedia.org/wiki/Special:FilePath/"


# Characters MediaWiki never allows in a title.
_ILLEGAL = re.compile(r"[#<>\[\]|{}\x00-\x1f\x7f]")
_OTHER_NAMESPACES = {
    "category",
    "user",
    "user talk",
    "template",
    "special",
    "commons",
    "help",
    "creator",
    "institution",
    "talk",
    "file talk",
    "media",
}
_FILE_PREFIX = re.compile(r"^(?:file|image)\s*:\s*", re.IGNORECASE)


def _canonical(name: str, original: str) -> str:
    name = urllib.parse.unquote(name).replace("_", " ")
    name = " ".join(name.split())
    if not name:
        raise ValueError(f"not a Commons file title or URL: {original!r} (empty file name)")
    if _ILLEGAL.search(name):
        raise ValueError(f"not a Commons file title or URL: {original!r} (illegal character in title)")
    head, sep, _ = name.partition(":")
    if sep and head.strip().lower() in _OTHER_NAMESPACES:
        raise ValueError(f"not a Commons file title or URL: {original!r} (namespace {head!r})")
    first = name[0].upper()
    if len(first) == 1:  # MediaWiki upper-cases the first letter ("ß".upper() is "SS": keep it)
        name = first + name[1:]
    return f"File:{name}"


def file_title(url_or_title: str) -> str:
    """Return the canonical file title (``"File:Foo bar.jpg"``) of a Commons file.

    Accepts a title (``"File:Foo_bar.jpg"``, ``"Image:foo bar.jpg"``, ``"Foo%20bar.jpg"``), a
    ``…/wiki/Special:FilePath/Foo%20bar.jpg`` URL (what Wikidata's P18 gives), a
    ``…/wiki/File:Foo_bar.jpg`` file-page URL, an ``index.php?title=File:…`` URL or an
    ``upload.wikimedia.org`` original or thumbnail URL. Underscores become spaces, the name is
    URL-decoded and its first letter upper-cased, as MediaWiki does.

    Raises:
        ValueError: for an empty value, a URL that does not name a Commons file, a title in
            another namespace or one with characters MediaWiki forbids.
    """
    text = (url_or_title or "").strip()
    if not text:
        raise ValueError("not a Commons file title or URL: empty value")
    if re.match(r"^(?:https?:)?//", text, re.IGNORECASE):
        parts = urllib.parse.urlsplit(text if not text.startswith("//") else "https:" + text)
        path = parts.path
        m = re.search(r"/wiki/Special:FilePath/(.+)$", path, re.IGNORECASE)
        if m:
            return _canonical(m.group(1), text)
        m = re.search(r"/wiki/(?:File|Image):(.+)$", path, re.IGNORECASE)
        if m:
            return _canonical(m.group(1), text)
        title = urllib.parse.parse_qs(parts.query).get("title", [""])[0]
        if path.endswith("/index.php") and _FILE_PREFIX.match(title):
            return _canonical(_FILE_PREFIX.sub("", title), text)
        if parts.hostname == "upload.wikimedia.org":
            segs = [s for s in path.split("/") if s]
            # /wikipedia/commons/a/ab/Name.jpg  or  /wikipedia/commons/thumb/a/ab/Name.jpg/320px-Name.jpg
            if "thumb" in segs:
                i = segs.index("thumb")
                if len(segs) > i + 3:
                    return _canonical(segs[i + 3], text)
            elif len(segs) >= 5:
                return _canonical(segs[4], text)
        raise ValueError(f"not a Commons file title or URL: {text!r}")
    return _canonical(_FILE_PREFIX.sub("", text), text)


def commons_image_url(title: str, width: int | None = None) -> str:
    """``https://commons.wikimedia.org/wiki/Special:FilePath/<file>?width=W`` for a title or URL.

    Commons redirects this to the original file, or to a thumbnail ``width`` pixels wide. It is
    the fallback when no API answer (hence no ``thumb_url``) exists.
    """
    name = file_title(title)[len("File:") :].replace(" ", "_")
    url = COMMONS_FILEPATH + urllib.parse.quote(name, safe="")
    if width:
        url += f"?width={int(width)}"
    return url
