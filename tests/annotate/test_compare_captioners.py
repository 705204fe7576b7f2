"""``annotate compare-captioners``: two captioners, a judge model, and A's win rate with its interval.

Real loopback servers play the models. A captioner's caption is derived from the image it is sent
(so every box gets its own caption and the test can tell whose caption is whose); a judge reads
"Caption 1" / "Caption 2" from the prompt text and answers by a rule. Every expected number is
computed here from what the servers saw, not from the code under test: which caption the judge was
shown first, which position it chose, how many replies were unusable.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pyarrow.parquet as pq
import pytest
from ann_data import make_ann

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.captions.compare import SALT, compare_captioners
from fairsets.annotate.chat import items
from fairsets.annotate.chat.annotators import load_annotators
from fairsets.annotate.chat.requests import CAPTION_VIEW, caption_request, chat_cache_dir
from fairsets.annotate.layout import AnnotationError
from fairsets.fetch.chat import ChatClient, ChatServiceError
from openai_server import ECHO_KEY, OpenAIServer, Step, last_user_text
from secret_sweep import leaks

_PAIR = re.compile(r"Caption 1: <<<(.*)>>>\nCaption 2: <<<(.*)>>>")
LONG = (
    "stands in the centre of a bright room wearing a plain shirt, looking at the camera, one arm "
    "relaxed at the side, with a pale wall and soft daylight behind"
)


def _image_hash(body: dict[str, Any]) -> str | None:
    for msg in body.get("messages", []):
        for part in msg.get("content") if isinstance(msg.get("content"), list) else []:
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if url.startswith("data:"):
                return hashlib.sha256(base64.b64decode(url.partition(",")[2])).hexdigest()
    return None


class Model:
    """One loopback chat model: captions by ``style``, judges with ``judge(caption_1, caption_2)``.

    ``fail`` holds image hashes whose caption requests get HTTP 500; ``judged`` records every
    judge request as ``(image hash, caption 1, caption 2, reply)``.
    """

    def __init__(
        self,
        name: str,
        style: str = "short",
        judge: Callable[[str, str], str] | None = None,
        status: int | None = None,
    ) -> None:
        self.name, self.style, self.judge = name, style, judge
        self.fail: set[str] = set()
        self.status = status
        self.judged: list[tuple[str, str, str, str]] = []
        self.captioned: list[str] = []
        self.server = OpenAIServer()
        self.server.respond = self._respond

    def caption_of(self, image: str) -> str:
        tag = image[:10]
        return f"Person {tag} {LONG}." if self.style == "long" else f"Person {tag}."

    def _respond(self, body: dict[str, Any]) -> Step:
        if self.status is not None:
            return Step(status=self.status)
        text, image = last_user_text(body), _image_hash(body)
        assert image is not None, "every request carries the red-box image"
        pair = _PAIR.search(text)
        if pair is not None:
            assert self.judge is not None, f"{self.name} is no judge"
            reply = self.judge(pair.group(1), pair.group(2))
            with self.server._lock:
                self.judged.append((image, pair.group(1), pair.group(2), reply))
            return Step(text=reply)
        if image in self.fail:
            return Step(status=500)
        with self.server._lock:
            self.captioned.append(image)
        return Step(text=self.caption_of(image))

    def table(self, **extra: Any) -> str:
        lines = [
            f"[annotators.{self.name}]",
            f'base_url = "{self.server.base_url}"',
            f'model = "{self.name}-vl"',
        ]
        lines += [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in extra.items()]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Model:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def prefers_longer(one: str, two: str) -> str:
    return "Caption 1 has more detail.\nVerdict: 1" if len(one) > len(two) else "Verdict: 2"


def always_first(one: str, two: str) -> str:
    return "Verdict: 1"


def write_toml(path: Path, *models: Model, **extra: Any) -> Path:
    extra = {"max_concurrency": 4, "timeout": 5, "api_key_env": "", **extra}
    path.write_text("\n".join(m.table(**extra) for m in models))
    return path


def wilson(successes: float, n: int) -> tuple[float, float]:
    """The Wilson score interval at 95 %, written out here from the textbook formula."""
    z = NormalDist().inv_cdf(0.975)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.fixture(scope="module")
def ann(tmp_path_factory: pytest.TempPathFactory, shard_writer: Any) -> Path:
    """24 kept boxes over 2 shards (each image also has a dropped box nobody may be asked about)."""
    return make_ann(tmp_path_factory.mktemp("compare"), shard_writer, images_per_shard=6).path


def fresh(ann: Path, tmp_path: Path) -> Path:
    """A copy of the annotation folder with an empty answer cache (tests must not share answers)."""
    import shutil

    copy = tmp_path / "ann"
    shutil.copytree(ann, copy, ignore=shutil.ignore_patterns("chat-cache"))
    return copy


def long_won(model_x: Model, one: str, two: str, reply: str) -> bool:
    """Whether the judge chose X's (long) caption, read from the prompt it saw and its reply."""
    chosen = one if reply.strip().endswith("1") else two
    return LONG in chosen


