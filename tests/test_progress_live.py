"""Live counts from running tasks: each count reaches the bar once, whatever the timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairsets.core.progress_live import LiveCounts, TaskCounts


def test_counts_reach_the_bar_once(tmp_path: Path) -> None:
    folder = tmp_path / "progress" / "persons"
    folder.mkdir(parents=True)
    (folder / "stale.json").write_text('{"task": "old", "counts": {"images": 999}}')  # a killed run's
    added: list[dict[str, int]] = []

    def add(**counts: int) -> None:
        added.append(counts)

    with LiveCounts(folder, add, interval=3600) as live:  # the test polls by hand
        assert not (folder / "stale.json").exists()
        a, b = TaskCounts(folder, "a", every=0), TaskCounts(folder, "b", every=0)
        a.add(images=3, boxes=5)
        b.add(images=1)
        live.poll()
        live.poll()  # nothing grew: nothing added
        a.add(images=2)
        (folder / "junk.json").write_text("{not json")
        live.poll()
        assert sorted(map(sorted, (d.items() for d in added))) == sorted(
            map(sorted, ({"images": 3, "boxes": 5}.items(), {"images": 1}.items(), {"images": 2}.items()))
        )
        assert live.finish("a", {"images": 6, "boxes": 5}) == {"images": 1, "boxes": 0}
        a.add(images=50)  # a finished task's file is read no more
        live.poll()
        assert live.finish("b", {"images": 1}) == {"images": 0}
        assert live.finish("c", {"images": 4}) == {"images": 4}  # never reported: all of it at the end
    assert sum(d.get("images", 0) for d in added) == 6
    assert not folder.exists() and not folder.parent.exists()  # work state, removed


def test_without_a_bar_a_task_writes_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    counts = TaskCounts(None, "a", every=0)
    counts.add(images=1)
    counts.flush()
    assert list(tmp_path.iterdir()) == []


def test_a_task_writes_at_most_every_interval(tmp_path: Path) -> None:
    counts = TaskCounts(tmp_path, "a", every=3600)
    counts.add(images=1)
    assert list(tmp_path.iterdir()) == []  # not yet due
    counts.flush()
    assert [p.suffix for p in tmp_path.iterdir()] == [".json"]
