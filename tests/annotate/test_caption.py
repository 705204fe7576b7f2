"""``annotate caption``: every kept box described by a chat model shown the whole image, the box in red.

A real loopback server (:class:`RedBoxCaptioner`) saves every image it is sent, finds the red frame
in it, reads the colour of the box inside the frame (the box's label, :mod:`ann_data`) and answers
``"A person in <label>."``: so the captions prove the right box was framed in the right image, and
the saved JPEGs are checked pixel by pixel (the frame where the box is, as wide as
``views.line_width`` says, the box's own pixels untouched). Then: failed requests recorded per row
and asked again on the next run, refusals kept, hostile answers stored safely, keys never written,
another prompt under the same name refused, and the CLI's one-line errors.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from ann_data import GENDER, Ann, label_of_pixels, make_ann
from PIL import Image

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.captions.caption import (
    MAX_CAPTION_CHARS,
    caption_boxes,
    captions_path,
    prompt_sha256,
    stage,
)
from fairsets.annotate.captions.resume import captioner_lock
from fairsets.annotate.chat.items import BoxItem, views
from fairsets.annotate.chat.requests import CAPTION_VIEW
from fairsets.annotate.chat.views import DEFAULT_CAPTION_PROMPT, line_width
from fairsets.annotate.read import captions as read_captions
from openai_server import OpenAIServer, Step

KEY_ENV = "FAIRSETS_TEST_CAPTIONER_KEY"
SECRET = "sk-test-caption-5ecret-XYZ-0042"


def is_red(rgb: np.ndarray) -> np.ndarray:
    """Pure red within JPEG tolerance (the box colours and the background are far from it)."""
    rgb = rgb.astype(int)
    return (rgb[..., 0] >= 190) & (rgb[..., 1] <= 70) & (rgb[..., 2] <= 70)


def decode(jpeg: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))


def framed_label(rgb: np.ndarray) -> tuple[str, tuple[int, int, int, int]]:
    """The label of the box framed in red in ``rgb`` and the frame's outer rectangle (x0, y0, x1, y1)."""
    ys, xs = np.nonzero(is_red(rgb))
    x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
    lw = line_width(rgb.shape, CAPTION_VIEW["width"])
    inner = rgb[y0 + lw : y1 - lw, x0 + lw : x1 - lw]
    return label_of_pixels(inner, GENDER), (x0, y0, x1, y1)


class RedBoxCaptioner:
    """A loopback OpenAI-compatible server that captions the box it finds framed in red.

    ``answers`` maps the SHA-256 of each image received to the text answered; ``special(label,
    frame)`` may return another :class:`Step` for a box (a failure, a refusal, hostile text).
    """

    def __init__(self, image_dir: Path | None = None, delay: float = 0.0) -> None:
        self.server = OpenAIServer(image_dir=image_dir)
        self.server.respond = self._respond
        self.answers: dict[str, str] = {}
        self.seen: list[str] = []  # image sha256 of every request, in arrival order
        self.special: Callable[[str, tuple[int, int, int, int]], Step | None] | None = None
        self.delay = delay

    def _respond(self, body: dict[str, Any]) -> Step:
        import base64

        (url,) = [p["image_url"]["url"] for p in body["messages"][-1]["content"] if p["type"] == "image_url"]
        jpeg = base64.b64decode(url.partition(",")[2])
        sha = hashlib.sha256(jpeg).hexdigest()
        label, frame = framed_label(decode(jpeg))
        with self.server._lock:
            self.seen.append(sha)
        step = self.special(label, frame) if self.special else None
        if step is None:
            step = Step(text=f"A person in {label}.", usage=(1000 + frame[0], 20))
        if step.status == 200 and step.refusal is None:
            with self.server._lock:
                self.answers[sha] = step.text
        step.delay = step.delay or self.delay
        return step

    @property
    def hits(self) -> int:
        return self.server.hits

    def toml(self, path: Path, name: str = "cap", model: str = "cap-vl", concurrency: int = 1) -> Path:
        path.write_text(
            f'[annotators.{name}]\nbase_url = "{self.server.base_url}"\nmodel = "{model}"\n'
            f'api_key_env = "{KEY_ENV}"\nmax_concurrency = {concurrency}\ntimeout = 2\n'
        )
        return path

    def __enter__(self) -> RedBoxCaptioner:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def view_sha(ann: Path, item: BoxItem) -> str:
    """The SHA-256 of the red-box JPEG ``annotate caption`` sends for ``item``."""
    ((_, jpeg, reason),) = list(views(ann, [item], **CAPTION_VIEW))
    assert reason is None, reason
    return hashlib.sha256(jpeg).hexdigest()


