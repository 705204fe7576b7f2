"""Old module paths of fairsets.annotate keep working for one release (fairsets.core.moved).

The only tests that import the deprecated paths: everything else uses the new ones.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import fairsets.annotate
from fairsets.core.moved import MovedModules, install_moved


def _fresh(old: str) -> None:
    """Forget ``old`` so the next import goes through the finder again (and warns again)."""
    sys.modules.pop(old, None)
    parent, _, leaf = old.rpartition(".")
    if parent in sys.modules and leaf in vars(sys.modules[parent]):
        delattr(sys.modules[parent], leaf)


@pytest.mark.parametrize("old, new", sorted(fairsets.annotate.MOVED.items()))
def test_old_path_is_the_new_module_and_warns_with_the_new_path(old: str, new: str) -> None:
    _fresh(old)
    with pytest.warns(
        DeprecationWarning, match=rf"^{old} moved to {new}; the old path is removed in fairsets 0\.3$"
    ):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert sys.modules[old] is sys.modules[new]


def test_every_import_form_gives_the_same_objects() -> None:
    from fairsets.annotate.captions import judge as new_judge
    from fairsets.annotate.captions.judge import wilson_interval

    _fresh("fairsets.annotate.judge")
    with pytest.warns(DeprecationWarning, match="fairsets.annotate.captions.judge"):
        from fairsets.annotate import judge  # the package attribute form
    assert judge is new_judge
    _fresh("fairsets.annotate.judge")
    with pytest.warns(DeprecationWarning):
        from fairsets.annotate.judge import wilson_interval as old_wilson  # the from-module form
    assert old_wilson is wilson_interval
    _fresh("fairsets.annotate.judge")
    with pytest.warns(DeprecationWarning):
        import fairsets.annotate.judge  # noqa: F401  (the plain form)
    assert sys.modules["fairsets.annotate.judge"] is new_judge


def test_the_warning_points_at_the_importing_line() -> None:
    _fresh("fairsets.annotate.vote_prompts")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import fairsets.annotate.vote_prompts  # noqa: F401
    (w,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert w.filename == __file__
    assert "fairsets.annotate.vote.prompts" in str(w.message)


def test_names_that_moved_out_of_a_module_are_found_through_its_old_path() -> None:
    from fairsets.annotate.captions.compare import judge_request
    from fairsets.annotate.chat.requests import caption_request
    from fairsets.annotate.vote.ask import VOTE_MAX_TOKENS, vote_request

    _fresh("fairsets.annotate.chat_requests")
    with pytest.warns(DeprecationWarning, match="fairsets.annotate.chat.requests"):
        from fairsets.annotate import chat_requests
    assert chat_requests.caption_request is caption_request
    assert chat_requests.vote_request is vote_request
    assert chat_requests.judge_request is judge_request
    assert chat_requests.VOTE_MAX_TOKENS == VOTE_MAX_TOKENS
    with pytest.raises(AttributeError, match="no_such_name"):
        chat_requests.no_such_name  # noqa: B018


def test_an_unknown_name_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fairsets.annotate.no_such_module")
    with pytest.raises(ImportError):
        from fairsets.annotate import no_such_module  # noqa: F401


def test_a_monkeypatch_through_the_new_path_is_seen_through_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    import fairsets.annotate.captions.judge as new_judge

    monkeypatch.setattr("fairsets.annotate.captions.judge.wilson_interval", lambda *a, **k: (0.25, 0.75))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old_judge = importlib.import_module("fairsets.annotate.judge")
    assert old_judge.wilson_interval(1, 2) == (0.25, 0.75) == new_judge.wilson_interval(1, 2)


def test_the_new_packages_keep_the_names_of_the_modules_they_replace() -> None:
    """heads, vote and publish were modules: their packages answer the old modules' names."""
    from fairsets.annotate.heads import FORMAT, Head, evaluate, load_head, store, write_head
    from fairsets.annotate.publish import PUBLISHED_KIND, dataset, folder_kind, prepare, publish_annotations
    from fairsets.annotate.vote import (
        ANSWER_SCHEMA,
        EXAMPLES,
        FAILED,
        VoteResult,
        output_paths,
        run,
        vote_boxes,
    )

    assert (Head, load_head, write_head, evaluate, FORMAT) == (
        store.Head, store.load_head, store.write_head, store.evaluate, store.FORMAT
    )  # fmt: skip
    assert vote_boxes is run.vote_boxes and output_paths is run.output_paths and VoteResult is run.VoteResult
    assert ANSWER_SCHEMA is not None and FAILED == "failed" and EXAMPLES == 24
    assert prepare is dataset.prepare and publish_annotations is dataset.publish_annotations
    assert PUBLISHED_KIND == dataset.PUBLISHED_KIND and folder_kind is dataset.folder_kind


def test_the_finder_is_installed_once_and_leaves_other_names_alone() -> None:
    finders = [f for f in sys.meta_path if isinstance(f, MovedModules) and f.moved == fairsets.annotate.MOVED]
    assert len(finders) == 1
    assert install_moved(fairsets.annotate.MOVED, removed_in="fairsets 0.3") is finders[0]
    assert finders[0].find_spec("fairsets.annotate.layout") is None
    assert finders[0].find_spec("json") is None


def test_an_old_path_works_in_a_fresh_interpreter() -> None:
    """Nothing else imported first: ``import`` of the old path alone loads the package, its finder
    and the new module."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    import fairsets.annotate.consensus\n"
        "except DeprecationWarning as w:\n"
        "    print(w)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        "fairsets.annotate.consensus moved to fairsets.annotate.vote.consensus; "
        "the old path is removed in fairsets 0.3"
    )


def test_the_project_itself_uses_no_deprecated_path() -> None:
    """Code, docs, benchmarks and scripts name the new paths (this file and the table excepted), so
    nothing the project ships warns, and nothing breaks when the old paths go in 0.3."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    leaves = sorted((old.rpartition(".")[2] for old in fairsets.annotate.MOVED), key=len, reverse=True)
    # ``fairsets.annotate.judge``, ``annotate/judge.py`` or ``annotate.judge.f``; not ``annotate/judges/``
    pattern = re.compile(r"annotate[./](" + "|".join(leaves) + r")(?![\w/])")
    allowed = {root / "tests" / "test_moved.py", root / "src" / "fairsets" / "annotate" / "__init__.py"}
    found = []
    for folder in ("src", "tests", "docs", "benchmarks", "scripts"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".py", ".md", ".toml") or path in allowed:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and "getLogger(" not in line:  # a logger's name is output
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    text = (root / "README.md").read_text(encoding="utf-8")
    found += [f"README.md: {m.group(0)}" for m in pattern.finditer(text)]
    assert found == []
