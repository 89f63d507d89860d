"""Results do not depend on which SIMD kernels NumPy picks on this CPU (dlcluster_gym.numerics).

NumPy's float64 exp/log family runs other approximations with AVX-512 than without, and a
scheduler's discrete choices amplify last-bit differences. A run with every runtime-dispatched
CPU feature disabled (``NPY_DISABLE_CPU_FEATURES``, as on an older CPU) must give the same bits.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from dlcluster_gym import numerics

try:  # NumPy >= 2
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

DISPATCHED = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]

# One Dally-workload run (sampled durations), one Scheduler-v2 rollout (queue features) and
# one gittins table (the teacher's table): a digest of each.
SCRIPT = r"""
import hashlib, json
import numpy as np
import gymnasium as gym
from dlcluster_gym.api import simulate
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.config import load_scenario
from dlcluster_gym.workload.generators import sample_dally_durations
from baselines.queue_policies import gittins_table

data = deep_merge(load_scenario("dally-poisson-8rack").model_dump(),
                  {"workload": {"num_jobs": 1000, "load": 1.0}})
res = simulate(data, "tiresias", 102)
out = {"jct": np.asarray(res.jobs["jct_s"], dtype=np.float64).tobytes().hex(),
       "avg": res.summary["avg_jct_s"]}
out["durations"] = sample_dally_durations(5000, np.random.default_rng(7)).tobytes().hex()
env = gym.make("DLCluster/Scheduler-v2", scenario="dally-poisson-2rack")
obs, _ = env.reset(seed=3)
h = hashlib.sha256(obs.tobytes())
for _ in range(200):
    mask = env.unwrapped.action_masks()
    obs, r, term, trunc, _ = env.step(int(np.flatnonzero(mask)[-1]))
    h.update(obs.tobytes()); h.update(np.float64(r).tobytes())
    if term or trunc:
        break
out["obs"] = h.hexdigest()
out["gittins"] = hashlib.sha256(np.asarray(gittins_table()[0]).tobytes()).hexdigest()
print(json.dumps(out, sort_keys=True))
"""


def _run(disable: list[str]) -> str:
    env = dict(os.environ)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    if disable:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disable)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(
    not DISPATCHED, reason="this CPU has no SIMD features beyond NumPy's baseline to switch off"
)
def test_results_same_without_runtime_simd() -> None:
    native = _run([])
    baseline = _run(DISPATCHED)
    assert native == baseline


@pytest.mark.parametrize(
    ("ours", "ref"),
    [
        (numerics.exp, math.exp),
        (numerics.expm1, math.expm1),
        (numerics.log, math.log),
        (numerics.log1p, math.log1p),
        (numerics.log2, math.log2),
    ],
)
def test_elementwise_equals_libm(ours, ref) -> None:
    x = np.random.default_rng(0).uniform(0.001, 50.0, size=(7, 11))
    got = ours(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    want = np.array([ref(v) for v in x.ravel()]).reshape(x.shape)
    assert got.tobytes() == want.tobytes()
    assert ours(2.0).shape == () and float(ours(2.0)) == ref(2.0)
    assert ours([]).shape == (0,)


def test_geomspace() -> None:
    g = numerics.geomspace(0.25, 400.0, 9)
    assert g[0] == 0.25 and g[-1] == 400.0
    np.testing.assert_allclose(g, np.geomspace(0.25, 400.0, 9), rtol=1e-13)
    assert np.all(np.diff(g) > 0)
    with pytest.raises(ValueError, match="start and stop > 0"):
        numerics.geomspace(0.0, 1.0, 3)


def test_domain_errors_raise() -> None:
    with pytest.raises(ValueError):
        numerics.log([1.0, -1.0])
    with pytest.raises(OverflowError):
        numerics.exp([1e4])
