"""The compiled keyed estimates (``perf.estimate_kernel``) give the numpy form's values bit for
bit: ``keyed_length`` and ``keyed_remaining_work`` on random histories (keys at every level,
jobs without some keys, windows wrapped, work below, between and beyond the finished
lengths, the key ring grown by the asked jobs' new keys, no jobs at all); and the Scheduler
env's kernels (``perf.slot_kernel``, ``estimate_kernel.history_block``,
``perf.potential_kernel``) take empty inputs."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dlcluster_gym.perf import estimate_kernel
from dlcluster_gym.sim import estimators
from dlcluster_gym.sim.estimators import KEY_WINDOW, History, keyed_length, keyed_remaining_work
from dlcluster_gym.workload.job import Job

pytestmark = pytest.mark.skipif(not estimate_kernel.HAVE_NUMBA, reason="numba is not installed")


def _random_history(
    rng: np.random.Generator, finished: int, open_jobs: int
) -> tuple[History, np.ndarray]:
    """``finished`` finished jobs with random keys and lengths, then ``open_jobs`` unfinished
    ones (some with keys no finished job has); the history and the open jobs' ids."""
    vcs, users, names = ["", "a", "b", "c"], ["", "u", "v"], ["", "x", "y", "z"]
    jobs = []
    for i in range(finished + open_jobs):
        length = float(rng.choice([1.0, 10.0, 100.0, 1000.0]) * rng.random() * 50)
        vc = vcs[rng.integers(len(vcs))] if i < finished else rng.choice([*vcs, "new"])
        user, name = users[rng.integers(3)], names[rng.integers(4)]
        gpus = int(rng.choice([1, 2, 4, 8]))
        jobs.append(Job(i, "m", gpus, max(length, 1e-3), 1.0, 0.0, vc=vc, user=user, job_name=name))
    engine = SimpleNamespace(finished_order=list(range(finished)), jobs=jobs)
    return History(engine), np.arange(finished, finished + open_jobs)


def _both(fn: Callable[..., tuple], *args: Any) -> tuple[tuple, tuple]:
    """``fn(*args)`` with the compiled estimates, then with the numpy form."""
    estimators.use_kernel = True
    try:
        fast = fn(*args)
    finally:
        estimators.use_kernel = False
    try:
        slow = fn(*args)
    finally:
        estimators.use_kernel = True
    return fast, slow


@pytest.mark.parametrize("finished", [0, 1, 7, KEY_WINDOW * 3 + 5])
def test_compiled_keyed_estimates_match_numpy_bit_for_bit(finished: int) -> None:
    rng = np.random.default_rng(finished)
    h, jobs = _random_history(rng, finished, 40)
    asked = np.concatenate((jobs, rng.integers(0, max(finished, 1), 10) if finished else jobs[:0]))
    fast, slow = _both(keyed_length, h, asked)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
    assert finished == 0 or np.isfinite(fast[0]).all()  # every job has at least "all jobs"
    work = rng.choice([0.0, 5.0, 500.0, 1e9], asked.size) * rng.random(asked.size)
    fast, slow = _both(keyed_remaining_work, h, asked, work)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
    if finished > KEY_WINDOW:  # some estimates exist, some jobs are beyond every length
        assert np.isfinite(fast[0]).any() and np.isnan(fast[0]).any()


def test_compiled_keyed_estimates_of_no_jobs() -> None:
    h, _ = _random_history(np.random.default_rng(0), 5, 0)
    empty = np.array([], dtype=np.int64)
    assert keyed_length(h, empty)[0].size == 0
    assert keyed_remaining_work(h, empty, np.array([]))[0].size == 0


def test_the_observation_kernels_take_empty_inputs() -> None:
    """No jobs, no slots, no machines: nothing is read or written out of bounds (the
    bounds-checked run repeats this file) and the defaults are numpy's."""
    from dlcluster_gym.perf import potential_kernel, slot_kernel

    none_i, none_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    units = np.array([3600.0, 1.0, 1.0])
    out = np.full((0, 40), -1.0, dtype=np.float32)
    slot_kernel.waiting_rows(none_i, none_f, none_f, none_f, none_f, none_i, none_f, none_f,
                             np.zeros((0, 6), dtype=np.float32), np.zeros(0, dtype=np.float32),
                             none_f, none_i, 0.0, units, np.arange(10), out)  # fmt: skip
    slot_kernel.running_rows(none_i, none_f, none_f, none_f, np.zeros(0, dtype=np.float32),
                             np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int8), none_f,
                             none_f, none_f, none_i, none_f, none_f, none_i, 0.0, units,
                             np.arange(11), out)  # fmt: skip
    g = np.full(14, -1.0, dtype=np.float32)
    slot_kernel.global_rows(none_i, none_i, none_i, none_i, np.array([1, 1, 1, 10]), none_i,
                            none_i, none_i, none_f, np.array([0, 0]), 0.0, 0.0, units, 1.0,
                            g)  # fmt: skip
    assert g[:4].tolist() == [0.0, 0.0, 0.0, 0.0] and (g[10:] == 0.0).all()
    h_rows = np.zeros((0, 5), dtype=np.float32)
    estimate_kernel.history_block(np.full((1, KEY_WINDOW), np.nan), np.zeros((0, 4), np.int64),
                                  none_i, none_f, none_f, none_f, none_i, 0, True, none_i,
                                  none_f, none_f, h_rows, units, KEY_WINDOW,
                                  np.zeros((0, 7), dtype=np.float32))  # fmt: skip
    terms = np.zeros(0)
    potential_kernel.remaining_terms(none_f, none_f, np.zeros(0, dtype=np.int8),
                                     np.array([3, 4], dtype=np.int8), none_f, none_i, none_f,
                                     terms)  # fmt: skip
    assert terms.size == 0
