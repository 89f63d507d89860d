"""Agent checkpoint metadata and env kinds, with the standard library only (no torch, no
stable-baselines3): what ``agents.load`` and ``envs.agent_loader`` both need, so that neither
imports the other for it."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym

from dlcluster_gym.errors import ConfigError

ENV_KINDS = ("Placement", "DelayTimer", "Scheduler")
META_NAME = "dlcluster_agent.json"
META_FORMAT = 1


def read_agent_meta(path: str | Path) -> dict[str, Any]:
    """The metadata of checkpoint ``path``; clear errors for a missing file or a zip that is
    not a DLCluster agent checkpoint."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"agent checkpoint {str(path)!r} not found")
    try:
        with zipfile.ZipFile(p) as zf:
            if META_NAME not in zf.namelist():
                raise ConfigError(
                    f"agent checkpoint {str(path)!r} has no {META_NAME}: not a DLCluster agent "
                    "(train one with `dlcluster train`)"
                )
            meta = json.loads(zf.read(META_NAME))
    except zipfile.BadZipFile:
        raise ConfigError(f"agent checkpoint {str(path)!r} is not a zip file") from None
    if meta.get("format") != META_FORMAT:
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: metadata format {meta.get('format')!r}, "
            f"expected {META_FORMAT}"
        )
    return meta


def env_kind(env: gym.Env) -> str:
    """``"Placement"``, ``"DelayTimer"`` or ``"Scheduler"`` for an env (wrapped or not)."""
    name = getattr(env.unwrapped, "env_name", "")
    kind = name.split("-")[0]
    if kind not in ENV_KINDS:
        raise ConfigError(f"not a DLCluster env: {env!r}")
    return kind
