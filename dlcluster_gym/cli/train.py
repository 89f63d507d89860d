"""``dlcluster train``: train a learned agent (torch and stable-baselines3 are imported only
when it runs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dlcluster_gym.cli.common import _fail, _import_agents, traces_dir_option


@click.command()
@click.option(
    "--agent",
    "agent",
    type=click.Choice(["placement", "delay-timer", "scheduler"]),
    required=True,
    help="Which agent to train.",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    help="Agent config YAML (default: configs/agents/<agent>.yaml).",
)
@click.option(
    "--split",
    default=None,
    metavar="NAME",
    help="Train on this named split's train part and validate on its validation part "
    "(dlcluster list splits), instead of the config's train and validation scenarios and "
    "seeds; its test part becomes the config's evaluation set.",
)
@click.option("--timesteps", type=click.IntRange(min=1), default=None, help="Total env steps.")
@click.option("--n-envs", type=click.IntRange(min=1), default=None, help="Parallel envs.")
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=None,
    help="Training seed (default: the config's).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output directory (default: runs/agents/<agent>).",
)
@click.option(
    "--resume",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Continue training from this checkpoint (e.g. OUT/last.zip) up to --timesteps.",
)
@traces_dir_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def train(
    agent: str,
    config_file: str | None,
    split: str | None,
    timesteps: int | None,
    n_envs: int | None,
    seed: int | None,
    out: Path | None,
    resume: Path | None,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Train a learned agent (needs the `agents` extra: torch, stable-baselines3).

    --split NAME replaces the config's training scenarios and seeds by the split's train
    part (its seeds, together one range lo-hi, become train.seeds [lo, hi + 1)), its
    validation scenarios and seeds by the validation part, and its evaluation set by the test
    part; the run records the split's name (config.yaml, command.txt)."""
    agents_train = _import_agents("dlcluster_gym.agents.train")
    from dlcluster_gym.agents.config import DEFAULT_CONFIGS, load_agent_config

    cfg = load_agent_config(config_file or DEFAULT_CONFIGS[agent], split=split)
    if cfg.agent != agent:
        _fail(f"config {config_file} is for the {cfg.agent} agent, not {agent}")
    rollout = int(getattr(cfg.ppo, "n_steps", 1)) * int(n_envs or cfg.train.n_envs)
    if timesteps is not None and timesteps % rollout:
        _fail(
            f"--timesteps {timesteps}: {cfg.algorithm} trains whole rollouts of n_steps "
            f"{cfg.ppo.n_steps} x {n_envs or cfg.train.n_envs} env(s) = {rollout:,} steps, so it "
            f"would train {-(-timesteps // rollout) * rollout:,}; give a multiple of {rollout:,}"
            " (or change ppo.n_steps in the config, or --n-envs)"
        )
    if timesteps is None and cfg.train.timesteps % rollout:
        click.echo(
            f"note: train.timesteps {cfg.train.timesteps:,} is not a multiple of one rollout "
            f"({rollout:,} steps): {cfg.algorithm} trains "
            f"{-(-cfg.train.timesteps // rollout) * rollout:,} steps",
            err=True,
        )
    _check_train_traces(cfg, config_file or DEFAULT_CONFIGS[agent], traces_dir)
    out = out or Path("runs") / "agents" / agent
    command = f"dlcluster train --agent {agent}" + "".join(
        f" --{k.replace('_', '-')} {v}"
        for k, v in (
            ("config", config_file),
            ("split", split),
            ("timesteps", timesteps),
            ("n_envs", n_envs),
            ("seed", seed),
            ("out", out),
            ("resume", resume),
        )
        if v is not None
    )
    res = agents_train.train(
        cfg,
        out,
        timesteps=timesteps,
        n_envs=n_envs,
        seed=seed,
        resume=resume,
        progress_bar=not quiet and sys.stderr.isatty(),
        command=command,
        config_source=str(config_file or f"configs/agents/{DEFAULT_CONFIGS[agent]}.yaml"),
        traces_dir=traces_dir,
    )
    click.echo(
        f"{res.timesteps} steps in {res.wall_s:.0f} s; best validation score "
        f"{res.best_score:.4f} x {cfg.validation.reference} (avg JCT ratio); "
        f"best: {res.best}, last: {res.last}, curve: {res.out / 'curve.png'}, "
        f"TensorBoard: {res.out / 'tb'}"
    )


def _check_train_traces(cfg: Any, source: str, traces_dir: Path | None) -> None:
    """Stop when a training scenario needs the absent traces (``train_specs``); a note for
    each validation scenario skipped for the same reason."""
    from dlcluster_gym.agents.envs import available, train_specs

    train_specs(cfg, traces_dir, source)
    for s in available(cfg.validation.scenarios, traces_dir)[1]:
        click.echo(f"note: validation skips {s} (needs traces; trace root not found)", err=True)


COMMANDS = (train,)
