"""Agent checkpoint metadata and env kinds, with the standard library only (no torch, no
stable-baselines3): what ``agents.load`` and ``envs.agent_loader`` both need, so that neither
imports the other for it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from dlcluster_gym.envs.versions import VERSIONS, version_name
from dlcluster_gym.errors import ConfigError

ENV_KINDS = ("Placement", "DelayTimer", "Scheduler")
META_NAME = "dlcluster_agent.json"
META_FORMAT = 1

OBSERVATION_KWARGS: dict[str, tuple[str, ...]] = {
    "Placement": ("done_jobs_of", "known_durations"),
    "DelayTimer": ("done_jobs_of",),
    "Scheduler": ("done_jobs_of", "known_durations"),
}
"""Env kwargs every checkpoint must record in ``env_kwargs``: they decide whether the agent's
observation holds ground truth, and their defaults differ between env versions, so a missing
one cannot be read as any default. (Scheduler's ``observation`` is not among them: an agent
checkpoint has the flat observation, its only default ever, and ``check_agent_env`` refuses
any other; the remaining kwargs compared there kept their class defaults.)"""

CLASS_DEFAULTS: dict[str, Any] = {"done_jobs_of": "arrived", "known_durations": False}
"""The env classes' defaults of the ``OBSERVATION_KWARGS`` (the newest versions)."""

FREE_ENV_KWARGS: frozenset[str] = frozenset(
    {
        "scenario", "scenario_overrides", "scenarios", "traces_dir", "render_mode",
        "default_scenario",
        "reward_weights", "reward_scale_s", "invalid_penalty", "unfinished_penalty",
        "unfinished_penalty_s", "stall_end", "invalid_action", "max_steps", "wait_limit",
        "max_machines", "max_racks", "skip_trivial",
    }
)  # fmt: skip
"""Env kwargs that change neither what an agent observes nor what its actions do (the
scenario, rewards, the end flag, Placement's ``wait_limit``, Scheduler's node limits of the
dict and graph observations and ``skip_trivial``): a checkpoint runs in an env whose values
differ (``agent_loader.check_agent_env``). Every other kwarg that defines an env version
(``VERSIONS``) must agree between the checkpoint's version and the env's."""


def observation_kwargs(
    kind: str, env_kwargs: Mapping[str, Any], version: int | None = None
) -> dict[str, Any]:
    """The ``OBSERVATION_KWARGS`` values of an env of ``kind`` made as version ``version``
    (the newest when None) with ``env_kwargs``: what a checkpoint trained on it records."""
    versions = VERSIONS[kind]
    base = versions[max(versions) if version is None else version]
    return {
        key: env_kwargs.get(key, base.get(key, CLASS_DEFAULTS[key]))
        for key in OBSERVATION_KWARGS[kind]
    }


def recorded_version(meta: Mapping[str, Any], path: str | Path = "<metadata>") -> int | None:
    """The version of the env id a checkpoint records (``DLCluster/Scheduler-v0`` -> 0), or
    None when it records no env id; a clear error for an id of another env kind or a version
    this package does not define."""
    kind, env_id = meta["env_kind"], meta.get("env_id")
    if not env_id:
        return None
    name = str(env_id).rsplit("/", 1)[-1]
    head, sep, num = name.rpartition("-v")
    if not sep or not num.isdigit() or head.split("-", 1)[0] != kind:
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: env_id {env_id!r} in {META_NAME} is not a "
            f"DLCluster/{kind}-v<N> id (its env_kind is {kind})"
        )
    version = int(num)
    if version not in VERSIONS[kind]:
        known = ", ".join(f"v{v}" for v in VERSIONS[kind])
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was recorded for DLCluster/{kind}-v{version}, a "
            f"version this dlcluster-gym does not define ({kind} versions: {known}); use the "
            "dlcluster-gym release that wrote it, or a newer one"
        )
    return version


def trained_env_kwargs(meta: Mapping[str, Any], path: str | Path = "<metadata>") -> dict[str, Any]:
    """The kwargs of the env a checkpoint was trained in: the registered kwargs of its recorded
    env id's version (``VERSIONS``), overridden by its recorded ``env_kwargs`` (what
    ``gymnasium.make(env_id, **env_kwargs)`` made). Kwargs named in neither had the class's
    default then and now: ``VERSIONS`` gives every older version the values in which it
    differs from the class's defaults."""
    version = recorded_version(meta, path)
    base = VERSIONS[meta["env_kind"]][version] if version is not None else {}
    return {**base, **(meta.get("env_kwargs") or {})}


def trained_version(meta: Mapping[str, Any], path: str | Path = "<metadata>") -> int:
    """The env version a checkpoint was trained on: the one its ``trained_env_kwargs`` define
    (``versions.version_name``), which is the name its training env had. The shipped
    checkpoints record ``-v0`` ids with kwargs that make a newer version; this is the newer."""
    kind = meta["env_kind"]
    name = version_name(kind, trained_env_kwargs(meta, path))
    return int(name.rsplit("-v", 1)[1])


def version_kwargs(kind: str, version: int) -> dict[str, Any]:
    """The kwargs that define version ``version`` of ``kind``, less the ``FREE_ENV_KWARGS``:
    what an env must be made with to act as that version for an agent."""
    return {k: v for k, v in VERSIONS[kind][version].items() if k not in FREE_ENV_KWARGS}


