"""Votes → head → labels: the consensus of a vote trains a head, and the head labels every other box.

One run of the three commands, as a user chains them, offline:

1. ``annotate vote`` asks three scripted annotators (:mod:`annotator_script`: real loopback
   servers that read a box's label from the colour of the crop they are sent) about a sample of
   the kept boxes of a :func:`ann_data.make_ann` folder. Two are honest; the third calls every
   ``unclear`` box ``male`` (so those never reach consensus: the table really is filtered) and every
   ``mixed`` box ``unclear`` (kept all the same by the default 2-of-3 rule for ``mixed``);
2. ``annotate train VOTES --ann ANN`` embeds the voted boxes (by box_id, from the folder's own
   box tables) with MobileNetV2's ImageNet weights and fits a head on the consensus labels;
3. ``annotate classify ANN --head`` labels every kept box.

The colours are trivially separable, so a working pipeline labels the boxes *outside* the vote's
sample almost perfectly; a vote table whose rows name the wrong boxes (a shifted box_id, a key of
another image) teaches the head noise and does not.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ann_data import make_ann
from annotator_script import Annotator, annotators_toml
from train_data import mobilenet_weights

from cli_helpers import run_cli
from fairsets.annotate import layout
from fairsets.annotate.chat.items import kept_boxes
from fairsets.annotate.heads.labels import item_id
from fairsets.annotate.heads.store import load_head

pytestmark = pytest.mark.slow

SAMPLE = 48


def test_votes_train_a_head_that_labels_the_rest(tmp_path: Path, shard_writer: Any, capsys: Any) -> None:
    weights = mobilenet_weights()
    ann = make_ann(tmp_path, shard_writer, shards=3, images_per_shard=16, boxes_per_image=2, seed=5)
    votes = tmp_path / "votes.csv"
    with (
        Annotator("ada") as ada,
        Annotator("bea") as bea,
        Annotator("cy", bias={"unclear": "male", "mixed": "unclear"}) as cy,
    ):
        toml = annotators_toml(tmp_path / "annotators.toml", [ada, bea, cy], max_concurrency=4, timeout=10)
        code, _, err = run_cli(
            ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml,
             "--sample", SAMPLE, "--seed", 3, "--out", votes],
            capsys,
        )  # fmt: skip
        assert code == 0, err
        # (make_ann paints flat boxes: identical views with the same option order may be answered once)
        assert all(0 < a.server.hits <= SAMPLE for a in (ada, bea, cy))

    with open(votes, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    voted = {item_id(r["shard"], r["key"], int(r["box_id"])): r["label"] for r in rows}
    answers = pq.read_table(tmp_path / "votes.answers.parquet").to_pylist()
    sampled = {r["item"] for r in answers}
    assert len(sampled) == SAMPLE and sampled <= set(ann.truth)
    assert sorted((r["item"], r["annotator"], r["status"]) for r in answers) == sorted(
        (it, name, "ok") for it in sampled for name in ("ada", "bea", "cy")
    )
    # every consensus row is a sampled kept box with its true label; 'unclear' was filtered out,
    # 'mixed' kept by the relaxed rule, the other two by all three
    assert len(voted) == len(rows) and set(voted) <= sampled
    assert voted == {it: ann.truth[it] for it in voted}
    assert set(voted) == {it for it in sampled if ann.truth[it] != "unclear"}
    assert {r["label"]: r["rule"] for r in rows} == {"female": "all", "male": "all", "mixed": "relaxed"}

    head_path = tmp_path / "gender.npz"
    code, _, err = run_cli(
        ["annotate", "train", votes, "--ann", ann.path, "--encoder", "torchvision:mobilenet_v2",
         "--pretrained", weights, "--out", head_path, "--seed", 0, "-q"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    head = load_head(head_path)
    assert head.classes == sorted(set(voted.values())) == ["female", "male", "mixed"]
    assert head.training["parts"] and sum(head.training["parts"].values()) == len(voted)

    code, _, err = run_cli(
        ["annotate", "classify", ann.path, "--head", head_path, "--workers", "0", "-q"], capsys
    )
    assert code == 0, err
    predicted: dict[str, str | None] = {}
    for shard in sorted({it.split("/")[0] for it in ann.truth}):
        for r in pq.read_table(layout.attribute_path(ann.path, "gender", shard)).to_pylist():
            predicted[item_id(r["shard"], r["key"], int(r["box_id"]))] = r["perceived_gender"]
    kept = {b.item for b in kept_boxes(ann.path)}
    assert set(predicted) == kept == set(ann.truth)  # every kept box, no dropped one
    assert all(p in head.classes for p in predicted.values())

    # The boxes the vote never asked about, among the labels the head knows ('unclear' it cannot know).
    rest = [it for it in ann.truth if it not in sampled and ann.truth[it] in head.classes]
    assert len(rest) >= 30
    right = sum(predicted[it] == ann.truth[it] for it in rest)
    assert right / len(rest) >= 0.9, [(it, ann.truth[it], predicted[it]) for it in rest]
