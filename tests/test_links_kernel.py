"""Issue 15 Speed: the engine's batched link factors (``contention.batch_stretch``, compiled
in ``perf.links_kernel``) equal ``link_stretch`` followed by ``conserve_capacity`` link by
link, bit for bit, on random batches (data- and model-parallel phases, shifts, tight and
loose capacities, links that fit, links past one summation block); and the compiled link
usage equals the engine's numpy expression."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.perf.contention import batch_stretch, conserve_capacity, link_stretch
from dlcluster_gym.perf.links_kernel import HAVE_NUMBA, usage
from tests.test_contention_fastpath import random_phases

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernel needs numba")


def _one_link(compute, comm, up, shift, carry, phases, cap):
    stretch = link_stretch(compute + comm, up, shift, phases, cap)
    if (stretch > 1.0).any():
        stretch = conserve_capacity(stretch, compute, comm, up, carry, cap)
    return stretch


@pytest.mark.parametrize("seed", range(12))
def test_batch_equals_link_by_link(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(2, 40 if seed % 3 else 12)) for _ in range(int(rng.integers(1, 9)))]
    if seed == 0:
        sizes.append(130)  # past one pairwise-summation block: left to the caller
    total = sum(sizes)
    compute = rng.uniform(0.05, 2.0, total)
    comm = compute * rng.uniform(0.02, 1.0, total)
    up = np.minimum(comm / rng.uniform(0.3, 1.0, total), compute + comm)
    shift = rng.uniform(-1.0, 2.0, total) * (rng.random(total) < 0.5)
    carry = rng.uniform(0.05, 1.5, total)
    phases = [random_phases(rng, "model" if rng.random() < 0.2 else "data") for _ in range(total)]
    caps = rng.uniform(0.3, 2.5, len(sizes))
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    values, status = batch_stretch(bounds, caps, compute, comm, up, shift, carry, phases)
    for k in range(len(sizes)):
        a, b = bounds[k], bounds[k + 1]
        want = _one_link(compute[a:b], comm[a:b], up[a:b], shift[a:b], carry[a:b],
                         phases[a:b], float(caps[k]))  # fmt: skip
        if status[k] == 0:
            assert b - a > 128
            continue
        assert np.array_equal(values[a:b], want), (seed, k)
        assert status[k] == (2 if (want > 1.0).any() else 1)


def test_link_usage_equals_numpy() -> None:
    rng = np.random.default_rng(5)
    for n in (1, 7, 8, 100, 128, 129, 300, 1500):
        for _ in range(20):
            count = (rng.random(n) < 0.6).astype(np.int64)
            load = rng.uniform(-0.1, 2.0, n) * 10.0 ** rng.integers(6, 11, n)
            cap = rng.uniform(1.0, 3.0, n) * 1e9
            active = np.flatnonzero(count)
            want = (0.0, 0.0, 0)
            if active.size:
                util = np.minimum(np.maximum(load[active], 0.0) / cap[active], 1.0)
                want = (float(util.sum()) / active.size, float(util.max()), int(active.size))
            assert usage(count, load, cap) == want


def test_sweep_sort_is_the_stable_argsort() -> None:
    """The sweep's bucket sort gives ``argsort(kind="stable")``: ties (common on the circle)
    in index order, NaN last."""
    from dlcluster_gym.perf.stretch_kernel import _stable_argsort

    rng = np.random.default_rng(2)
    for t in range(400):
        n = int(rng.integers(1, 2500))
        v = [
            rng.uniform(0.0, 10.0, n),
            np.round(rng.uniform(0.0, 10.0, n), 1),
            rng.choice([0.0, 1.5, 3.0, 10.0], n),
            np.concatenate((np.sort(rng.uniform(0, 5, n // 2)), rng.uniform(0, 5, n - n // 2))),
        ][t % 4]
        if t % 37 == 0 and n > 70:
            v[rng.integers(n)] = np.nan
        assert np.array_equal(_stable_argsort(v), np.argsort(v, kind="stable"))
