"""The compiled kernels' on-disk cache follows their sources (perf.kernel_cache)."""

from __future__ import annotations

import pytest

from dlcluster_gym.perf import kernel_cache


def _cache_files(folder):
    names = [
        "links_kernel._factors-290.py311.nbi",
        "links_kernel._factors-290.py311.1.nbc",
        "stretch_kernel._sweep-300.py311.nbi",
        "other_module.f-1.py311.nbi",  # not a kernel of ours: kept
        "links_kernel.cpython-311.pyc",  # bytecode: kept
    ]
    for name in names:
        (folder / name).write_bytes(b"x")
    return names


def test_a_cache_written_for_other_sources_is_deleted_and_marked(tmp_path):
    names = _cache_files(tmp_path)
    assert kernel_cache.refresh(tmp_path, "new") is True
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([kernel_cache.MARKER, *names[3:]])
    assert (tmp_path / kernel_cache.MARKER).read_text() == "new"
    # Same sources: the files numba writes next are kept.
    _cache_files(tmp_path)
    assert kernel_cache.refresh(tmp_path, "new") is False
    assert len(list(tmp_path.glob("*.nb?"))) == 4
    # Another kernel source changed: deleted again.
    assert kernel_cache.refresh(tmp_path, "newer") is True
    assert len(list(tmp_path.glob("*.nb?"))) == 1


def test_a_missing_cache_folder_is_left_alone(tmp_path):
    assert kernel_cache.refresh(tmp_path / "absent", "h") is False
    assert not (tmp_path / "absent").exists()


def test_the_hash_covers_every_kernel_source(tmp_path):
    for name in kernel_cache.KERNELS:
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    before = kernel_cache.sources_hash(tmp_path)
    for name in kernel_cache.KERNELS:
        path = tmp_path / f"{name}.py"
        text = path.read_text()
        path.write_text(text + "x = 1\n")
        assert kernel_cache.sources_hash(tmp_path) != before, name
        path.write_text(text)
    assert kernel_cache.sources_hash(tmp_path) == before


def test_the_kernels_cache_folder_is_marked_with_the_current_sources():
    links_kernel = pytest.importorskip("dlcluster_gym.perf.links_kernel")
    if links_kernel.pooled_factors is None:
        pytest.skip("numba is not installed: no compiled kernels")
    folder = kernel_cache.Path(links_kernel.pooled_factors._cache._cache_path)
    marker = folder / kernel_cache.MARKER
    if not marker.exists():
        pytest.skip(f"the cache folder {folder} cannot be written")
    assert marker.read_text() == kernel_cache.sources_hash()
