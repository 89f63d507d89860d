"""Placement-v1 episodes are bit-identical to recorded digests (issue #15 speed).

The speed work on the Placement path (the observer, Dally's offers generator, the engine
steps between offers) must not change what an agent sees or gets: every observation's bytes,
every action mask, every reward, the terminated/truncated flags and the final results summary
(wall-clock time left out) of seeded masked-random episodes are hashed and compared with
digests recorded on the code before that work (``main`` at c9f8da3). A digest is a
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

# (scenario, env kwargs, seeds, step cap) -> (steps, sha256)
CASES: dict[str, tuple[str, dict, tuple[int, ...], int]] = {
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
    "gandiva-4rack": (453, "a781d3d08749d19b993afe0b7934971bb6c18db4957e437c635983ca29853549"),
    "sharing-a": (1256, "4b0b4aaed97906bd3b0992bc600a3400cb12fef5d73bbd6bbc18e102d504cb0b"),
    "tiresias-4rack": (749, "52a4dbd8ed540827a6046cac087f386551ab4f1eb412ee3370191196388d347d"),
}


def episode_digest(
    scenario: str, kwargs: dict, seeds: tuple[int, ...], cap: int
) -> tuple[int, str]:
    """(steps, sha256) over obs bytes, masks, rewards, flags and final summaries."""
    env = gym.make("DLCluster/Placement-v1", scenario=scenario, **kwargs)
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    n = 0
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done and n < cap:
            mask = env.unwrapped.action_masks()
            h.update(obs.tobytes())
            h.update(np.asarray(mask).tobytes())
            obs, reward, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            h.update(np.float64(reward).tobytes())
            h.update(bytes([term, trunc]))
            done = term or trunc
            n += 1
            if done:
                summary = {k: v for k, v in info["results"].items() if k != "wall_s"}
                h.update(json.dumps(summary, sort_keys=True).encode())
        h.update(obs.tobytes())
    env.close()
    return n, h.hexdigest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_placement_episodes_match_recorded_digest(case: str) -> None:
    assert case in RECORDED, f"no recorded digest for {case}"
    assert episode_digest(*CASES[case]) == RECORDED[case]


if __name__ == "__main__":  # print the digests of this code (to record them)
    for name in sorted(CASES):
        print(f'    "{name}": {episode_digest(*CASES[name])!r},')
