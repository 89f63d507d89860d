"""The slot-action Scheduler env's shortcuts and the native slot policies' index cache keep
every decision: the move actions' mask filled only when read, the running jobs ordered once
per decision instant, the slot policies' indexes computed once per instant, no decision
point offered to them where only moves are valid (they never move a job), and the
fewest-machines test from free-GPU counts alone. Native runs of ``las-slots`` (with and
without its starvation guards), ``qssf-preemptive``, ``gittins-slots`` and ``srsf`` give the
same per-job results with each shortcut on and off."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.api import simulate
from dlcluster_gym.baselines.queue_policies import IndexSlots
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.envs.scheduler_env import STOP, SchedulerEnv
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.offers import Offer

SWITCHES = {
    "lazy-moves": (SchedulerEnv, "lazy_moves"),
    "running-order": (SchedulerEnv, "cache_running_order"),
    "index-cache": (IndexSlots, "cache_index"),
    "stops-at-moves": (IndexSlots, "stops_at_moves"),
}
POLICIES = [
    ("las-slots", {}),
    ("las-slots", {"promote_knob": 2.0, "max_wait_h": 12.0, "max_preemptions": 3}),
    ("qssf-preemptive", {}),
    ("gittins-slots", {}),
    ("srsf", {}),
]
SCENARIO = "dally-groups-4rack-load12"


def _run(policy: str, params: dict) -> tuple[np.ndarray, dict]:
    from dlcluster_gym.scheduler import make_policy

    res = simulate(SCENARIO, make_policy(policy, **params), seed=1)
    summary = {k: v for k, v in res.summary.items() if k != "wall_s"}
    return np.asarray(res.jobs["jct_s"], dtype=float), summary


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("switch", list(SWITCHES))
@pytest.mark.parametrize(("policy", "params"), POLICIES, ids=lambda p: str(p))
def test_slot_shortcuts_keep_native_decisions(
    policy: str, params: dict, switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    jct_on, summary_on = _run(policy, params)
    owner, attr = SWITCHES[switch]
    monkeypatch.setattr(owner, attr, False)
    jct_off, summary_off = _run(policy, params)
    assert summary_on["preemptions"] > 0  # the preempting paths ran
    assert jct_on.tobytes() == jct_off.tobytes()
    assert summary_on == summary_off


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lazy_move_mask_equals_the_offers_and_allowed_reads_it() -> None:
    """At every step of a seeded random episode with preemption, each running slot's move
    candidates in ``action_masks()`` are those of a fresh offer for its demand on the plan,
    and ``allowed(a)`` agrees with the mask for every action (read before the mask)."""
    env = gym.make("DLCluster/Scheduler-v2", scenario=SCENARIO, preemption=True)
    u = env.unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=1)
    checked = moves = 0
    done = False
    while not done and checked < 400:
        allowed = np.array([u.allowed(a) for a in range(u.num_actions)])
        mask = u.action_masks()
        assert (allowed == mask).all()
        b = 1 + u.n_start + u.n_preempt
        for r, job in enumerate(u._slots_r.tolist()):
            want = Offer(u._plan, -1, int(u.obs_state.demand[job]), 0.0, (0.0, 0.0)).mask[1:]
            assert (mask[b + r * 6 : b + (r + 1) * 6] == want).all()
            moves += int(want.any())
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        done = term or trunc
        checked += 1
    env.close()
    assert moves > 0  # some running slot could be moved


def test_valid_or_default_checks_a_move_before_the_mask_is_read() -> None:
    env = gym.make("DLCluster/Scheduler-v2", scenario=SCENARIO, preemption=True)
    u = env.unwrapped
    env.reset(seed=2)
    rng = np.random.default_rng(1)
    seen = 0
    for _ in range(300):
        b = 1 + u.n_start + u.n_preempt
        a = int(rng.integers(b, u.num_actions))  # a move action, any running slot
        got = u.valid_or_default(a)
        want = a if u.action_masks()[a] else STOP
        assert got == want
        seen += got != STOP
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        if term or trunc:
            break
    env.close()
    assert seen > 0


def _cluster(groups: list[tuple[int, int, int]]) -> Cluster:
    """Groups of (racks, machines per rack, GPUs per machine)."""
    return Cluster({
        "name": "mixed",
        "groups": [
            {"name": f"g{i}", "racks": r, "machines_per_rack": m, "gpus_per_machine": g}
            for i, (r, m, g) in enumerate(groups)
        ],
    })  # fmt: skip


@pytest.mark.parametrize(
    "groups", [[(2, 4, 8)], [(1, 2, 4), (2, 3, 2), (1, 1, 8)], [(1, 1, 1)], [(1, 2, 2)]]
)
def test_fewest_machines_exists_matches_the_search(groups: list[tuple[int, int, int]]) -> None:
    c = _cluster(groups)
    rng = np.random.default_rng(len(groups))
    for _ in range(300):
        free_mask = rng.random(c.num_gpus) < rng.random()
        fpm = np.bincount(c.gpu_machine[free_mask], minlength=c.num_machines)
        for n in range(1, c.num_gpus + 2):
            got = placement.fewest_machines_exists(c, fpm, n)
            want = placement.fewest_machines(c, free_mask, fpm, n, strict=True) is not None
            assert got == want, (groups, fpm.tolist(), n)
    none_free = np.zeros(c.num_machines, dtype=np.int64)
    assert not placement.fewest_machines_exists(c, none_free, 1)