# ---------------------------------------------------------------------------------------- win rate


def test_a_judge_preferring_detail_gives_the_detailed_captioner_every_win(ann: Path, tmp_path: Path) -> None:
    folder = fresh(ann, tmp_path)
    with Model("x", "long") as x, Model("y", "short") as y, Model("z", judge=prefers_longer) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        got = compare_captioners(folder, toml, a="x", b="y", judge="z", n=16, seed=3, out=tmp_path / "out")

    # the sample is the seeded one, and every box of it went to both captioners and to the judge
    want = items.sample(items.kept_boxes(folder), 16, 3, salt=SALT)
    views = {it.item: jpeg for it, jpeg, _ in items.views(folder, want, **CAPTION_VIEW)}
    hashes = {hashlib.sha256(j).hexdigest() for j in views.values()}
    assert set(x.captioned) == set(y.captioned) == {j for j, *_ in z.judged} == hashes
    assert len(z.judged) == 16
    # the two captioners were asked at the same time, not one after the other
    assert min(y.server.times) < max(x.server.times) and min(x.server.times) < max(y.server.times)

    wins = sum(long_won(x, one, two, reply) for _, one, two, reply in z.judged)
    assert wins == 16
    assert got["counts"] == {"A": 16, "B": 0, "tie": 0, "invalid": 0}
    assert got["rate"] == wins / 16 == 1.0
    low, high = wilson(wins, 16)
    assert got["low"] == pytest.approx(low, abs=1e-12) and got["high"] == 1.0 == high
    assert (got["level"], got["method"], got["n_judged"], got["n_asked"]) == (0.95, "wilson", 16, 16)
    assert got["run"]["requests"] == {"a": 16, "b": 16, "judge": 16, "total": 48}
    assert got["run"]["captions_from_cache"] == 0

    # verdicts.parquet: one row per box, the captions each model wrote, the order the judge saw
    rows = pq.read_table(tmp_path / "out" / "verdicts.parquet").to_pylist()
    assert [r["item"] for r in rows] == sorted(views)
    seen = {img: (one, two) for img, one, two, _ in z.judged}
    for r in rows:
        img = hashlib.sha256(views[r["item"]]).hexdigest()
        assert r["caption_a"] == x.caption_of(img) and r["caption_b"] == y.caption_of(img)
        assert seen[img] == (
            (r["caption_a"], r["caption_b"]) if r["a_first"] else (r["caption_b"], r["caption_a"])
        )
        assert r["verdict"] == "A"
    on_disk = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert on_disk["rate"] == 1.0 and on_disk["a"] == {
        "name": "x",
        "model": "x-vl",
        "host": x.server.base_url.split("/")[2],
    }
    assert on_disk["warnings"] == []
    page = (tmp_path / "out" / "report.html").read_text()
    assert "100.0 %" in page and page.count("data:image/jpeg;base64,") == 2  # two examples of A winning
    assert rows[0]["caption_a"] in page and rows[1]["caption_b"] in page and rows[2]["caption_a"] not in page


