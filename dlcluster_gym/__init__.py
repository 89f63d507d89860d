"""dlcluster-gym: a simulator and Gymnasium environments for deep-learning cluster scheduling."""

from __future__ import annotations

from pathlib import Path as _Path

from dlcluster_gym.api import simulate
from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.envs import register_envs
from dlcluster_gym.scheduler import BaseScheduler, Scheduler, make_policy, register_policy
from dlcluster_gym.sim.actions import (
    Migrate,
    Preempt,
    Resize,
    SetTimeShift,
    Start,
    TimeShare,
    WakeUp,
)
from dlcluster_gym.sim.results import Results
from dlcluster_gym.sim.view import ClusterView, Plan
from dlcluster_gym.version import __version__
from dlcluster_gym.workload.job import Job

# The paper schedulers and the learned agents import as ``dlcluster_gym.baselines`` and
# ``dlcluster_gym.agents`` (no top-level ``baselines``/``agents`` that could collide with other
# projects). A wheel installs them inside this package; a source checkout keeps them beside it
# (the repository layout), so the package's search path also covers the checkout's root there.
_CHECKOUT = _Path(__file__).resolve().parent.parent
if (
    not (_Path(__file__).parent / "baselines").is_dir()
    and (_CHECKOUT / "baselines" / "__init__.py").is_file()
):
    __path__.append(str(_CHECKOUT))

register_envs()

__all__ = [
    "BaseScheduler",
    "Cluster",
    "ClusterView",
    "Job",
    "Migrate",
    "Plan",
    "Preempt",
    "Resize",
    "Results",
    "Scheduler",
    "SetTimeShift",
    "Start",
    "Tier",
    "TimeShare",
    "WakeUp",
    "__version__",
    "load_cluster",
    "load_scenario",
    "make_policy",
    "register_policy",
    "simulate",
]
