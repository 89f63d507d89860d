"""Train an agent from a config: optional behaviour-cloning warm start, (Maskable)PPO with
TensorBoard logs, periodic validation keeping the best checkpoint, a training-curve PNG.

Outputs in ``out``: ``best.zip`` (lowest validation score), ``last.zip`` (resume from it),
``curve.csv`` / ``curve.png``, ``tb/`` (TensorBoard), ``config.yaml``, ``command.txt``.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

from dlcluster_gym.envs.agent_loader import scheduler_for
from dlcluster_gym.envs.agent_meta import observation_kwargs
from dlcluster_gym.errors import ConfigError

from . import AGENT_KINDS
from .config import AgentConfig
from .envs import env_id, make_mix_env, make_train_env_fn, train_specs
from .evaluate import relative_score, run_set
from .imitation import Demonstrations, clone, record, returns_to_go
from .load import AgentPolicy, algorithm_class, save_checkpoint
from .threads import use_one_thread


@dataclass
class TrainResult:
    """What a training run produced."""

    out: Path
    best: Path
    last: Path
    best_score: float
    timesteps: int
    wall_s: float
    curve: list[dict[str, float]] = field(default_factory=list)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {}
    for pkg in ("dlcluster-gym", "stable-baselines3", "sb3-contrib", "torch", "gymnasium"):
        try:
            out[pkg] = version(pkg)
        except Exception:  # pragma: no cover - a missing distribution
            out[pkg] = "unknown"
    return out


def recorded_env_kwargs(cfg: AgentConfig) -> dict[str, Any]:
    """The env kwargs a checkpoint of ``cfg`` records: the config's, plus the values of the
    kwargs that decide what the agent observes (``agent_meta.OBSERVATION_KWARGS``) in the
    training env (``env_id(cfg)`` with the config's kwargs), always, given or not."""
    kind = AGENT_KINDS[cfg.agent]
    version = int(env_id(cfg).rsplit("-v", 1)[1])
    return {**dict(cfg.env_kwargs), **observation_kwargs(kind, cfg.env_kwargs, version)}


def _meta(cfg: AgentConfig, model: Any, extra: dict[str, Any]) -> dict[str, Any]:
    space = model.observation_space
    return {
        "agent": cfg.agent,
        "algorithm": cfg.algorithm,
        "env_id": env_id(cfg),
        "env_kind": AGENT_KINDS[cfg.agent],
        "observation_size": int(space.shape[0]),
        "action_space": str(model.action_space),
        "env_kwargs": recorded_env_kwargs(cfg),
        "normalization": {
            "observation": None,
            "reward": "VecNormalize (training only)" if cfg.normalize_reward else None,
        },
        "config": cfg.model_dump(mode="json"),
        "versions": _versions(),
        **extra,
    }


# ---------------------------------------------------------------------------- warm start
def _teacher_data(cfg: AgentConfig, seed: int, traces_dir: str | Path | None) -> Demonstrations:
    """Rollouts of the warm-start teacher on the training distribution: ``episodes``
    episodes of one scenario-mix env, seeded once (``seed + 7919``) and then by its own
    generator."""
    ws = cfg.warm_start
    assert ws is not None
    seeds = [seed + 7919] + [None] * (ws.episodes - 1)
    return record(make_mix_env(cfg, traces_dir), ws.teacher, seeds)


def warm_start(
    model: Any,
    cfg: AgentConfig,
    venv: Any,
    seed: int,
    traces_dir: str | Path | None,
    progress: bool = False,
    out: Path | None = None,
) -> dict[str, Any]:
    """Behaviour cloning of the teacher, and the critic fitted to the teacher's normalized
    discounted returns (so PPO starts from the teacher with a sensible value function).
    Rollout labels are also written to ``out/rollout_labels.npz`` for inspection."""
    ws = cfg.warm_start
    assert ws is not None
    t0 = time.perf_counter()
    labels: dict[str, Any] = {}
    weights = None
    if ws.rollout is not None:
        from .rollouts import rollout_data

        r = ws.rollout
        d, labels = rollout_data(
            cfg, ws.episodes, seed, r.horizon_h, r.margin_job_h, r.workers, traces_dir, progress
        )
        if out is not None:
            arrays = {k: np.asarray(v) for k, v in d.items()}
            np.savez_compressed(out / "rollout_labels.npz", **arrays)
        demos = Demonstrations(
            obs=np.asarray(d["obs"]),
            act=np.asarray(d["act"]),
            mask=np.asarray(d["mask"]) if d["mask"] else None,
            rew=np.asarray(d["rew"]),
            end=np.asarray(d["end"]),
        )
        # up-weight the labels that improve on the teacher
        deviates = np.asarray(d["act"]) != np.asarray(d["base"])
        weights = np.where(deviates, ws.rollout.deviation_weight, 1.0)
    else:
        demos = _teacher_data(cfg, seed, traces_dir)
    gamma = cfg.ppo.gamma
    scale = 1.0
    vn = _find_vecnormalize(venv)
    if vn is not None and vn.norm_reward:  # prime VecNormalize's return statistics
        ret, acc = np.empty_like(demos.rew), 0.0
        for i, r in enumerate(demos.rew):
            acc = acc * gamma + r
            ret[i] = acc
            if demos.end[i]:
                acc = 0.0
        vn.ret_rms.update(ret)
        scale = float(np.sqrt(vn.ret_rms.var + vn.epsilon))
    last = clone(
        model,
        demos,
        epochs=ws.epochs,
        batch_size=ws.batch_size,
        learning_rate=ws.learning_rate,
        seed=seed,
        weights=weights,
        value_targets=returns_to_go(demos.rew, demos.end, gamma, scale),
    )
    n = len(demos)
    return {
        "teacher": ws.teacher,
        "samples": int(n),
        "episodes": ws.episodes,
        "epochs": ws.epochs,
        "reward_scale": scale,
        "wall_s": time.perf_counter() - t0,
        **last,
        **({"rollout": labels} if labels else {}),
    }


def _find_vecnormalize(venv: Any) -> Any:
    from stable_baselines3.common.vec_env import VecNormalize

    v = venv
    while v is not None:
        if isinstance(v, VecNormalize):
            return v
        v = getattr(v, "venv", None)
    return None


# ---------------------------------------------------------------------------- validation
def _live_scheduler(model: Any, meta: dict[str, Any]) -> Any:
    def factory(env: gym.Env) -> Any:
        return AgentPolicy(model, meta)

    return scheduler_for(meta, factory, f"{meta['agent']}-agent")


def validate(
    model: Any, cfg: AgentConfig, meta: dict[str, Any], traces_dir: str | Path | None = None
) -> tuple[float, list[dict[str, Any]]]:
    """Score of the current model on the validation set (mean avg-JCT ratio to the
    reference policy; lower is better) and its rows."""
    v = cfg.validation
    rows = run_set(
        {"agent": lambda: _live_scheduler(model, meta), v.reference: v.reference},
        v.scenarios,
        v.seeds,
        traces_dir,
    )
    return relative_score(rows, "agent", v.reference), rows


def _callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    class ValidationCallback(BaseCallback):
        """Validates every ``every`` steps (and at the start), keeps the best checkpoint,
        logs training episodes' results to TensorBoard and the curve."""

        def __init__(self, trainer: _Trainer) -> None:
            super().__init__()
            self.trainer = trainer
            self.next_at = 0

        def _on_training_start(self) -> None:
            self.next_at = self.num_timesteps
            self._maybe_validate()

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                res = info.get("results")
                if res is not None and "avg_jct_s" in res:
                    self.logger.record_mean("train/episode_avg_jct_h", res["avg_jct_s"] / 3600)
                    self.trainer.episodes.append((self.num_timesteps, res["avg_jct_s"]))
            self._maybe_validate()
            return True

        def _maybe_validate(self) -> None:
            if self.num_timesteps >= self.next_at:
                score = self.trainer.validate_and_keep(self.num_timesteps)
                self.logger.record("validation/score_vs_ref", score)
                self.next_at = self.num_timesteps + self.trainer.cfg.validation.every_steps

    return ValidationCallback


class _Trainer:
    def __init__(
        self, cfg: AgentConfig, model: Any, out: Path, meta_extra: dict[str, Any], traces_dir: Any
    ) -> None:
        self.cfg = cfg
        self.model = model
        self.out = out
        self.meta_extra = meta_extra
        self.traces_dir = traces_dir
        self.best = float("inf")
        self.curve: list[dict[str, float]] = []
        self.episodes: list[tuple[int, float]] = []
        self.t0 = time.perf_counter()

    def meta(self, **more: Any) -> dict[str, Any]:
        return _meta(self.cfg, self.model, {**self.meta_extra, **more})

    def validate_and_keep(self, steps: int) -> float:
        score, _ = validate(self.model, self.cfg, self.meta(), self.traces_dir)
        self.curve.append(
            {"timesteps": steps, "score": score, "wall_s": time.perf_counter() - self.t0}
        )
        info = {"timesteps": int(steps), "validation_score": score}
        if score < self.best or not (self.out / "best.zip").is_file():  # inf: still keep one
            self.best = min(score, self.best)
            save_checkpoint(self.model, self.out / "best.zip", self.meta(**info))
        save_checkpoint(self.model, self.out / "last.zip", self.meta(**info))
        _write_curve(self, self.cfg)
        return score


def _write_curve(trainer: _Trainer, cfg: AgentConfig) -> None:
    out = trainer.out
    with (out / "curve.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["timesteps", "score", "wall_s"])
        w.writeheader()
        w.writerows(trainer.curve)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = np.array([c["timesteps"] for c in trainer.curve], dtype=float)
    ys = np.array([c["score"] for c in trainer.curve], dtype=float)
    bad = ~np.isfinite(ys)
    axes[0].plot(xs[~bad], ys[~bad], marker="o", label="agent")
    if bad.any():  # runs that left jobs unfinished (disqualified)
        top = float(np.nanmax(ys[~bad])) if (~bad).any() else 1.0
        axes[0].plot(xs[bad], np.full(bad.sum(), top), "rx", label="jobs left unfinished")
    axes[0].axhline(1.0, color="grey", ls="--", lw=1, label=cfg.validation.reference)
    axes[0].set_title(f"validation: avg JCT / {cfg.validation.reference}")
    axes[0].set_xlabel("timesteps")
    axes[0].legend()
    if trainer.episodes:
        ep = np.asarray(trainer.episodes)
        axes[1].plot(ep[:, 0], ep[:, 1] / 3600.0, ".", alpha=0.5)
    axes[1].set_title("training episodes: avg JCT (h), mixed scenarios")
    axes[1].set_xlabel("timesteps")
    fig.suptitle(f"{cfg.agent} agent ({cfg.algorithm})")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=90)
    plt.close(fig)


def train(
    cfg: AgentConfig,
    out: str | Path,
    *,
    timesteps: int | None = None,
    n_envs: int | None = None,
    seed: int | None = None,
    resume: str | Path | None = None,
    progress_bar: bool = True,
    command: str = "",
    config_source: str = "",
    traces_dir: str | Path | None = None,
) -> TrainResult:
    """Train ``cfg``'s agent into ``out``; ``timesteps`` is the total (a resumed run trains
    the rest). Returns the paths and the best validation score."""
    import torch as th
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    t0 = time.perf_counter()
    train_specs(cfg, traces_dir, config_source)  # before any output: no traces, no training
    rmeta = None
    if resume is not None:  # before any env is made: a bad checkpoint is its own error
        from dlcluster_gym.envs.agent_loader import read_agent_meta

        rmeta = read_agent_meta(resume)
        if rmeta["agent"] != cfg.agent or rmeta["algorithm"] != cfg.algorithm:
            raise ConfigError(
                f"cannot resume {cfg.agent} ({cfg.algorithm}) training from {str(resume)!r}: "
                f"it is a {rmeta['agent']} ({rmeta['algorithm']}) checkpoint"
            )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    total = int(timesteps or cfg.train.timesteps)
    n = int(n_envs or cfg.train.n_envs)
    seed = cfg.train.seed if seed is None else int(seed)
    use_one_thread()  # agents/threads.py: the rule and why
    set_random_seed(seed)
    fns = [make_train_env_fn(cfg, i, traces_dir) for i in range(n)]
    venv: Any = SubprocVecEnv(fns) if cfg.train.vec_env == "subproc" and n > 1 else DummyVecEnv(fns)
    if cfg.normalize_reward:
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=cfg.ppo.gamma)
    algo = algorithm_class(cfg.algorithm)
    tb = str(out / "tb")
    extra: dict[str, Any] = {
        "command": command,
        "config_source": config_source,
        "seed": seed,
        "n_envs": n,
        "total_timesteps": total,
    }
    if resume is not None and rmeta is not None:
        try:
            model = algo.load(str(resume), env=venv, device="cpu", tensorboard_log=tb)
        except Exception as exc:  # a damaged model inside a readable zip
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise ConfigError(
                f"cannot resume from {str(resume)!r}: its model does not load "
                f"({type(exc).__name__}: {first})"
            ) from None
        extra["resumed_from"] = str(resume)
        extra["warm_start"] = rmeta.get("warm_start")
    else:
        act_fn = th.nn.Tanh if cfg.policy.activation == "tanh" else th.nn.ReLU
        policy_kwargs: dict[str, Any] = {
            "net_arch": list(cfg.policy.net_arch),
            "activation_fn": act_fn,
        }
        if cfg.agent == "delay-timer":
            policy_kwargs["log_std_init"] = cfg.policy.log_std_init
        model = algo(
            "MlpPolicy",
            venv,
            **cfg.ppo.model_dump(),
            policy_kwargs=policy_kwargs,
            tensorboard_log=tb,
            seed=seed,
            device="cpu",
            verbose=0,
        )
        if cfg.warm_start is not None:
            extra["warm_start"] = warm_start(model, cfg, venv, seed, traces_dir, progress_bar, out)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    (out / "command.txt").write_text(command + "\n")
    trainer = _Trainer(cfg, model, out, extra, traces_dir)
    remaining = max(total - int(model.num_timesteps), 0)
    cb = _callback_class()(trainer)
    model.learn(
        total_timesteps=remaining,
        callback=cb,
        progress_bar=progress_bar,
        reset_num_timesteps=resume is None,
        tb_log_name=cfg.agent,
    )
    if not trainer.curve or trainer.curve[-1]["timesteps"] != model.num_timesteps:
        trainer.validate_and_keep(int(model.num_timesteps))
    venv.close()
    _write_curve(trainer, cfg)
    wall = time.perf_counter() - t0
    (out / "train_summary.json").write_text(
        json.dumps(
            {
                "best_score": trainer.best,
                "timesteps": int(model.num_timesteps),
                "wall_s": wall,
                "steps_per_s": int(model.num_timesteps) / wall,
                "curve": trainer.curve,
                **{k: v for k, v in extra.items() if k != "command"},
                "command": command,
            },
            indent=1,
        )
    )
    return TrainResult(
        out, out / "best.zip", out / "last.zip", trainer.best, int(model.num_timesteps), wall,
        trainer.curve,
    )  # fmt: skip