def test_a_judge_that_always_says_first_is_balanced_out_by_the_order(ann: Path, tmp_path: Path) -> None:
    folder = fresh(ann, tmp_path)
    with Model("x", "long") as x, Model("y") as y, Model("z", judge=always_first) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        got = compare_captioners(folder, toml, a="x", b="y", judge="z", n=24, seed=0, out=tmp_path / "out")

    # independently: the share of prompts whose caption 1 was X's (the judge always picks it)
    a_first = sum(LONG in one for _, one, _, _ in z.judged)
    assert len(z.judged) == 24 and 0 < a_first < 24
    assert got["rate"] == a_first / 24
    assert 0.25 <= got["rate"] <= 0.75
    assert (got["low"], got["high"]) == pytest.approx(wilson(a_first, 24), abs=1e-12)
    assert got["position"]["a_first"] == a_first
    assert got["position"]["first_preference"] == 1.0  # the bias shows in the position stats


def test_invalid_replies_are_left_out_and_a_failed_caption_skips_its_box(ann: Path, tmp_path: Path) -> None:
    folder = fresh(ann, tmp_path)
    chosen = items.sample(items.kept_boxes(folder), 12, 1, salt=SALT)
    victim, jpeg, _ = next(items.views(folder, chosen[4:5], **CAPTION_VIEW))
    vh = hashlib.sha256(jpeg).hexdigest()

    def moody(one: str, two: str) -> str:  # chatter instead of a verdict for some pairs
        if int(hashlib.sha256(one.encode()).hexdigest(), 16) % 3 == 0:
            return "Both captions are fine, honestly."
        return prefers_longer(one, two)

    with Model("x", "long") as x, Model("y") as y, Model("z", judge=moody) as z:
        y.fail.add(vh)
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        compare = functools.partial(
            compare_captioners, folder, toml, a="x", b="y", judge="z", n=12, seed=1,
            out=tmp_path / "out", max_retries=1, backoff=0.01,
        )  # fmt: skip
        got = compare()
        invalid = sum(reply.startswith("Both") for *_, reply in z.judged)
        wins = sum(
            long_won(x, one, two, reply) for _, one, two, reply in z.judged if not reply.startswith("Both")
        )
        assert 0 < invalid < 11 and len(z.judged) == 11
        # the failed box: asked twice (one retry), never judged, skipped with its reason
        assert [b for b in y.server.bodies if _image_hash(b) == vh].__len__() == 2
        assert got["skipped"]["by_reason"] == {"caption B failed": 1}
        (skip,) = got["skipped"]["items"]
        assert (
            skip["item"] == victim.item and "http 500" in skip["detail"] and skip["detail"].startswith("y: ")
        )
        assert got["counts"] == {"A": wins, "B": 11 - invalid - wins, "tie": 0, "invalid": invalid}
        assert got["n_judged"] == 11 and got["n_valid"] == 11 - invalid
        assert got["rate"] == wins / (11 - invalid)
        rows = pq.read_table(tmp_path / "out" / "verdicts.parquet").to_pylist()
        assert victim.item not in {r["item"] for r in rows}
        assert sum(r["verdict"] == "invalid" for r in rows) == invalid

        # errors are not cached: once the captioner is healthy, a re-run asks only for what is missing,
        # and the invalid verdicts again (never final; this judge answers them the same)
        y.fail.clear()
        sent = (x.server.hits, y.server.hits, z.server.hits)
        again = compare()
        assert (x.server.hits, y.server.hits, z.server.hits) == (sent[0], sent[1] + 1, sent[2] + 1 + invalid)
        assert again["skipped"]["total"] == 0 and again["n_judged"] == 12 and again["written"]


