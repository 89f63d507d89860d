"""Issue 15 Speed: the compiled unified-circle layout (``perf.layout_kernel``) gives
``contention._quantised_layout``'s quantum, perimeter and sectors exactly, for iteration times
whose LCM fits the cap, needs ``fit_perimeter``, or exceeds the cap alone; and its table of
error rows starts over when full without changing results."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.perf import contention
from dlcluster_gym.perf.layout_kernel import HAVE_NUMBA, RowTable, layout

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernel needs numba")


def _times(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(2, 40))
    kind = rng.integers(3)
    if kind == 0:
        return rng.uniform(0.001, 30.0, size=n)
    if kind == 1:
        return np.round(rng.uniform(0.05, 3.0, size=n), 2)
    return rng.choice([0.1, 0.2, 0.4, 0.8], size=n)


@pytest.mark.parametrize("cap", [2048, 64])
def test_compiled_layout_equals_python(cap):
    rng = np.random.default_rng(11)
    table = RowTable(cap, slots=48)  # small: it starts over several times
    for _ in range(1500):
        it = _times(rng)
        q, perimeter, sectors = layout(
            it, cap, contention.DEFAULT_PRECISION_S, contention.MIN_SECTORS_PER_ITERATION,
            table.rows, table.slot, table.used,
        )  # fmt: skip
        want = contention._quantised_layout(it, cap)
        if perimeter < 0:  # more lengths than the table holds: the Python path
            continue
        assert repr(q) == repr(want[0])
        assert perimeter == want[1]
        assert sectors.tolist() == want[2].tolist()


def test_engine_layout_uses_the_same_numbers():
    it = np.array([0.31, 0.77, 1.234, 2.5])
    got = contention._new_layout(it, 2048)
    want = contention._quantised_layout(it, 2048)
    assert repr(got[0]) == repr(want[0]) and got[1] == want[1]
    assert got[2].tolist() == want[2].tolist()


def test_float32_rows_choose_the_float64_perimeter():
    """Error rows in float32 (caps up to 2048) pick the perimeter and sectors of float64
    rows: errors that differ do so by far more than float32's rounding."""
    rng = np.random.default_rng(3)
    t32 = RowTable(2048)
    t64 = RowTable(2048)
    t64.rows = np.empty(t64.rows.shape)
    assert t32.rows.dtype == np.float32
    for _ in range(3000):
        it = rng.uniform(0.01, rng.choice([0.5, 3.0, 10.0]), int(rng.integers(2, 30)))
        args = (it, 2048, contention.DEFAULT_PRECISION_S, contention.MIN_SECTORS_PER_ITERATION)
        q32, p32, s32 = layout(*args, t32.rows, t32.slot, t32.used)
        q64, p64, s64 = layout(*args, t64.rows, t64.slot, t64.used)
        assert (q32, p32, s32.tolist()) == (q64, p64, s64.tolist())
