"""Files replaced whole: writers at the same moment never share a temporary file, and a failed write leaves the
old content and no temporary file behind."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from podium.core.files import replaced_atomically, write_atomically, write_bytes_atomically


def test_concurrent_writers_each_replace_the_file_whole(tmp_path):
    path = tmp_path / "state.json"
    texts = [str(n) * 10_000 for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda text: write_atomically(path, text), texts * 4))
    assert path.read_text(encoding="utf-8") in texts
    assert sorted(tmp_path.iterdir()) == [path]


def test_a_failed_write_leaves_the_old_content(tmp_path):
    path = tmp_path / "state.json"
    write_atomically(path, "old")
    with pytest.raises(OSError, match="disk full"), replaced_atomically(path) as handle:
        handle.write("new, half")
        raise OSError("disk full")
    assert path.read_text(encoding="utf-8") == "old" and sorted(tmp_path.iterdir()) == [path]


def test_bytes_replace_the_file_whole_and_verbatim(tmp_path):
    path = tmp_path / "vectors.npy"
    write_atomically(path, "old")
    data = bytes(range(256)) * 10
    write_bytes_atomically(path, data)
    assert path.read_bytes() == data and sorted(tmp_path.iterdir()) == [path]
