"""Learned agents on stable-baselines3: a MaskablePPO placement agent (``Placement-v0``) and a
PPO delay-timer agent (``DelayTimer-v0``) and a MaskablePPO queue agent (``Scheduler-v0``).

The only package that imports torch / stable-baselines3. Modules: ``config`` (the YAML
training configs), ``envs`` (training env distributions), ``imitation`` (record a teacher,
clone it, evaluate: the warm start's and the newcomer script's building blocks),
``rollouts`` (rollout labels for the placement agent's warm start), ``train``, ``evaluate``,
``load`` (self-contained checkpoints with their metadata) and ``save`` (:func:`save_agent`:
any SB3 / sb3-contrib model as such a checkpoint). Nothing heavy is imported here:
``save_agent`` imports its module when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .save import save_agent
    from .threads import use_one_thread

AGENT_KINDS: dict[str, str] = {
    "placement": "Placement",
    "delay-timer": "DelayTimer",
    "scheduler": "Scheduler",
}

__all__ = ["AGENT_KINDS", "save_agent", "use_one_thread"]


def __getattr__(name: str) -> Any:
    """``save_agent`` (``agents.save``) and ``use_one_thread`` (``agents.threads``), imported
    on first use."""
    if name == "save_agent":
        from .save import save_agent

        return save_agent
    if name == "use_one_thread":
        from .threads import use_one_thread

        return use_one_thread
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
