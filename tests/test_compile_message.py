"""The first compilation of the compiled kernels in a process says so, once
(perf.kernel_cache.CompileNotice), and a second process loads them from numba's cache."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlcluster_gym.perf import kernel_cache

ROOT = Path(__file__).resolve().parents[1]
MESSAGE = "compiling the simulator's kernels"


def _event(module: str, cache_path: str = "/cache/here") -> SimpleNamespace:
    dispatcher = SimpleNamespace(
        py_func=SimpleNamespace(__module__=module),
        _cache=SimpleNamespace(_cache_path=cache_path),
    )
    return SimpleNamespace(data={"dispatcher": dispatcher}, is_start=True, is_end=False)


def test_the_notice_is_logged_once_and_only_for_the_kernels(caplog):
    notice = kernel_cache.CompileNotice()
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        notice.on_start(_event("numba.np.arrayobj"))  # numba's own helpers: silent
        notice.on_start(_event("someone_else.stretch_kernel"))  # another package's module
        assert caplog.records == []
        notice.on_start(_event("dlcluster_gym.perf.stretch_kernel"))
        notice.on_start(_event("dlcluster_gym.perf.traffic_kernel", "/elsewhere"))
        notice.on_end(_event("dlcluster_gym.perf.traffic_kernel"))
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    text = caplog.records[0].getMessage()
    assert MESSAGE in text and "first run only" in text and "/cache/here" in text


def test_the_notice_listens_to_numbas_compile_event():
    if not kernel_cache.HAVE_NUMBA:
        pytest.skip("numba is not installed: nothing compiles")
    from numba.core import event

    assert kernel_cache.NOTICE in event._registered["numba:compile"]


_COMPILE_TWO = """
import numpy as np
from dlcluster_gym.perf import traffic_kernel as t
assert t._steps(5) == 6
assert t._nan_max(np.array([1.0, 3.0])) == 3.0
print("ok")
"""


def _run(cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _COMPILE_TWO],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def test_one_line_on_the_first_compile_and_none_from_the_cache(tmp_path):
    """Two small kernels compile in a fresh cache folder: one line on stderr; a second
    process loads both from that folder and prints nothing."""
    if not kernel_cache.HAVE_NUMBA:
        pytest.skip("numba is not installed: nothing compiles")
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(MESSAGE) == 1, first.stderr
    assert str(tmp_path) in first.stderr
    assert any(tmp_path.rglob("traffic_kernel._steps-*.nbi")), "numba wrote no cache"
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert MESSAGE not in second.stderr, second.stderr
