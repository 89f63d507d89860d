"""The placement search's grid paths (clusters whose machines all have one GPU count, issue #15
speed) return exactly what the general per-machine loops return, on random free-GPU states."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.sim import placement as P


def _states(c: Cluster, rng: np.random.Generator, n: int):
    for _ in range(n):
        fm = rng.random(c.num_gpus) < rng.random()
        fpm = np.bincount(c.gpu_machine, weights=fm, minlength=c.num_machines).astype(np.int64)
        fpr = np.bincount(c.machine_rack, weights=fpm, minlength=c.num_racks).astype(np.int64)
        yield fm, fpm, fpr, int(rng.integers(1, min(c.num_gpus, 96) + 1))


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("scenario", ["dally-poisson-4rack", "a100-4nic-tor3-poisson"])
def test_grid_paths_match_the_machine_loops(scenario: str) -> None:
    grid = Cluster(load_scenario(scenario).cluster)
    assert grid.gpu_grid is not None
    loop = copy.copy(grid)
    loop.gpu_grid = None  # the general path (clusters with unequal machines)
    rng = np.random.default_rng(7)
    every_other = np.arange(grid.num_machines)[::2]
    for fm, fpm, fpr, n in _states(grid, rng, 150):
        for name, rest in (
            ("on_one_machine", (fm, fpm, n)),
            ("on_one_rack", (fm, fpm, fpr, n)),
            ("spread_packed", (fm, fpm, fpr, n)),
            ("fewest_machines", (fm, fpm, n, False)),
            ("fewest_machines", (fm, fpm, n, True)),
            ("packed_on", (fm, fpm, n, every_other)),
            ("candidates", (fm, fpm, fpr, n, Tier.RACK)),
            ("candidates", (fm, fpm, fpr, n, Tier.NETWORK)),
        ):
            f = getattr(P, name)
            assert _same(f(grid, *rest), f(loop, *rest)), (name, n)


def test_placement_tier_small_and_large_paths() -> None:
    c = Cluster(load_scenario("dally-poisson-8rack").cluster)
    rng = np.random.default_rng(3)
    for size in (1, 2, 8, 9, 64, 65, 200):
        for _ in range(40):
            g = rng.choice(c.num_gpus, size=size, replace=False)
            m = c.gpu_machine[g]
            r = c.machine_rack[m]
            want = (
                Tier.MACHINE
                if (m == m[0]).all()
                else Tier.RACK
                if (r == r[0]).all()
                else Tier.NETWORK
            )
            assert c.placement_tier(g) == want
    first_machine = c.machine_gpus(0)
    assert c.placement_tier(first_machine) == Tier.MACHINE


@pytest.mark.parametrize("scenario", ["dally-poisson-4rack", "a100-4nic-tor3-poisson", "unequal"])
def test_consolidated_shape_matches_the_search(scenario: str) -> None:
    """``consolidated_shape`` gives the count shape of what ``consolidated`` returns (None
    where it returns None) from the free counts alone, on grid and unequal clusters, empty
    and full ones included."""
    if scenario == "unequal":  # machines of 2, 4 and 16 GPUs
        c = Cluster(load_cluster("crius-sim-1280gpu"))
        assert c.gpu_grid is None
    else:
        c = Cluster(load_scenario(scenario).cluster)
    racks = [c.rack_machines(r).tolist() for r in range(c.num_racks)]
    rng = np.random.default_rng(11)
    states = list(_states(c, rng, 400))
    for full in (np.zeros(c.num_gpus, dtype=bool), np.ones(c.num_gpus, dtype=bool)):
        fpm = np.bincount(c.gpu_machine, weights=full, minlength=c.num_machines).astype(np.int64)
        fpr = np.bincount(c.machine_rack, weights=fpm, minlength=c.num_racks).astype(np.int64)
        states += [(full, fpm, fpr, n) for n in (1, c.num_gpus, c.num_gpus + 1)]
    kinds = set()
    for fm, fpm, fpr, n in states:
        gpus = P.consolidated(c, fm, fpm, fpr, n)
        want = None if gpus is None else c.placement_shape(gpus)
        shapes = P.ConsolidatedShapes(fpm.tolist(), fpr.tolist(), racks)
        assert shapes.shape(n) == want, n
        assert P.consolidated_shape(fpm.tolist(), fpr.tolist(), racks, n) == want
        kinds.add("none" if want is None else min(len(want), 2) * 10 + min(len(want[0]), 2))
    assert {"none", 11, 12, 22} <= kinds  # none, one machine, one rack, several racks
