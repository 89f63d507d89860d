"""Env episodes are bit-identical to recorded digests (issue #15 speed).

The speed work on the Placement path (the observer, Dally's offers generator, the engine
steps between offers) must not change what an agent sees or gets: every observation's bytes,
every action mask, every reward, the terminated/truncated flags and the final results summary
(wall-clock time left out) of seeded masked-random episodes are hashed and compared with
digests recorded on the code before that work (``main`` at c9f8da3). DelayTimer-v0 and
Scheduler-v0 episodes are checked the same way (they share the engine and the cluster
features), as is the numpy path of the cluster features (large clusters). A digest is a
same-platform check (float results could differ by the last bit with another numpy or CPU);
re-record only for a deliberate change of dynamics, with the reason in the commit.
"""

from __future__ import annotations

import hashlib
import json

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
    "sharing-a": ("a100-4nic-tor3-poisson", {}, (1, 2), 1500),
    "batch-8rack": ("dally-batch-8rack", {}, (1,), 1500),
    "tiresias-4rack": ("dally-poisson-4rack", {"base_policy": "tiresias"}, (1,), 800),
    "gandiva-4rack": ("dally-poisson-4rack", {"base_policy": "gandiva"}, (1,), 800),
    "dally-manual-v0": (
        "dally-poisson-8rack",
        {"base_policy": "dally-manual", "wait_limit": "none"},
        (1,),
        800,
    ),
}
RECORDED: dict[str, tuple[int, str]] = {
    "batch-8rack": (855, "137d61335a07fa201ef2e77cc3c99b4412cddd508185ae493fea632a3ab56a2e"),
    "dally-4rack": (3016, "79d3cebad838e5a441981526730468c2750b0ee062b3fce4ff78ea3d536f107c"),
    "dally-manual-v0": (685, "bd0042672f18058045ab898e0c17d055d7d1e269b738fd7dc75aeea4a648473b"),
    "delaytimer-4rack": (942, "e3342812fea222b31874483295060b9cc199c59dbae998aff5902abc1d83c10a"),
    "gandiva-4rack": (453, "a781d3d08749d19b993afe0b7934971bb6c18db4957e437c635983ca29853549"),
    "scheduler-8rack": (888, "0b8bb51042c36b036821fd07647306b18489708ffc49451cf4af7786a8aa5717"),
    "sharing-a": (1256, "4b0b4aaed97906bd3b0992bc600a3400cb12fef5d73bbd6bbc18e102d504cb0b"),
    "tiresias-4rack": (749, "52a4dbd8ed540827a6046cac087f386551ab4f1eb412ee3370191196388d347d"),
}


def episode_digest(
    scenario: str, kwargs: dict, seeds: tuple[int, ...], cap: int
) -> tuple[int, str]:
    """(steps, sha256) over obs bytes, masks, rewards, flags and final summaries."""
    kwargs = dict(kwargs)
    env = gym.make(f"DLCluster/{kwargs.pop('env', 'Placement-v1')}", scenario=scenario, **kwargs)
    masked = hasattr(env.unwrapped, "action_masks")
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    n = 0
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done and n < cap:
            h.update(_bytes(obs))
            if masked:
                mask = env.unwrapped.action_masks()
                h.update(np.asarray(mask).tobytes())
                action = int(rng.choice(np.flatnonzero(mask)))
            else:
                action = rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32)
            obs, reward, term, trunc, info = env.step(action)
            h.update(np.float64(reward).tobytes())
            h.update(bytes([term, trunc]))
            done = term or trunc
            n += 1
            if done:
                summary = {k: v for k, v in info["results"].items() if k != "wall_s"}
                h.update(json.dumps(summary, sort_keys=True).encode())
        h.update(_bytes(obs))
    env.close()
    return n, h.hexdigest()


def _bytes(obs: np.ndarray | dict) -> bytes:
    if isinstance(obs, dict):
        return b"".join(np.asarray(obs[k]).tobytes() for k in sorted(obs))
    return obs.tobytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_placement_episodes_match_recorded_digest(case: str) -> None:
    assert case in RECORDED, f"no recorded digest for {case}"
    assert episode_digest(*CASES[case]) == RECORDED[case]


def test_cluster_features_numpy_path_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy reductions (clusters over ``SMALL_MACHINES``) give the list path's values."""
    monkeypatch.setattr(ClusterFeatures, "SMALL_MACHINES", 0)
    assert episode_digest(*CASES["sharing-a"]) == RECORDED["sharing-a"]


if __name__ == "__main__":  # print the digests of this code (to record them)
    for name in sorted(CASES):
        print(f'    "{name}": {episode_digest(*CASES[name])!r},')
