"""The gazetteer is built once and loaded from its cache file after: the same names and candidates,
a rebuilt file when it is unreadable, and a working gazetteer when nothing can be cached."""

from __future__ import annotations

import logging

import pytest

from fairsets.geo import gazetteer as gz

#: A smaller gazetteer than the default (GeoNames' cities of 15,000 people and more; exonyms of
#: cities of a million): the cache works the same for every parameter set, at a third of the build.
SMALL = {"min_population": 15_000, "alternate_min_population": 1_000_000}


@pytest.fixture()
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("FAIRSETS_CACHE_DIR", str(tmp_path / "cache"))
    gz.gazetteer.cache_clear()
    yield tmp_path / "cache" / "geo"
    gz.gazetteer.cache_clear()


def _same(a: gz.Gazetteer, b: gz.Gazetteer) -> None:
    assert a.entries_frozen == b.entries_frozen
    assert (a.max_tokens, a.admin_codes, a.first_tokens) == (b.max_tokens, b.admin_codes, b.first_tokens)


def test_built_once_then_loaded(fresh):
    built = gz.gazetteer(**SMALL)
    files = list(fresh.glob("gazetteer-*.marshal"))
    assert len(files) == 1 and built.build_seconds > 0
    gz.gazetteer.cache_clear()
    loaded = gz.gazetteer(**SMALL)
    assert loaded is not built
    _same(loaded, built)
    assert loaded.lookup("paris") == built.lookup("paris") and loaded.lookup("paris")[0].iso3 == "FRA"
    # the first-level divisions of every namesake survive the cache (a tuple: places stay hashable)
    (us,) = [p for p in loaded.lookup("springfield") if p.iso3 == "USA" and p.kind == "city"]
    assert isinstance(us.admin1, tuple) and {"IL", "MA", "MO"} <= set(us.admin1) and hash(us)
    assert loaded.build_seconds < built.build_seconds


def test_an_unreadable_cache_file_is_rebuilt(fresh, caplog):
    built = gz.gazetteer(**SMALL)
    path = next(fresh.glob("gazetteer-*.marshal"))
    for junk in (b"", b"not marshal at all", path.read_bytes()[:1000]):
        path.write_bytes(junk)
        gz.gazetteer.cache_clear()
        with caplog.at_level(logging.WARNING, logger="fairsets.geo.gazetteer"):
            again = gz.gazetteer(**SMALL)
        _same(again, built)
        assert "building the gazetteer again" in caplog.text
        caplog.clear()


def test_a_cache_folder_that_cannot_be_written(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("FAIRSETS_CACHE_DIR", str(blocker))  # its geo/ sub-folder cannot exist
    gz.gazetteer.cache_clear()
    try:
        g = gz.gazetteer(**SMALL)
        assert g.lookup("london")
    finally:
        gz.gazetteer.cache_clear()