def table_order(ann: Ann) -> list[str]:
    """The kept boxes' items in box-table order (shard by shard)."""
    items = []
    for shard in sorted({s for s, _ in ann.sizes}):
        t = pq.read_table(layout.boxes_path(ann.path, shard)).to_pylist()
        items += [f"{r['shard']}/{r['key']}/{r['box_id']}" for r in t if r["kept"]]
    return items


def rows_of(ann: Path, captioner: str = "cap") -> list[dict[str, Any]]:
    return read_captions(ann, captioner).to_arrow_table().to_pylist()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.mark.parametrize("size", [(200, 150), (1400, 900)], ids=["small", "large"])
def test_each_box_is_sent_framed_in_red_where_it_is_and_captioned(
    tmp_path: Path, shard_writer: Any, size: tuple[int, int]
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=3, boxes_per_image=2, size=size)
    with RedBoxCaptioner(image_dir=tmp_path / "seen") as cap:
        entry = caption_boxes(ann.path, cap.toml(tmp_path / "annotators.toml"), "cap", backoff=0.01)
        images = list(cap.server.images)
        headers = list(cap.server.headers)
    order = table_order(ann)
    assert len(images) == len(order) == 6  # one request per kept box, none for a dropped box
    assert all(h.get("Authorization") == f"Bearer {SECRET}" for h in headers)
    w, h = size
    scale = min(1.0, CAPTION_VIEW["max_side"] / max(w, h))
    nw, nh = round(w * scale), round(h * scale)
    for item, path in zip(order, images, strict=True):  # one request at a time: table order
        rgb = decode(path.read_bytes())
        assert rgb.shape == (nh, nw, 3)
        x1, y1, x2, y2 = ann.boxes[item]
        sx, sy = nw / w, nh / h
        left, top = math.floor(x1 * sx), math.floor(y1 * sy)
        right, bottom = math.ceil(x2 * sx), math.ceil(y2 * sy)
        lw = line_width(rgb.shape, CAPTION_VIEW["width"])
        assert lw == 3  # CAPTION_VIEW sends at most 1024 px, so the frame as sent stays 3 px
        red = is_red(rgb)
        frame = np.zeros(red.shape, bool)
        frame[top - lw : bottom + lw, left - lw : right + lw] = True
        frame[top:bottom, left:right] = False
        assert red[frame].mean() > 0.99, f"{item}: frame pixels not red"
        assert not red[top:bottom, left:right].any(), f"{item}: red inside the box"
        # just inside the frame: the box's outermost pixels keep their colour
        for edge in (
            rgb[top, left:right],
            rgb[bottom - 1, left:right],
            rgb[top:bottom, left],
            rgb[top:bottom, right - 1],
        ):
            assert not is_red(edge).any()
        # measured width: the run of red pixels left of the box on its middle row, then background
        mid = (top + bottom) // 2
        run = 0
        while is_red(rgb[mid, left - run - 1]):
            run += 1
        assert run == lw == line_width((nh, nw), 3)
        assert not red[mid, : left - lw].any() and not red[mid, right + lw :].any()
    rows = rows_of(ann.path)
    assert [f"{r['shard']}/{r['key']}/{r['box_id']}" for r in rows] == order
    for r in rows:
        item = f"{r['shard']}/{r['key']}/{r['box_id']}"
        assert r["status"] == "ok" and r["reason"] is None
        assert r["caption"] == f"A person in {ann.truth[item]}."
        assert r["model"] == "cap-vl" and r["annotator"] == "cap"
        assert r["prompt_sha256"] == prompt_sha256(DEFAULT_CAPTION_PROMPT)
        assert r["finish_reason"] == "stop" and r["completion_tokens"] == 20
    assert entry["counts"] == {"ok": 6, "refused": 0, "failed": 0, "rejected": 0}
    assert entry["run"]["requests_sent"] == 6


