"""Env episodes match recorded fingerprints (issue #15 speed).

The speed work on the Placement path (the observer, Dally's offers generator, the engine
steps between offers) must not change what an agent sees or gets. Seeded masked-random
episodes are fingerprinted: a sha256 over everything discrete (step count, every action
mask, every action, the terminated/truncated flags, the summaries' integer fields), plus
float sums compared with a relative tolerance of 1e-9 (the rewards per episode, the
element-wise sum of the observations, the summaries' float fields). DelayTimer-v0 and
Scheduler-v0 episodes are checked the same way, as is the numpy path of the cluster
features (large clusters). Floats are compared with a tolerance, not hashed, because their
last bits vary with the platform (the digests of float bytes recorded on 2026-11-24 stopped
matching on the 2026-11-26 machine image although every native leaderboard row still
reproduced exactly; only the last bits of rewards differed). Re-record
(``python tests/test_placement_digest.py``) only for a deliberate change of dynamics, with
the reason in the commit.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs.features import ClusterFeatures

# (scenario, env kwargs, seeds, step cap) -> (steps, sha256); Placement-v1 unless "env"
CASES: dict[str, tuple[str, dict, tuple[int, ...], int]] = {
    "delaytimer-4rack": ("dally-poisson-4rack", {"env": "DelayTimer-v0"}, (1, 2, 3), 1500),
    "scheduler-8rack": ("dally-poisson-8rack", {"env": "Scheduler-v0"}, (1, 2), 1500),
    "dally-4rack": ("dally-poisson-4rack", {}, (1, 2, 3, 4, 5), 5000),
    "dally-4rack-v3": ("dally-poisson-4rack", {"env": "Placement-v3"}, (1, 2), 1500),
    "sharing-a": ("a100-4nic-tor3-poisson", {}, (1, 2), 1500),
    "batch-8rack": ("dally-batch-8rack", {}, (1,), 1500),
    # Tiresias's former defaults (three queues on the authors' limits from the start), whose
    # results did not change; and its defaults since (two queues, one until a job finishes)
    "tiresias-4rack": (
        "dally-poisson-4rack",
        {
            "base_policy": "tiresias",
            "base_params": {"thresholds": "online", "num_queues": 3, "promote_wait": "last"},
        },
        (1,),
        800,
    ),
    "tiresias-4rack-paper": ("dally-poisson-4rack", {"base_policy": "tiresias"}, (1,), 800),
    "gandiva-4rack": ("dally-poisson-4rack", {"base_policy": "gandiva-placement"}, (1,), 800),
    "dally-manual-v0": (
        "dally-poisson-8rack",
        {"base_policy": "dally-manual", "wait_limit": "none"},
        (1,),
        800,
    ),
}
RECORDED_FILE = Path(__file__).with_name("data") / "placement_fingerprints.json"


def episode_fingerprint(scenario: str, kwargs: dict, seeds: tuple[int, ...], cap: int) -> dict:
    """Steps, a sha256 of the discrete trace and float sums (see the module docstring)."""
    kwargs = dict(kwargs)
    with warnings.catch_warnings():  # old versions warn that they observe ground truth
        warnings.simplefilter("ignore", DeprecationWarning)
        env = gym.make(
            f"DLCluster/{kwargs.pop('env', 'Placement-v1')}", scenario=scenario, **kwargs
        )
    masked = hasattr(env.unwrapped, "action_masks")
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    n = 0
    returns: list[float] = []
    obs_sum: np.ndarray | None = None
    summaries: list[dict] = []

    def add(obs: np.ndarray | dict) -> None:
        nonlocal obs_sum
        flat = _flat(obs)
        obs_sum = flat.copy() if obs_sum is None else obs_sum + flat

    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        ret = 0.0
        while not done and n < cap:
            add(obs)
            if masked:
                mask = env.unwrapped.action_masks()
                h.update(np.asarray(mask).tobytes())
                action = int(rng.choice(np.flatnonzero(mask)))
                h.update(str(action).encode())
            else:
                action = rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32)
            obs, reward, term, trunc, info = env.step(action)
            ret += float(reward)
            h.update(bytes([term, trunc]))
            done = term or trunc
            n += 1
            if done:
                summaries.append({k: v for k, v in info["results"].items() if k != "wall_s"})
        add(obs)
        returns.append(ret)
    env.close()
    ints = [{k: v for k, v in s.items() if isinstance(v, int)} for s in summaries]
    h.update(json.dumps(ints, sort_keys=True).encode())
    floats = [{k: v for k, v in s.items() if isinstance(v, float)} for s in summaries]
    assert obs_sum is not None
    return {"steps": n, "sha256": h.hexdigest(), "returns": returns,
            "obs_sum": obs_sum.tolist(), "summaries": floats}  # fmt: skip


def _flat(obs: np.ndarray | dict) -> np.ndarray:
    if isinstance(obs, dict):
        return np.concatenate([np.asarray(obs[k], dtype=np.float64).ravel() for k in sorted(obs)])
    return np.asarray(obs, dtype=np.float64).ravel()


def assert_matches(got: dict, want: dict) -> None:
    assert (got["steps"], got["sha256"]) == (want["steps"], want["sha256"])
    np.testing.assert_allclose(got["returns"], want["returns"], rtol=1e-9)
    np.testing.assert_allclose(got["obs_sum"], want["obs_sum"], rtol=1e-9, atol=1e-9)
    assert len(got["summaries"]) == len(want["summaries"])
    for g, w in zip(got["summaries"], want["summaries"], strict=True):
        assert g.keys() == w.keys()
        np.testing.assert_allclose([g[k] for k in g], [w[k] for k in g], rtol=1e-9)


def _recorded() -> dict:
    return json.loads(RECORDED_FILE.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_placement_episodes_match_recorded_fingerprint(case: str) -> None:
    recorded = _recorded()
    assert case in recorded, f"no recorded fingerprint for {case}"
    assert_matches(episode_fingerprint(*CASES[case]), recorded[case])


def test_cluster_features_numpy_path_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy reductions (clusters over ``SMALL_MACHINES``) give the list path's values."""
    monkeypatch.setattr(ClusterFeatures, "SMALL_MACHINES", 0)
    assert_matches(episode_fingerprint(*CASES["sharing-a"]), _recorded()["sharing-a"])


if __name__ == "__main__":  # record the fingerprints of this code
    RECORDED_FILE.parent.mkdir(exist_ok=True)
    out = {name: episode_fingerprint(*CASES[name]) for name in sorted(CASES)}
    RECORDED_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORDED_FILE}")