def test_bootstrap_interval_and_ties(ann: Path, tmp_path: Path) -> None:
    folder = fresh(ann, tmp_path)
    with Model("x", "long") as x, Model("y") as y, Model("z", judge=lambda one, two: "Verdict: tie") as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        got = compare_captioners(
            folder, toml, a="x", b="y", judge="z", n=8, out=tmp_path / "out", interval="bootstrap"
        )
    assert got["counts"]["tie"] == 8 and got["rate"] == 0.5
    assert (got["low"], got["high"], got["method"]) == (0.5, 0.5, "bootstrap")  # all the same: a point


# ------------------------------------------------------------------------------------ cache, resume


def test_captions_of_the_caption_command_are_cache_hits_and_a_rerun_offline_changes_nothing(
    ann: Path, tmp_path: Path
) -> None:
    folder = fresh(ann, tmp_path)
    out = tmp_path / "out"
    with Model("x", "long") as x, Model("y") as y, Model("z", judge=prefers_longer) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        roster = load_annotators(toml)
        # what `annotate caption` sends for these boxes, through the folder's cache
        chosen = items.sample(items.kept_boxes(folder), 10, 0, salt=SALT)
        requests = [caption_request(j) for _, j, _ in items.views(folder, chosen, **CAPTION_VIEW)]
        for name in ("x", "y"):
            batch = ChatClient(roster.get(name), cache_dir=chat_cache_dir(folder)).run(requests)
            assert batch.failed == 0 and batch.requests_sent == 10
        before = (x.server.hits, y.server.hits)

        got = compare_captioners(folder, toml, a="x", b="y", judge="z", n=10, out=out)
        assert (x.server.hits, y.server.hits) == before  # not one caption asked again
        assert z.server.hits == 10
        assert got["run"]["captions_from_cache"] == 20 and got["run"]["requests"]["total"] == 10
        assert got["rate"] == 1.0

    # every server is down now: the re-run answers from the cache alone and leaves identical files
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert set(files) == {"compare.json", "verdicts.parquet", "report.html"}
    again = compare_captioners(folder, toml, a="x", b="y", judge="z", n=10, out=out)
    assert again["run"]["requests"]["total"] == 0 and again["run"]["cache_hits"]["total"] == 30
    assert again["written"] is False
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == files
    # the files are a function of the answers: deleted, they come back byte for byte
    (out / "verdicts.parquet").unlink()
    (out / "report.html").unlink()
    third = compare_captioners(folder, toml, a="x", b="y", judge="z", n=10, out=out)
    assert third["written"] is True
    assert (out / "verdicts.parquet").read_bytes() == files["verdicts.parquet"]
    new = json.loads((out / "compare.json").read_text())
    old = json.loads(files["compare.json"])
    assert new.pop("run")["requests"]["total"] == 0 and old.pop("run")["requests"]["total"] == 10
    assert new == old


# ------------------------------------------------------------------------------------------ errors


def test_library_refuses_bad_names_and_names_the_annotator_an_endpoint_refuses(
    ann: Path, tmp_path: Path
) -> None:
    folder = fresh(ann, tmp_path)
    with Model("x", "long") as x, Model("y", status=404) as y, Model("z", judge=always_first) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        with pytest.raises(AnnotationError, match=r"--a and --b are both 'x'"):
            compare_captioners(folder, toml, a="x", b="x", judge="z", out=tmp_path / "o")
        with pytest.raises(AnnotationError, match=r"--judge 'w' is not in .*annotators are x, y, z"):
            compare_captioners(folder, toml, a="x", b="y", judge="w", out=tmp_path / "o")
        with pytest.raises(ChatServiceError, match=r"^captioner --b y: chat endpoint y at .*HTTP 404"):
            compare_captioners(folder, toml, a="x", b="y", judge="z", n=4, out=tmp_path / "o")
        assert z.server.hits == 0
        assert not (tmp_path / "o" / "compare.json").exists()