def test_captions_match_the_answers_for_each_box_and_a_rerun_sends_nothing(
    tmp_path: Path, shard_writer: Any
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=4, boxes_per_image=3, seed=3)
    with RedBoxCaptioner() as cap:
        toml = cap.toml(tmp_path / "annotators.toml", concurrency=4)
        entry = caption_boxes(ann.path, toml, "cap", backoff=0.01)
        assert cap.hits == len(ann.truth) == 24
        rows = rows_of(ann.path)
        by_item = {f"{r['shard']}/{r['key']}/{r['box_id']}": r for r in rows}
        assert list(by_item) == table_order(ann)
        assert not set(by_item) & set(ann.dropped)
        for item, r in by_item.items():
            shard, key, box_id = item.split("/")
            sha = view_sha(ann.path, BoxItem(shard, key, int(box_id), ann.boxes[item]))
            assert r["caption"] == cap.answers[sha] == f"A person in {ann.truth[item]}."
        # the manifest: model, host, prompt, counts, tokens; never the key
        manifest = json.loads((ann.path / layout.MANIFEST).read_text())
        got = manifest["captions"]["cap"]
        assert got["model"] == "cap-vl" and got["endpoint"] == cap.server.base_url.split("/")[2]
        assert got["prompt"] == DEFAULT_CAPTION_PROMPT
        assert got["prompt_sha256"] == hashlib.sha256(DEFAULT_CAPTION_PROMPT.encode()).hexdigest()
        assert got["counts"]["ok"] == 24 and got["tokens"]["completion"] == 24 * 20
        assert got["tokens"]["prompt"] == sum(r["prompt_tokens"] for r in rows)
        assert got["seconds"] >= 0 and entry["run"]["boxes_per_s"] > 0
        for shard in ("00000", "00001"):
            marker = json.loads(layout.marker_path(ann.path, stage("cap"), shard).read_text())
            assert marker["model"] == "cap-vl" and marker["stats"]["ok"] == 12
        tables = {p: p.read_bytes() for p in (ann.path / "captions").rglob("*.parquet")}
        again = caption_boxes(ann.path, toml, "cap", backoff=0.01)  # finished: skipped
        assert again["run"]["skipped"] == 2 and again["run"]["requests_sent"] == 0 and cap.hits == 24
        # a changed box table is captioned again, from the cache (the views did not change)
        boxes = layout.boxes_path(ann.path, "00001")
        t = pq.read_table(boxes)
        pq.write_table(
            t.set_column(t.schema.get_field_index("conf"), "conf", t["conf"]), boxes, compression="gzip"
        )
        third = caption_boxes(ann.path, toml, "cap", backoff=0.01)
        assert third["run"]["captioned"] == 1 and third["run"]["cache_hits"] == 12 and cap.hits == 24
        assert {p: p.read_bytes() for p in tables} == tables
    # --limit: a seeded sample, the same for the same seed, only those boxes in the tables
    with RedBoxCaptioner() as other:
        toml2 = other.toml(tmp_path / "a2.toml", name="small", concurrency=2)
        caption_boxes(ann.path, toml2, "small", limit=5, seed=7, backoff=0.01)
        first = rows_of(ann.path, "small")
        assert len(first) == 5 and other.hits == 5
        caption_boxes(ann.path, toml2, "small", limit=5, seed=7, backoff=0.01)
        assert rows_of(ann.path, "small") == first and other.hits == 5
    assert len(rows_of(ann.path, None)) == 24 + 5


