"""Rollout improvement of the base policy: warm-start labels for the placement agent.

One step of approximate policy iteration (the "rollout algorithm"): at every offer of a
training episode, each distinct valid answer (wait, and the candidates that are different
placements) is tried in a copy of the simulation, which then follows the base policy's own
answer rule (Dally's Algorithm 1) for ``horizon_h`` simulated hours; the answer's value is
minus the time-integral of jobs in the system over that window (the env's ``jct`` reward,
so the sum over an episode is minus the total JCT). The label is the best answer when it beats
the base policy's own answer by more than ``margin`` job-hours, else the base policy's answer,
and the episode continues with the label (so the data covers the states the improved policy
visits). The agent is then cloned from these labels and refined by PPO.

The copies are ``os.fork`` children (a copy-on-write snapshot of the whole simulation,
generators included), so this needs a POSIX system. The rollouts see the episode's real future
arrivals; the agent does not, so the cloned policy learns the answer that is best on average
for what it observes. Episodes run in ``workers`` spawned processes, which end with the
process that started them (:func:`dlcluster_gym.workers.die_with_parent`); each episode's seed
is fixed by its index, so the data does not depend on the number of workers.
"""

from __future__ import annotations

import os
import struct
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.offers import ACTION_NAMES, NUM_ACTIONS, WAIT
from dlcluster_gym.workers import die_with_parent

HOUR = 3600.0
_SEED_STRIDE = 7919
# per transition: observation, label, mask, reward, episode end, the base policy's answer
# and the rollout value of every tried answer (NaN: not tried)
DATA_KEYS = ("obs", "act", "mask", "rew", "end", "base", "q")
_EPISODE_KEYS = ("scenario", "episode_seed", "avg_jct_h", "unfinished", "steps",
                 "mean_gain_job_h", "wall_s")  # fmt: skip