def test_cli_end_to_end_with_a_key_self_judging_warning_and_escaped_report(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fresh(ann, tmp_path)
    monkeypatch.setenv("CMP_TEST_KEY", "sk-very-secret-123")
    out = tmp_path / "out"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Describe the person in the red box.\n")

    class Marked(Model):
        def caption_of(self, image: str) -> str:
            return f"<b>Person</b> {image[:10]} & a <script>alert(1)</script> {LONG}"

    with Marked("x", "long", judge=prefers_longer) as x, Model("y") as y:
        toml = write_toml(tmp_path / "annotators.toml", x, y, api_key_env="CMP_TEST_KEY")
        args = ["annotate", "compare-captioners", folder, "--annotators", toml, "--a", "x", "--b", "y"]
        args += ["--judge", "x", "--n", "6", "--prompt-file", prompt, "--out", out]
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
        assert "a judge judging its own captions is biased" in err
        assert re.search(r"x vs y \(judge x\): x wins 100\.0 % \[\d+\.\d, 100\.0\] \(95 % wilson\) of 6", err)
        assert "18 request(s) sent, 0 caption(s)" in err
        texts = [last_user_text(b) for b in y.server.bodies]
        assert texts == ["Describe the person in the red box."] * 6
        assert all(h.get("Authorization") == "Bearer sk-very-secret-123" for h in x.server.headers)

        summary = json.loads((out / "compare.json").read_text())
        assert summary["judge"]["name"] == "x" and len(summary["warnings"]) == 1
        page = (out / "report.html").read_text()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
        for path in [*out.rglob("*"), *chat_cache_dir(folder).rglob("*")]:
            if path.is_file():
                assert b"sk-very-secret" not in path.read_bytes(), path
        assert "sk-very-secret" not in err

        # a re-run prints that the folder already holds these results
        code, _, err = run_cli(args, capsys)
        assert code == 0 and "0 request(s) sent, 12 caption(s) and 6 verdict(s) from the cache" in err
        assert "already held these results" in err


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--a", "x", "--b", "x", "--judge", "y"], ["--a and --b are both 'x'"]),
        (["--a", "x", "--b", "nope", "--judge", "y"], ["--b 'nope' is not in", "annotators are x, y"]),
        (
            ["--a", "x", "--b", "y", "--judge", "y", "--interval", "normal"],
            ["--interval", "wilson or bootstrap"],
        ),
        (["--a", "x", "--b", "y", "--judge", "y", "--n", "0"], ["--n 0", "at least 1"]),
        (["--a", "x", "--b", "y", "--judge", "y", "--prompt", "p", "--prompt-file", "f"], ["--prompt and"]),
    ],
)
def test_cli_one_line_errors(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needles: list[str]
) -> None:
    toml = tmp_path / "annotators.toml"
    toml.write_text(
        '[annotators.x]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        '[annotators.y]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "n"\n'
    )
    base = ["annotate", "compare-captioners", ann, "--annotators", toml, "--out", tmp_path / "out"]
    assert_one_line_error(*run_cli(base + extra, capsys)[::2], *needles)


