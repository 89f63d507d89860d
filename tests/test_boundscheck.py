"""The compiled kernels with numba's bounds checks on.

numba does not check array indices by default: an index past an array reads memory it does
not own, which may crash or, worse, return a wrong number. ``NUMBA_BOUNDSCHECK=1`` turns every
such read into an ``IndexError``. The test suite runs the kernel tests, the degenerate-input
tests, the property tests and the scenario x policy matrix once more in a child process with
it set, compiling into a cache folder of its own (numba's cache does not key on the flag, so
the normal cache would hand back unchecked code).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlcluster_gym.perf.kernel_cache import HAVE_NUMBA

TESTS = Path(__file__).resolve().parent
CHECKED = (
    "test_boundscheck.py",
    "test_kernel_degenerate.py",
    "test_traffic_kernel.py",
    "test_links_kernel.py",
    "test_layout_kernel.py",
    "test_keyed_kernel.py",
    "test_themis_kernel.py",
    "test_scheduler_obs_cache.py",
    "test_phase_pool.py",
    "test_contention_signature.py",
    "test_properties.py",
    "test_matrix.py",
)
IN_CHECKED_RUN = os.environ.get("NUMBA_BOUNDSCHECK") == "1"
CACHE = Path(
    os.environ.get("DLCLUSTER_BOUNDSCHECK_CACHE")
    or Path.home() / ".cache" / "dlcluster-gym" / "numba-boundscheck"
)

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernels need numba")


@pytest.mark.slow  # .ci/run runs it on every build, after the default run
@pytest.mark.skipif(IN_CHECKED_RUN, reason="this is the bounds-checked run itself")
def test_kernels_pass_with_bounds_checked() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(CACHE),
           "DLCLUSTER_PROPERTY_EXAMPLES": "100"}  # fmt: skip
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-rA", "-p", "no:cacheprovider"]
    cmd += [str(TESTS / name) for name in CHECKED]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    tail = (run.stdout[-6000:] + "\n" + run.stderr[-3000:]).strip()
    assert run.returncode == 0, f"bounds-checked run failed:\n{tail}"
    assert "PASSED tests/test_boundscheck.py::test_bounds_checks_are_on_and_cached_apart" in (
        run.stdout
    ), f"the child run did not confirm its bounds checks:\n{tail}"


@pytest.mark.skipif(not IN_CHECKED_RUN, reason="runs in the bounds-checked child run")
def test_bounds_checks_are_on_and_cached_apart() -> None:
    """In the child run an out-of-bounds read raises, and the kernels cache elsewhere."""
    from numba import njit

    from dlcluster_gym.perf import kernel_cache, traffic_kernel

    @njit
    def read(a: np.ndarray, i: int) -> float:
        return a[i]

    with pytest.raises(IndexError):
        read(np.zeros(3), 3)
    where = kernel_cache._cache_dir(traffic_kernel.traffic)
    assert where.resolve().is_relative_to(Path(os.environ["NUMBA_CACHE_DIR"]).resolve())
