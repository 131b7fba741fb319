"""The embedded model's converted checkpoint appears in the cache atomically, and a conversion that finishes second
never removes the one a concurrent process may already be loading (three `podium eval` runs started together on a
fresh cache lost evaluation items that way)."""

from pathlib import Path

from podium.backends.embedded import converted, publish


def checkpoint(folder: Path, content: str, *, whole: bool = True) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(content)
    if whole:
        (folder / "model.safetensors").write_text(content)
    return folder


def test_a_conversion_is_published_whole_and_the_first_one_finished_stays(tmp_path: Path) -> None:
    target = tmp_path / "model"
    publish(checkpoint(tmp_path / "first", "first"), target)
    assert converted(target) and (target / "model.safetensors").read_text() == "first"
    second = checkpoint(tmp_path / "second", "second")
    publish(second, target)
    assert (target / "model.safetensors").read_text() == "first"  # a reader of the first is not cut off
    assert second.exists()  # the caller removes its own staging folder


def test_leftovers_that_are_no_whole_checkpoint_are_replaced(tmp_path: Path) -> None:
    target = checkpoint(tmp_path / "model", "old", whole=False)
    assert not converted(target)
    publish(checkpoint(tmp_path / "staging", "new"), target)
    assert converted(target) and (target / "config.json").read_text() == "new"