def _distinct_answers(offer: Any, mask: np.ndarray, keep: int) -> list[int]:
    """Allowed answers that lead to different states: wait (if allowed) and one action per
    distinct placement (``keep`` represents its placement when it is allowed)."""
    out: list[int] = []
    if mask[WAIT]:
        out.append(WAIT)
    seen: set[bytes] = set()
    order = [keep] + [a for a in range(1, NUM_ACTIONS) if a != keep]
    for a in order:
        if a == WAIT or not mask[a]:
            continue
        g = offer.placement(a)
        if g is None:
            continue
        key = g.tobytes()
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def _rollout_value(env: Any, action: int, horizon_s: float) -> float:
    """Minus the integral of jobs in the system (job-hours) over the next ``horizon_s`` when
    ``env`` answers the current offer with ``action`` and then follows its base policy; run in
    a forked child so ``env`` itself is untouched."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: simulate, report, exit without cleanup
        try:
            os.close(rd)
            value = env.follow_base(action, horizon_s) * env.reward_scale_s / HOUR
            os.write(wr, struct.pack("d", value))
        finally:
            os._exit(0)
    os.close(wr)
    data = b""
    while len(data) < 8:
        chunk = os.read(rd, 8 - len(data))
        if not chunk:
            break
        data += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    if len(data) < 8:
        raise RuntimeError("a rollout child exited without reporting its value")
    return struct.unpack("d", data)[0]


def label_episode(
    cfg_data: dict[str, Any],
    episode_seed: int,
    horizon_h: float,
    margin: float,
    traces_dir: str | Path | None = None,
) -> dict[str, Any]:
    """One training episode labelled by rollouts (runs in a worker process)."""
    from .config import AgentConfig
    from .envs import make_mix_env

    cfg = AgentConfig.model_validate(cfg_data)
    mix = make_mix_env(cfg, traces_dir)
    obs, info = mix.reset(seed=episode_seed)
    scenario = str(info["scenario"])
    horizon_s = horizon_h * HOUR
    rows: dict[str, list[Any]] = {k: [] for k in DATA_KEYS}
    changed: dict[str, int] = {}
    gains: list[float] = []
    t0 = time.perf_counter()
    while True:
        env = mix.env
        mask = mix.action_masks()
        offer = env._offer
        base = int(env.base.choose(offer))
        answers = _distinct_answers(offer, mask, base)
        label = base
        q = np.full(NUM_ACTIONS, np.nan)
        if len(answers) > 1:
            values = {a: _rollout_value(env, a, horizon_s) for a in answers}
            q[list(values)] = list(values.values())
            best = max(values, key=lambda a: (values[a], a == base))
            if base not in values:  # the wait limit masks the base policy's wait
                label = best
            elif values[best] > values[base] + margin:
                label = best
                gains.append(values[best] - values[base])
                key = f"{ACTION_NAMES[base]}->{ACTION_NAMES[best]}"
                changed[key] = changed.get(key, 0) + 1
        m = mask.copy()
        m[label] = True
        rows["obs"].append(obs)
        rows["act"].append(np.asarray(label))
        rows["mask"].append(m)
        rows["q"].append(q)
        rows["base"].append(np.asarray(base))
        obs, r, term, trunc, info = mix.step(label)
        rows["rew"].append(np.float64(r))
        rows["end"].append(np.bool_(term or trunc))
        if term or trunc:
            break
    res = info.get("results", {})
    return {
        **rows,
        "scenario": scenario,
        "episode_seed": episode_seed,
        "avg_jct_h": float(res.get("avg_jct_s", float("nan"))) / HOUR,
        "unfinished": int(res.get("jobs_unfinished", 0)),
        "steps": len(rows["act"]),
        "changed": changed,
        "mean_gain_job_h": float(np.mean(gains)) if gains else 0.0,
        "wall_s": time.perf_counter() - t0,
    }


def rollout_data(
    cfg: Any,
    episodes: int,
    seed: int,
    horizon_h: float,
    margin: float,
    workers: int,
    traces_dir: str | Path | None = None,
    progress: bool = False,
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Labelled transitions of ``episodes`` training episodes, and a summary of the labels."""
    if not hasattr(os, "fork"):
        raise ConfigError("warm_start.rollout needs os.fork (a POSIX system)")
    if cfg.agent != "placement":
        raise ConfigError("warm_start.rollout applies to the placement agent only")
    base = cfg.env_kwargs.get("base_policy", "dally")
    if cfg.warm_start.teacher != base:
        raise ConfigError(
            f"warm_start.rollout improves the env's base policy {base!r}; set warm_start.teacher "
            f"to {base!r} (got {cfg.warm_start.teacher!r})"
        )
    cfg_data = cfg.model_dump(mode="json")
    seeds = [seed * _SEED_STRIDE + 104_729 + k for k in range(episodes)]
    args = [(cfg_data, s, horizon_h, margin, traces_dir) for s in seeds]
    t0 = time.perf_counter()
    if workers <= 1:
        results = [label_episode(*a) for a in _progress(args, progress)]
    else:
        ctx = get_context("spawn")  # no fork of a process that holds torch threads
        # the workers end with this process, even when it is killed (SIGKILL included)
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=die_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            futures = [pool.submit(label_episode, *a) for a in args]
            results = [f.result() for f in _progress(futures, progress)]
    data: dict[str, list[Any]] = {k: [] for k in DATA_KEYS}
    changed: dict[str, int] = {}
    for r in results:
        for k in data:
            data[k].extend(r[k])
        for k, v in r["changed"].items():
            changed[k] = changed.get(k, 0) + v
    summary = {
        "method": "rollout improvement of the base policy",
        "horizon_h": horizon_h,
        "margin_job_h": margin,
        "episodes": [{k: r[k] for k in _EPISODE_KEYS} for r in results],
        "labels_changed": dict(sorted(changed.items())),
        "labels_total": len(data["act"]),
        "labelling_wall_s": time.perf_counter() - t0,
    }
    return data, summary


def _progress(items: list[Any], on: bool) -> Any:
    if not on:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc="rollout labels (episodes)", unit="ep")
