"""Scheduler-v2's ``observation="graph"``: job -> machine edges and the network links as
edges of the cluster tree, checked against the engine's own state."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym.envs.queue_obs import (
    MACHINE_LINK_FEATURES,
    RACK_LINK_FEATURES,
    SPINE_FEATURES,
)
from dlcluster_gym.errors import ConfigError

ID = "DLCluster/Scheduler-v2"
ML = {k: i for i, k in enumerate(MACHINE_LINK_FEATURES)}
RL = {k: i for i, k in enumerate(RACK_LINK_FEATURES)}
SP = {k: i for i, k in enumerate(SPINE_FEATURES)}
# the Pollux testbed: one 50 Gb/s NIC per 4-GPU node, so jobs of one node share its NIC
POLLUX = {"scenario": "pollux-testbed-poisson", "max_machines": 16, "max_racks": 4}


def _graph_env(**kw) -> gym.Env:
    return gym.make(ID, observation="graph", **kw)


def _expected(env: gym.Env) -> dict[str, np.ndarray]:
    """The graph entries recomputed from the engine and the cluster, without the observer."""
    u = env.unwrapped
    e, c = u.engine, u.engine.cluster
    nm, nr = c.num_machines, c.num_racks
    rm = np.zeros((u.R, u.max_machines))
    for r, job in enumerate(u._slots_r.tolist()):
        for g in e.job_gpus[job].tolist():
            m = int(c.gpu_machine[g])
            rm[r, m] += 1.0 / c.machine_num_gpus[m]
    nic_load = np.zeros(u.max_machines)
    nic_hot = np.zeros(u.max_machines)
    up_load = np.zeros(u.max_racks)
    up_hot = np.zeros(u.max_racks)
    spine = np.zeros(2)
    if e.links is not None:
        load = np.minimum(e.link_load_ratio(), 1.0)
        hot = set(e.contended_links().tolist())
        for link in range(c.num_links):
            if link < c.num_nics:
                m = int(c.nic_machine[link])
                nic_load[m] = max(nic_load[m], load[link])
                nic_hot[m] = max(nic_hot[m], float(link in hot))
            elif link == c.spine_link:
                spine[:] = load[link], float(link in hot)
            else:
                rack = (link - c.num_nics) // c.num_rails
                up_load[rack] = max(up_load[rack], load[link])
                up_hot[rack] = max(up_hot[rack], float(link in hot))
    return {"running_machines": rm, "nic_load": nic_load[:nm], "nic_hot": nic_hot[:nm],
            "up_load": up_load[:nr], "up_hot": up_hot[:nr], "spine": spine}  # fmt: skip


def _walk(env: gym.Env, seed: int, steps: int):
    """Masked random actions (starts preferred); yields each observation."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    yield obs
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        starts = np.flatnonzero(mask[1:]) + 1
        a = int(rng.choice(starts)) if starts.size and rng.random() < 0.8 else 0
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            return
        yield obs


def test_graph_observation_matches_the_engine_links_and_placements() -> None:
    env = _graph_env(**POLLUX)
    c = None
    contended = loaded = edges = 0
    for obs in _walk(env, 7, 300):
        assert env.observation_space.contains(obs)
        if env.unwrapped._at is None:
            continue
        c = env.unwrapped.engine.cluster
        want = _expected(env)
        np.testing.assert_allclose(obs["running_machines"], want["running_machines"], rtol=1e-6)
        ml, rl = obs["machine_links"], obs["rack_links"]
        nm = c.num_machines
        np.testing.assert_allclose(ml[:nm, ML["nic_load"]], want["nic_load"], rtol=1e-6)
        np.testing.assert_array_equal(ml[:nm, ML["nic_contended"]], want["nic_hot"])
        np.testing.assert_allclose(rl[: c.num_racks, RL["uplink_load"]], want["up_load"], rtol=1e-6)
        np.testing.assert_array_equal(rl[: c.num_racks, RL["uplink_contended"]], want["up_hot"])
        assert not ml[nm:].any() and not obs["running_machines"][:, nm:].any()
        np.testing.assert_array_equal(obs["machine_rack"][:nm], c.machine_rack)
        assert (obs["machine_rack"][nm:] == -1).all()
        # a running slot's row holds its GPUs: sum over machines of share x machine size
        held = obs["running_machines"][:, :nm] @ c.machine_num_gpus
        for r, job in enumerate(env.unwrapped._slots_r.tolist()):
            assert held[r] == pytest.approx(env.unwrapped.engine.job_gpus[job].size)
            edges += 1
        contended += int(want["nic_hot"].any())
        loaded += int(want["nic_load"].any())
    assert c is not None
    # the walk must exercise the interesting states, or the checks above prove little
    assert edges > 50 and loaded > 20 and contended > 0
    # one 50 Gb/s NIC per 4 GPUs: the NIC's share per GPU is 12.5 Gb/s of the rack tier's
    assert (ml[: c.num_machines, ML["nics"]] == 1.0).all()
    assert ml[0, ML["nic_bandwidth"]] == pytest.approx(
        min(c.machine_nic_total_Bps[0] / c.machine_num_gpus[0] / c.rack_link.bandwidth_Bps, 1)
    )


