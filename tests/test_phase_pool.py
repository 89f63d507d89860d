"""Issue 15 Speed: the engine's pooled link factors (``perf.phase_pool``: phases interned as
rows, the inputs gathered inside the kernel) equal ``contention.batch_stretch`` on the same
batch, bit for bit, including negative time shifts and rows shared by several entries; and a
row's carried rate and capped peak are the values the engine computed per link before."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.perf.contention import batch_stretch
from dlcluster_gym.perf.links_kernel import HAVE_NUMBA
from dlcluster_gym.perf.phase_pool import PhasePool
from tests.test_contention_fastpath import random_phases

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernel needs numba")


@pytest.mark.parametrize("seed", range(10))
def test_pooled_equals_batch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_jobs = int(rng.integers(4, 60))
    compute = rng.uniform(0.05, 2.0, n_jobs)
    comm = compute * rng.uniform(0.02, 1.0, n_jobs)
    up = np.minimum(comm / rng.uniform(0.3, 1.0, n_jobs), compute + comm)
    shift = rng.uniform(-1.0, 2.0, n_jobs) * (rng.random(n_jobs) < 0.5)
    kinds = [random_phases(rng, "model" if rng.random() < 0.2 else "data") for _ in range(12)]
    pool = PhasePool(max_rows=8)  # grows past its first arrays
    sizes = [int(rng.integers(2, min(n_jobs, 30) + 1)) for _ in range(int(rng.integers(1, 9)))]
    caps = rng.uniform(0.3, 2.5, len(sizes))
    jobs, rows, phases, carry = [], [], [], []
    for size, cap in zip(sizes, caps.tolist(), strict=True):
        picked = [kinds[int(rng.integers(len(kinds)))] for _ in range(size)]  # repeats too
        if rng.random() < 0.5:
            got = pool.rows(picked, [cap] * size)  # a placement's links at once
        else:
            got = [pool.intern(ph, cap) for ph in picked]
        assert pool.rows(picked, [cap] * size) == got
        for ph, row in zip(picked, got, strict=True):
            assert pool.capped[row] == min(ph.peak, cap)
            phases.append(ph)
            carry.append(float((ph.length * np.minimum(ph.rate, cap)).sum()))
        jobs.extend(rng.choice(n_jobs, size, replace=False).tolist())
        rows.extend(got)
    assert pool.carry[rows].tolist() == carry
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    arr = np.array(jobs)
    want = batch_stretch(
        bounds, caps, compute[arr], comm[arr], up[arr], shift[arr], np.array(carry), phases
    )
    got = pool.factors(bounds, arr, np.array(rows), caps, compute, comm, up, shift)
    assert want is not None and got is not None
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _contended_run(max_rows: int | None):
    from dlcluster_gym.api import rngs
    from dlcluster_gym.cluster.topology import Cluster
    from dlcluster_gym.scenario.build import build_workload
    from dlcluster_gym.scheduler import make_policy
    from dlcluster_gym.sim.engine import Engine
    from tests.test_contention import contended

    cfg = contended()
    cluster = Cluster(cfg.cluster)
    wl, pol = rngs(cfg.seed)
    eng = Engine(cfg, cluster, build_workload(cfg, cluster, wl), make_policy("random"), pol)
    if max_rows is not None:  # a pool that fills again and again: the engine starts it over
        eng._pool = PhasePool(max_rows=max_rows)
    return eng.run(), eng


def test_a_full_pool_starts_over_with_the_same_results():
    a, _ = _contended_run(None)
    b, eng = _contended_run(3)
    assert eng._pool.max_rows >= 3 and a.summary["avg_contention_slowdown"] > 1.0
    for k in a.jobs:
        np.testing.assert_array_equal(a.jobs[k], b.jobs[k])
    for k in a.timeseries:
        np.testing.assert_array_equal(a.timeseries[k], b.timeseries[k])
