"""Compiled terms of the env's ``shaping`` potential (``envs.base.ClusterEnv._potential``).

The potential sums, over every job of the run, its isolated remaining run time: about ten
array passes per decision instant over all jobs, a tenth of a Scheduler step. This loop
computes the same terms **value for value** (``np.maximum`` with numpy's NaN and signed-zero
rules), and the caller still sums them with numpy, so the potential keeps numpy's summation
order and bits (``tests/test_scheduler_obs_cache.py`` hashes the rewards of episodes with
this loop and without).

Without numba (``HAVE_NUMBA`` false) ``remaining_terms`` is None and the env keeps its numpy
form.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf import estimate_kernel, kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


def _remaining_terms(
    iterations: np.ndarray,
    done_iters: np.ndarray,
    status: np.ndarray,
    finished: np.ndarray,
    iter_s: np.ndarray,
    running: np.ndarray,
    running_done: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[j]`` = ``max(iterations[j] - done, 0) * iter_s[j]``, ``done`` the iterations done
    by job ``j`` as of now (``running_done[k]`` for ``running[k]``, else ``done_iters[j]``),
    and ``0 * iter_s[j]`` for a job whose ``status`` is in ``finished``."""
    for j in range(iterations.size):
        gap = iterations[j] - done_iters[j]
        out[j] = estimate_kernel.at_least_zero(gap) * iter_s[j]
    for k in range(running.size):
        j = running[k]
        gap = iterations[j] - running_done[k]
        out[j] = estimate_kernel.at_least_zero(gap) * iter_s[j]
    for j in range(iterations.size):
        for f in range(finished.size):
            if status[j] == finished[f]:
                out[j] = 0.0 * iter_s[j]


remaining_terms = compiled(_remaining_terms) if HAVE_NUMBA else None
