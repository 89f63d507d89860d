"""Learned agents on stable-baselines3: a MaskablePPO placement agent (``Placement-v0``) and a
PPO delay-timer agent (``DelayTimer-v0``) and a MaskablePPO queue agent (``Scheduler-v0``).

The only package that imports torch / stable-baselines3. Modules: ``config`` (the YAML
training configs), ``envs`` (training env distributions), ``imitation`` (record a teacher,
clone it, evaluate: the warm start's and the newcomer script's building blocks),
``rollouts`` (rollout labels for the placement agent's warm start), ``train``, ``evaluate``
and ``load`` (self-contained checkpoints with their metadata). Nothing heavy is imported
here.
"""

AGENT_KINDS: dict[str, str] = {
    "placement": "Placement",
    "delay-timer": "DelayTimer",
    "scheduler": "Scheduler",
}