def test_oversubscription_and_spine_are_edge_features() -> None:
    env = _graph_env(scenario="h100-rail-spine2-poisson", max_machines=128, max_racks=16)
    obs, _ = env.reset(seed=1)
    c = env.unwrapped.engine.cluster
    assert c.num_rails > 1 and c.spine_link >= 0
    assert obs["spine"][SP["present"]] == 1.0
    assert obs["spine"][SP["bandwidth"]] == pytest.approx(1.0 / 2.0)  # a 2:1 spine
    ratio = c.config.rack_uplink_oversubscription
    rl = obs["rack_links"][: c.num_racks, RL["uplink_bandwidth"]]
    np.testing.assert_allclose(rl, 1.0 / ratio, rtol=1e-6)
    env = _graph_env(scenario="a100-4nic-tor3-poisson", max_machines=64, max_racks=8)
    obs, _ = env.reset(seed=1)
    nr = env.unwrapped.engine.cluster.num_racks
    assert obs["spine"][SP["present"]] == 0.0
    np.testing.assert_allclose(obs["rack_links"][:nr, RL["uplink_bandwidth"]], 1 / 3, rtol=1e-6)
    assert not obs["rack_links"][nr:].any()


def test_without_sharing_the_loads_are_zero_but_the_tree_is_there() -> None:
    env = _graph_env(**POLLUX, scenario_overrides={"contention": False})
    seen = 0
    for obs in _walk(env, 3, 120):
        assert not obs["machine_links"][:, ML["nic_load"]].any()
        assert not obs["rack_links"][:, RL["uplink_load"]].any()
        seen += int(obs["running_machines"].any())
    assert seen > 10 and (obs["machine_links"][:, ML["valid"]].sum() > 0)


def test_graph_observation_is_deterministic_pickles_and_passes_the_checkers() -> None:
    from gymnasium.utils.env_checker import check_env

    def trace(seed: int) -> list[dict]:
        return list(_walk(_graph_env(**POLLUX), seed, 80))

    a, b = trace(11), trace(11)
    assert len(a) == len(b) > 10
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    env = _graph_env(**POLLUX).unwrapped
    env.reset(seed=2)
    for _ in range(15):
        env.step(int(np.flatnonzero(env.action_masks())[-1]))
    copy = pickle.loads(pickle.dumps(env))
    a_obs = env.step(0)[0]
    b_obs = copy.step(0)[0]
    for k in a_obs:
        np.testing.assert_array_equal(a_obs[k], b_obs[k])
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date")  # Scheduler-v3 exists
        check_env(_graph_env(**POLLUX).unwrapped)
        warnings.filterwarnings("ignore", message=".*unconventional shape")
        sb3_checker.check_env(_graph_env(**POLLUX).unwrapped, warn=True)


def test_graph_observation_errors_name_the_value_and_the_limits() -> None:
    with pytest.raises(
        ConfigError, match="observation must be one of flat, dict, graph; got 'graf'"
    ):
        gym.make(ID, observation="graf")
    with pytest.raises(ConfigError, match="max_racks=4"):  # checked when the env is made
        _graph_env(scenario="dally-batch-16rack", max_racks=4)
