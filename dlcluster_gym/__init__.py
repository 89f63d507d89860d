"""dlcluster-gym: a simulator and Gymnasium environments for deep-learning cluster scheduling."""

from __future__ import annotations

__version__ = "0.1.0"

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
    WakeUp,
)
from dlcluster_gym.sim.results import Results
from dlcluster_gym.sim.view import ClusterView, Plan
from dlcluster_gym.workload.job import Job

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
    "WakeUp",
    "__version__",
    "load_cluster",
    "load_scenario",
    "make_policy",
    "register_policy",
    "simulate",
]
