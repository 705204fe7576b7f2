"""Where the VLM audit's reference set comes from (fairsets.audit.reference), on planted manifests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fairsets.audit.dataset import DatasetError
from fairsets.audit.prompts import default_prompts
from fairsets.audit.reference import (
    FROM_OPTION,
    FROM_PRESENT,
    FROM_RECIPE,
    audit_warnings,
    check_labels,
    declared_groups,
    parse_groups,
    resolve_reference,
)
from fairsets.audit.vlm import vlm_audit


def write_manifest(folder, recipe_cells, cells):
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"name": "x", "recipe": {"cells": recipe_cells}, "cells": [{"cell": c} for c in cells]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_declared_groups_come_from_the_recipe_and_the_build_cells(tmp_path):
    root = write_manifest(
        tmp_path / "a",
        {"state": ["Kerala", "Assam", "Sikkim"], "gender": ["female"]},
        [{"state": "Kerala", "gender": "female"}, {"state": "Assam", "gender": "female"}],
    )
    assert declared_groups(root, "state") == ["Assam", "Kerala", "Sikkim"]  # Sikkim: promised, empty
    assert declared_groups(root, "gender") == ["female"]
    assert declared_groups(root, "age") is None
    # no recipe cells for the attribute: the build's cells (every expected cell, empty ones too)
    root = write_manifest(tmp_path / "b", {}, [{"state": "Goa"}, {"state": "Kerala"}])
    assert declared_groups(root, "state") == ["Goa", "Kerala"]
    assert declared_groups(tmp_path / "none", "state") is None
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "manifest.json").write_text("{not json")
    assert declared_groups(tmp_path / "c", "state") is None


def test_resolve_reference_prefers_the_option_then_the_manifest_then_what_is_present(tmp_path):
    root = write_manifest(tmp_path / "a", {"state": ["Kerala", "Assam"]}, [])
    ref = resolve_reference(root, "state", ["Goa", "Assam"], ["Assam"])
    assert (ref.groups, ref.source, ref.declared) == (("Assam", "Goa"), FROM_OPTION, True)
    ref = resolve_reference(root, "state", None, ["Kerala"])
    assert (ref.groups, ref.source) == (("Assam", "Kerala"), FROM_RECIPE)
    ref = resolve_reference(root, "caste", None, ["b", "a"])
    assert (ref.groups, ref.source, ref.declared) == (("a", "b"), FROM_PRESENT, False)
    with pytest.raises(DatasetError, match=r"'Goa' that are not among the 2 groups declared"):
        check_labels(resolve_reference(root, "state", None, []), ["Kerala", "Goa"], "state")


def test_parse_groups():
    assert parse_groups(" Kerala,Tamil Nadu ,Assam") == ["Kerala", "Tamil Nadu", "Assam"]
    for bad, match in ((",", "empty"), ("a,,b", "empty name"), ("a,b,a", "names a twice")):
        with pytest.raises(ValueError, match=match):
            parse_groups(bad)


def test_warnings_name_what_can_mislead():
    ref = resolve_reference(None, "state", ["A", "B", "C"], [])
    sizes = {"A": 5, "B": 2, "C": 0}
    w = audit_warnings(ref, sizes, 3, "state", "balanced/test")
    assert len(w) == 2
    assert w[0].startswith("1 declared state group(s) have no image in balanced/test: C;")
    assert w[1].startswith("k = 3 >= the size of 1 state group(s): B (2);")
    assert audit_warnings(ref, sizes, 1, "state") == [w[0].replace(" in balanced/test", "")]
    (everything,) = audit_warnings(ref, {"A": 5, "B": 2, "C": 1}, 8, "state")
    assert everything.startswith("k = 8 >= n = 8 images")
    present = resolve_reference(None, "state", None, ["A"])
    assert audit_warnings(present, {"A": 3}, 1, "state")[0].startswith("no groups declared for 'state'")


def test_vlm_audit_without_a_declaration_warns_and_with_one_counts_the_empty_group():
    rng = np.random.default_rng(7)
    spec = default_prompts()
    texts = {p: rng.normal(size=8) for p in spec.all_prompts(include_job=True)}
    X = rng.normal(size=(6, 8))
    labels = ["A", "A", "A", "B", "B", "B"]
    head = {"dataset": "d", "model": "m", "attribute": "state"}
    doc = vlm_audit(X, labels, texts, spec, k=2, header=head)
    assert doc["groups"] == ["A", "B"] and doc["reference"]["declared"] is False
    assert doc["warnings"][0].startswith("no groups declared")
    doc = vlm_audit(X, labels, texts, spec, k=2, header=head, groups=["A", "B", "C"])
    assert doc["empty_groups"] == ["C"] and doc["group_sizes"] == {"A": 3, "B": 3, "C": 0}
    for r in doc["results"]:
        assert r["metrics"]["topk"]["C"] == 0 and r["metrics"]["jsd_uniform"] > 0
    with pytest.raises(ValueError, match="not among the 1 groups"):
        vlm_audit(X, labels, texts, spec, k=2, header=head, groups=["A"])