def check_agent_meta(meta: Mapping[str, Any], path: str | Path) -> None:
    """A checkpoint's metadata must record every ``OBSERVATION_KWARGS`` key of its env kind
    (an error naming the checkpoint, the missing keys and the fix otherwise)."""
    kind = meta.get("env_kind")
    if kind not in ENV_KINDS:
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: env_kind {kind!r} in {META_NAME} is not one of "
            f"{', '.join(ENV_KINDS)}"
        )
    recorded = meta.get("env_kwargs") or {}
    missing = [k for k in OBSERVATION_KWARGS[kind] if k not in recorded]
    if missing:
        v0 = observation_kwargs(kind, {}, 0)
        example = ", ".join(f'"{k}": {json.dumps(v0[k])}' for k in missing)
        raise ConfigError(
            f"agent checkpoint {str(path)!r} does not record {', '.join(missing)} in the "
            f"env_kwargs of its {META_NAME}; these decide what a {kind} agent observes "
            "(ground truth or not) and no default is assumed. Record the values it was "
            "trained with: retrain it with `dlcluster train` (which records them), or add "
            f"them to env_kwargs in {META_NAME} (dlcluster_gym.envs.agent_meta."
            f"write_agent_meta), e.g. {{{example}}} for a checkpoint trained on "
            f"DLCluster/{kind}-v0's defaults"
        )


def read_agent_meta(path: str | Path) -> dict[str, Any]:
    """The metadata of checkpoint ``path``; clear errors for a missing file, a zip that is
    not a DLCluster agent checkpoint, or metadata that does not record what the agent
    observes (``check_agent_meta``)."""
    p = Path(path)
    if not str(path).strip():
        raise ConfigError("agent checkpoint path is empty; give the agent's .zip file")
    if p.is_dir():
        raise ConfigError(f"agent checkpoint {str(path)!r} is a folder; give the .zip file")
    if not p.is_file():
        raise ConfigError(f"agent checkpoint {str(path)!r} not found")
    try:
        with zipfile.ZipFile(p) as zf:
            if META_NAME not in zf.namelist():
                raise ConfigError(
                    f"agent checkpoint {str(path)!r} has no {META_NAME}: not a DLCluster agent "
                    "(train one with `dlcluster train`)"
                )
            bad = zf.testzip()  # every member's checksum: a damaged file fails here, not later
            if bad is not None:
                raise ConfigError(
                    f"agent checkpoint {str(path)!r} is damaged: member {bad!r} fails its "
                    "checksum; copy or train it again"
                )
            text = zf.read(META_NAME)
    except ConfigError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} is not a readable zip file ({exc})"
        ) from None
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: {META_NAME} is not valid JSON ({exc})"
        ) from None
    if not isinstance(meta, dict):
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: {META_NAME} must hold a JSON object, got "
            f"{type(meta).__name__}"
        )
    if meta.get("format") != META_FORMAT:
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: metadata format {meta.get('format')!r}, "
            f"expected {META_FORMAT}"
        )
    _check_meta_fields(meta, path)
    check_agent_meta(meta, path)
    return meta


def _check_meta_fields(meta: Mapping[str, Any], path: str | Path) -> None:
    """The fields every use of a checkpoint reads, with the right types."""
    where = f"agent checkpoint {str(path)!r}: {META_NAME}"
    size = meta.get("observation_size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"{where}: observation_size must be an integer >= 1, got {size!r}")
    if not isinstance(meta.get("algorithm"), str) or not meta["algorithm"]:
        raise ConfigError(
            f"{where}: algorithm must be an algorithm name (e.g. 'maskable_ppo'), got "
            f"{meta.get('algorithm')!r}"
        )
    if not isinstance(meta.get("agent"), str) or not meta["agent"]:
        raise ConfigError(
            f"{where}: agent must name the agent kind (placement, delay-timer or scheduler), "
            f"got {meta.get('agent')!r}"
        )
    for key in ("env_kwargs", "config"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise ConfigError(f"{where}: {key} must be a JSON object, got {meta[key]!r}")


def write_agent_meta(path: str | Path, meta: Mapping[str, Any]) -> None:
    """Replace the ``META_NAME`` member of checkpoint ``path`` with ``meta`` (e.g. to record
    env kwargs it was trained with); every other member is copied unchanged."""
    p = Path(path)
    meta = {"format": META_FORMAT, **meta}
    check_agent_meta(meta, p)
    fd, tmp = tempfile.mkstemp(suffix=".zip", dir=p.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(p) as src, zipfile.ZipFile(tmp, "w") as dst:
            for info in src.infolist():
                if info.filename != META_NAME:
                    dst.writestr(info, src.read(info.filename))
            dst.writestr(META_NAME, json.dumps(meta, indent=1), zipfile.ZIP_DEFLATED)
        shutil.copymode(p, tmp)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def env_kind(env: gym.Env) -> str:
    """``"Placement"``, ``"DelayTimer"`` or ``"Scheduler"`` for an env (wrapped or not)."""
    name = getattr(env.unwrapped, "env_name", "")
    kind = name.split("-")[0]
    if kind not in ENV_KINDS:
        raise ConfigError(f"not a DLCluster env: {env!r}")
    return kind