def test_cli_errors_for_missing_files_and_a_refusing_endpoint(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = fresh(ann, tmp_path)
    names = ["--a", "x", "--b", "y", "--judge", "y"]
    missing = [
        "annotate",
        "compare-captioners",
        folder,
        "--annotators",
        tmp_path / "none.toml",
        "--out",
        tmp_path,
    ]
    assert_one_line_error(
        *run_cli(missing + names, capsys)[::2], "none.toml: no such file", "annotators.toml"
    )

    (tmp_path / "taken").write_text("a file")
    with Model("x", status=401) as x, Model("y") as y:
        toml = write_toml(tmp_path / "annotators.toml", x, y)
        base = ["annotate", "compare-captioners", folder, "--annotators", toml]
        assert_one_line_error(
            *run_cli(base + names + ["--out", tmp_path / "taken"], capsys)[::2], "a file, not a folder"
        )
        line = assert_one_line_error(
            *run_cli(base + names + ["--n", "3", "--out", tmp_path / "o"], capsys)[::2],
            "captioner --a x",
            "HTTP 401",
        )
        assert "Traceback" not in line


def test_refusals_and_a_failing_judge_are_counted_by_reason(ann: Path, tmp_path: Path) -> None:
    folder = fresh(ann, tmp_path)
    chosen = items.sample(items.kept_boxes(folder), 6, 2, salt=SALT)
    hashes = [hashlib.sha256(j).hexdigest() for _, j, _ in items.views(folder, chosen, **CAPTION_VIEW)]
    refuse_caption, refuse_judge, fail_judge = hashes[0], hashes[1], hashes[2]

    class Picky(Model):
        def _respond(self, body: dict[str, Any]) -> Step:
            image, judging = _image_hash(body), "Caption 1:" in last_user_text(body)
            if not judging and self.name == "x" and image == refuse_caption:
                return Step(refusal="I can't describe people.")
            if judging and image == refuse_judge:
                return Step(refusal="I won't judge.")
            if judging and image == fail_judge:
                return Step(status=503)
            return super()._respond(body)

    with Picky("x", "long") as x, Picky("y") as y, Picky("z", judge=prefers_longer) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        got = compare_captioners(
            folder, toml, a="x", b="y", judge="z", n=6, seed=2, out=tmp_path / "out", max_retries=0
        )
    assert got["skipped"]["by_reason"] == {"caption A refused": 1, "judge failed": 1}
    assert {s["item"]: s["reason"] for s in got["skipped"]["items"]} == {
        chosen[0].item: "caption A refused",
        chosen[2].item: "judge failed",
    }
    assert got["counts"] == {"A": 3, "B": 0, "tie": 0, "invalid": 1}  # the judge's refusal is no verdict
    assert got["answers"]["a"]["refused"] == 1 and got["answers"]["judge"]["failed"] == 1
    rows = {r["item"]: r for r in pq.read_table(tmp_path / "out" / "verdicts.parquet").to_pylist()}
    assert (
        rows[chosen[1].item]["verdict"] == "invalid" and "won't judge" in rows[chosen[1].item]["judge_reply"]
    )


def test_captions_written_by_annotate_caption_are_not_asked_again(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = fresh(ann, tmp_path)
    with Model("x", "long") as x, Model("y") as y, Model("z", judge=prefers_longer) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        for name in ("x", "y"):
            code, _, err = run_cli(
                ["annotate", "caption", folder, "--annotators", toml, "--captioner", name], capsys
            )
            assert code == 0, err
        assert x.server.hits == y.server.hits == 24
        got = compare_captioners(folder, toml, a="x", b="y", judge="z", n=12, out=tmp_path / "out")
    assert (x.server.hits, y.server.hits, z.server.hits) == (24, 24, 12)
    assert got["run"]["captions_from_cache"] == 24 and got["rate"] == 1.0


def test_cli_without_any_valid_verdict_writes_the_files_and_says_so(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = fresh(ann, tmp_path)
    out = tmp_path / "out"
    with Model("x", "long") as x, Model("y") as y, Model("z", judge=lambda one, two: "Hard to say.") as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z)
        args = ["annotate", "compare-captioners", folder, "--annotators", toml, "--a", "x", "--b", "y"]
        args += ["--judge", "z", "--n", "4", "--out", out]
        code, _, err = run_cli(args, capsys)
        line = assert_one_line_error(
            code, err, "no valid verdict among 4 judged pair(s)", "4 invalid", "compare.json"
        )
        summary = json.loads((out / "compare.json").read_text())
        assert (summary["rate"], summary["low"], summary["high"]) == (None, None, None)
        assert (
            summary["counts"]["invalid"] == 4 and "win rate is undefined" in (out / "report.html").read_text()
        )

        # friction 8: unusable verdicts were cached as final, so "run again" could never succeed; they
        # are not final: once the judge is fixed, a re-run asks it again (the captions from the cache)
        assert "replies that name no verdict are not cached" in line and "answers are cached)" not in line
        z.judge = prefers_longer
        sent = (x.server.hits, y.server.hits, z.server.hits)
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
        assert (x.server.hits, y.server.hits, z.server.hits) == (sent[0], sent[1], sent[2] + 4)
    summary = json.loads((out / "compare.json").read_text())
    assert summary["counts"] == {"A": 4, "B": 0, "tie": 0, "invalid": 0} and summary["rate"] == 1.0


def test_an_echoed_key_never_reaches_a_file_or_the_terminal(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 4: echoed keys were stored in captions, verdicts and the cache, and clipped error texts
    kept the start of a key in compare.json and the one-line 401 error."""
    folder = fresh(ann, tmp_path)
    secret = "sk-ant-api03-Zq4Lm8Tx2Wc6Vb0Nr5Hy9Kd3Fs7Pj1"
    monkeypatch.setenv("CMP_ECHO_KEY", secret)
    chosen = items.sample(items.kept_boxes(folder), 4, 0, salt=SALT)
    broken = hashlib.sha256(next(items.views(folder, chosen[:1], **CAPTION_VIEW))[1]).hexdigest()
    pad = "x" * 171  # the key straddles the 200-character clip of error texts

    class Echo(Model):
        def caption_of(self, image: str) -> str:
            return f"{super().caption_of(image)} A card reads {ECHO_KEY}."

        def _respond(self, body: dict[str, Any]) -> Step:
            if self.status is not None:
                return Step(status=self.status, error_message=f"invalid key {pad}{ECHO_KEY}")
            if _image_hash(body) == broken and "Caption 1:" not in last_user_text(body):
                return Step(status=400, error_message=f"{pad}{ECHO_KEY}")
            return super()._respond(body)

    def judge(one: str, two: str) -> str:
        return f"I was called with {ECHO_KEY}.\n{prefers_longer(one, two)}"

    out = tmp_path / "out"
    with Echo("x", "long") as x, Echo("y") as y, Echo("z", judge=judge) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z, api_key_env="CMP_ECHO_KEY")
        args = ["annotate", "compare-captioners", folder, "--annotators", toml, "--a", "x", "--b", "y"]
        code, stdout, err = run_cli([*args, "--judge", "z", "--n", "4", "--out", out], capsys)
        assert code == 0, err
        assert all(h.get("Authorization") == f"Bearer {secret}" for h in z.server.headers)
    summary = json.loads((out / "compare.json").read_text())
    assert summary["counts"]["A"] == 3 and summary["skipped"]["by_reason"] == {"caption A failed": 1}
    assert summary["skipped"]["items"][0]["detail"].startswith(f"x: http 400: {pad}***")
    rows = pq.read_table(out / "verdicts.parquet").to_pylist()
    assert all(r["caption_a"].endswith("A card reads ***.") for r in rows)
    with Echo("x", status=401) as x, Echo("y") as y, Echo("z", judge=judge) as z:
        toml = write_toml(tmp_path / "annotators.toml", x, y, z, api_key_env="CMP_ECHO_KEY")
        args = ["annotate", "compare-captioners", folder, "--annotators", toml, "--a", "x", "--b", "y"]
        code, stdout2, err2 = run_cli([*args, "--judge", "z", "--n", "4", "--out", tmp_path / "o2"], capsys)
    line = assert_one_line_error(code, err2, "captioner --a x", "HTTP 401", f"invalid key {pad}***")
    assert not leaks(secret, out, tmp_path / "o2", chat_cache_dir(folder), text=stdout + err + stdout2 + line)