def test_failures_are_recorded_and_asked_again_refusals_and_hostile_text_kept_safely(
    tmp_path: Path, shard_writer: Any
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=5, boxes_per_image=2, seed=5)
    order = table_order(ann)
    keys = sorted({item.split("/")[1] for item in order})
    # the last image goes missing from the shard: its boxes are rejected with the reason
    tar = Path(json.loads((ann.path / layout.MANIFEST).read_text())["inputs"][0]["path"])
    members = {}
    with tarfile.open(tar) as tf:
        for m in tf.getmembers():
            if not m.name.startswith(keys[-1]):
                members[m.name] = tf.extractfile(m).read()  # type: ignore[union-attr]
    with tarfile.open(tar, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    hostile = "<script>alert('x')</script> [bold red]boom[/] \x00\x1b[31m" + "A" * 100_000
    failing = {"on": True}
    slot = ann.sizes[("00000", keys[0])][0] // 2
    answers_to_box_1 = [
        Step(refusal="I cannot describe people."),
        Step(text=hostile),
        Step(text="A person in a long sentence that", finish_reason="length"),
        Step(text="  \n "),
    ]

    def special(label: str, frame: tuple[int, int, int, int]) -> Step | None:
        if frame[0] < slot:  # box 0 of its image (one request at a time: table order)
            return Step(status=500) if failing["on"] else None
        return answers_to_box_1.pop(0) if answers_to_box_1 else None

    with RedBoxCaptioner() as cap:
        cap.special = special
        toml = cap.toml(tmp_path / "annotators.toml")
        first = caption_boxes(ann.path, toml, "cap", max_retries=1, backoff=0.01)
        rows = {f"{r['shard']}/{r['key']}/{r['box_id']}": r for r in rows_of(ann.path)}
        assert list(rows) == order
        for item, r in rows.items():
            if item.split("/")[1] == keys[-1]:
                assert r["status"] == "rejected" and "not found" in r["reason"] and r["caption"] is None
            elif item.endswith("/0"):
                assert r["status"] == "failed" and "http 500" in r["reason"] and r["caption"] is None
        assert first["counts"]["failed"] == 5 and first["counts"]["rejected"] >= 2
        statuses = [rows[i]["status"] for i in order if i.endswith("/1") and i.split("/")[1] != keys[-1]]
        assert sorted(statuses) == ["failed", "ok", "ok", "refused"]  # failed: the empty answer
        empty = [r for r in rows.values() if r["reason"] == "the model answered with no text"]
        assert len(empty) == 1 and empty[0]["status"] == "failed" and empty[0]["caption"] is None
        refused = [r for r in rows.values() if r["status"] == "refused"]
        assert len(refused) == 1 and "I cannot describe people." in refused[0]["reason"]
        stored = [r for r in rows.values() if r["caption"] and r["caption"].startswith("<script>")]
        assert len(stored) == 1
        (safe,) = stored
        assert (
            safe["caption"]
            == ("<script>alert('x')</script> [bold red]boom[/] [31m" + "A" * 100_000)[:MAX_CAPTION_CHARS]
        )
        assert "\x00" not in safe["caption"] and f"of {len(hostile) - 2} characters" in safe["reason"]
        assert "removed 2 control characters" in safe["reason"]
        cut = [r for r in rows.values() if r["finish_reason"] == "length"]
        assert cut[0]["status"] == "ok" and "cut short" in cut[0]["reason"] and first["cut_short"] == 1
        sent = cap.hits
        failing["on"] = False
        second = caption_boxes(ann.path, toml, "cap", max_retries=1, backoff=0.01)
        # only the failed boxes (the empty answer too: never final); refusals and answers from the cache
        assert cap.hits - sent == 5
        assert second["counts"]["failed"] == 0 and second["counts"]["refused"] == 1
        rows2 = {f"{r['shard']}/{r['key']}/{r['box_id']}": r for r in rows_of(ann.path)}
        for item, r in rows.items():
            if r["status"] == "failed":
                assert (
                    rows2[item]["status"] == "ok"
                    and rows2[item]["caption"] == f"A person in {ann.truth[item]}."
                )
            else:
                assert rows2[item] == r
    # the key never reached a file, and hostile text never reached the manifest
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p
    assert "<script>" not in (ann.path / layout.MANIFEST).read_text()


def test_another_prompt_or_model_under_one_name_needs_replace(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=2, boxes_per_image=1)
    with RedBoxCaptioner() as cap:
        toml = cap.toml(tmp_path / "annotators.toml", concurrency=2)
        code, _, err = run_cli(
            ["annotate", "caption", ann.path, "--annotators", toml, "--captioner", "cap"], capsys
        )
        assert code == 0, err
        assert "cap: 2 captions, 0 failed;" in err and "boxes/s" in err and "A person" not in err
        prompt = tmp_path / "prompt.txt"
        prompt.write_text("Describe the person in the red box in five words.\n")
        args = [
            "annotate",
            "caption",
            ann.path,
            "--annotators",
            toml,
            "--captioner",
            "cap",
            "--prompt-file",
            prompt,
        ]
        code, _, err = run_cli(args, capsys)
        assert_one_line_error(code, err, "another prompt", "--replace")
        before = cap.hits
        code, _, err = run_cli([*args, "--replace", "-q"], capsys)
        assert code == 0, err
        assert cap.hits == before + 2
        assert cap.server.bodies[-1]["messages"][-1]["content"][-1]["text"].startswith(
            "Describe the person in the red"
        )
        rows = rows_of(ann.path)
        assert {r["prompt_sha256"] for r in rows} == {prompt_sha256(prompt.read_text().strip())}
        other = cap.toml(tmp_path / "other.toml", model="another-vl")
        code, _, err = run_cli(
            [
                "annotate",
                "caption",
                ann.path,
                "--annotators",
                other,
                "--captioner",
                "cap",
                "--prompt-file",
                prompt,
            ],
            capsys,
        )
        assert_one_line_error(code, err, "'another-vl'", "--replace")
        code, _, err = run_cli(
            ["annotate", "caption", ann.path, "--annotators", toml, "--captioner", "nope"], capsys
        )
        assert_one_line_error(code, err, "'nope'", "cap")
        code, _, err = run_cli([*args, "--prompt", "x"], capsys)
        assert_one_line_error(code, err, "--prompt-file")
        base = ["annotate", "caption", ann.path, "--annotators", toml, "--captioner", "cap"]
        code, _, err = run_cli([*base, "--limit", "0"], capsys)
        assert_one_line_error(code, err, "--limit 0")
        code, _, err = run_cli([*base, "--prompt", "bad \udce9 bytes"], capsys)
        assert_one_line_error(code, err, "--prompt-file")
        with captioner_lock(ann.path.resolve(), "cap"):  # another run of this captioner holds it
            code, _, err = run_cli([*base, "--replace"], capsys)
        assert_one_line_error(code, err, "another annotate caption run", "--captioner cap")
        assert cap.hits == before + 2  # none of these sent a request


def test_an_endpoint_that_refuses_the_key_is_one_line_and_nothing_is_lost(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=2, boxes_per_image=1)
    with RedBoxCaptioner() as cap:
        cap.special = lambda label, frame: Step(status=401, error_message="bad key")
        toml = cap.toml(tmp_path / "annotators.toml")
        code, _, err = run_cli(
            ["annotate", "caption", ann.path, "--annotators", toml, "--captioner", "cap"], capsys
        )
        line = assert_one_line_error(code, err, "HTTP 401", "cached")
        assert SECRET not in line
    assert not captions_path(ann.path, "cap", "00000").exists()
    assert not layout.marker_path(ann.path, stage("cap"), "00000").exists()
    entry = json.loads((ann.path / layout.MANIFEST).read_text())["captions"]["cap"]
    assert entry["model"] == "cap-vl" and "counts" not in entry  # the model in use, no captions yet
