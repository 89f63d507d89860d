"""The Scheduler protocol and the registry of named policies.

A policy is any object with ``schedule(view) -> list[Action]`` (and optionally
``reset(view, rng)``, a ``name`` and a ``params`` dict). Named policies are registered as
``"module:attribute"`` strings and imported only when asked for, so the core never imports
``baselines`` or ``agents`` eagerly. Users plug in their own with an import path:
``--policy mypkg.mymodule:MyScheduler``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import operator
import os
import sys
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, ValidationError, create_model

from dlcluster_gym.errors import ConfigError, DLClusterError, UnknownNameError
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.boundary import is_clairvoyant
from dlcluster_gym.sim.view import ClusterView


@runtime_checkable
class Scheduler(Protocol):
    """What the engine calls. ``schedule`` runs at every decision instant."""

    name: str

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None: ...

    def schedule(self, view: ClusterView) -> Sequence[Action]: ...


class BaseScheduler:
    """Convenience base: stores constructor parameters in ``params``; ``reset`` keeps the rng.

    ``clairvoyant`` (default False) declares whether the policy reads ground truth a real
    scheduler does not have (job lengths, future arrivals) through ``view.oracle``; a
    clairvoyant policy is ranked apart from deployable ones. Set it on the class, or on the
    instance where a parameter decides (e.g. Themis's ``lengths="known"``)."""

    name = "base"
    clairvoyant: bool = False

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = dict(params)
        self.rng: np.random.Generator = np.random.default_rng(0)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        self.rng = rng

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        raise NotImplementedError


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy: where it lives and one line about it."""

    name: str
    target: str  # "module:attribute"
    description: str
    bound: bool = False  # an analytical bound computed without the engine (e.g. `ideal`)


_REGISTRY: dict[str, PolicySpec] = {}


def register_policy(name: str, target: str, description: str, *, bound: bool = False) -> None:
    """Register a policy under ``name`` (re-registering replaces it)."""
    _REGISTRY[name] = PolicySpec(name, target, description, bound)


def policies() -> dict[str, PolicySpec]:
    """All registered policies by name."""
    return dict(sorted(_REGISTRY.items()))


def _import_module(module: str) -> Any:
    """Import ``module``; like ``python -m``, the current directory is searched too."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        cwd = os.getcwd()
        if cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module)


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ConfigError(f"policy import path {target!r} must look like 'package.module:Name'")
    try:
        mod = _import_module(module)
    except ImportError as exc:
        raise ConfigError(f"policy {target!r}: cannot import module {module!r}: {exc}") from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(
            f"policy {target!r}: module {module!r} has no attribute {attr!r}"
        ) from None


AGENT_TARGET = "dlcluster_gym.envs.agent_loader:agent_scheduler"


def resolve_policy(name: str) -> tuple[Any, PolicySpec]:
    """The class/factory behind a registered name, an import path or ``agent:PATH`` (a
    trained checkpoint acting over the base policy it records), with its spec."""
    if name.startswith("agent:"):
        import functools

        path = name[len("agent:") :]
        if not path.strip():
            raise ConfigError(
                f"policy {name!r}: the checkpoint path after 'agent:' is empty; give the agent's "
                ".zip file, e.g. agent:agents/checkpoints/scheduler.zip"
            )
        spec = PolicySpec(name, AGENT_TARGET, f"trained agent {path}")
        return functools.partial(_import(AGENT_TARGET), path), spec
    if name in _REGISTRY:
        spec = _REGISTRY[name]
    elif ":" in name:
        spec = PolicySpec(name, name, f"user policy {name}")
    else:
        raise UnknownNameError("policy", name, _REGISTRY)
    return _import(spec.target), spec


def _strict(annotation: Any) -> Any:
    """``bool`` and ``int`` as their strict pydantic types (also inside ``X | None``): a
    parameter declared ``bool`` takes true/false only, one declared ``int`` no floats or
    booleans. Other types validate as pydantic's lax mode does (an int for a float)."""
    strict = {bool: StrictBool, int: StrictInt}
    if annotation in strict:
        return strict[annotation]
    args = typing.get_args(annotation)
    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    if is_union and any(a in strict for a in args):  # `int | None`, `str | bool`, ...
        return functools.reduce(operator.or_, [strict.get(a, a) for a in args])
    return annotation


def _constructor(factory: Any) -> Any:
    return factory.__init__ if inspect.isclass(factory) else factory


@functools.lru_cache(maxsize=256)
def policy_parameters(factory: Any, bound: tuple[str, ...] = ()) -> type[BaseModel] | None:
    """The declared parameters of a policy as a pydantic model, or None when it accepts any
    keyword (a user constructor with ``**kwargs``).

    One mechanism for every policy: the declaration is the constructor's keyword parameters
    with their type hints and defaults, so adding a parameter is one line in ``__init__``.
    :class:`BaseScheduler`'s own ``**params`` declares nothing: a subclass without an
    ``__init__`` takes no parameters. ``bound`` names constructor arguments the caller
    supplies itself (an env policy's ``env``); they are not parameters.
    """
    init = _constructor(factory)
    if init is BaseScheduler.__init__:
        return create_model(f"{getattr(factory, '__name__', 'policy')}Params", __config__=_CFG)
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # unresolvable annotations: validate presence only
        hints = {}
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            return None
        if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY) or p.name in ("self", *bound):
            continue
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (_strict(hints.get(p.name, Any)), default)
    return create_model(
        f"{getattr(factory, '__name__', 'policy')}Params", __config__=_CFG, **fields
    )


_CFG = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())


def _describe(model: type[BaseModel]) -> str:
    parts = []
    for name, f in model.model_fields.items():
        ann = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
        ann = {"StrictBool": "bool", "StrictInt": "int"}.get(ann, ann)
        parts.append(
            f"{name} ({ann}" + ("" if f.is_required() else f", default {f.default!r}") + ")"
        )
    return ", ".join(parts) or "(none)"


def check_policy_params(
    name: str, params: dict[str, Any], factory: Any = None, bound: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``params`` validated against the policy's declaration (see :func:`policy_parameters`);
    an unknown or ill-typed parameter is a :class:`ConfigError` listing the valid ones."""
    if factory is None:
        factory, _ = resolve_policy(name)
    model = policy_parameters(factory, bound)
    if model is None:
        return dict(params)
    unknown = [k for k in params if k not in model.model_fields]
    if unknown:
        raise ConfigError(
            f"policy {name!r} has no parameter {unknown[0]!r}; parameters: {_describe(model)}"
        )
    try:
        valid = model.model_validate(params)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        got = params.get(key, "(missing)") if key else params
        # a union reports one error per member: say what each member wanted, once
        same = [e for e in errors if e["loc"][:1] == first["loc"][:1]] if key else [first]
        msgs = [
            (f"{e['msg']}: true or false" if e["type"] == "bool_type" else str(e["msg"]))
            + (f" (item {e['loc'][-1]})" if len(e["loc"]) > 2 else "")  # a list member's item
            for e in same
        ]
        where = (
            key
            if len(first["loc"]) <= 1 or len(same) > 1
            else ".".join(str(x) for x in first["loc"])
        )
        raise ConfigError(
            f"policy {name!r}: parameter {where!r}: {', or '.join(dict.fromkeys(msgs))} (got "
            f"{got!r}); parameters: {_describe(model)}"
        ) from None
    return {k: getattr(valid, k) for k in params}


def make_policy(name: str, **params: Any) -> Any:
    """Instantiate a policy by name or import path, with keyword parameters validated against
    its declaration (:func:`check_policy_params`)."""
    factory, spec = resolve_policy(name)
    params = check_policy_params(name, params, factory)
    return instantiate(factory, name, params, bound=spec.bound, target=spec.target)


def instantiate(
    factory: Any, name: str, params: dict[str, Any], *, bound: bool = False, target: str = ""
) -> Any:
    """Call ``factory(**params)`` (already validated); errors name the policy."""
    if not callable(factory):
        raise ConfigError(
            f"policy {name!r} ({target or name}) is a {type(factory).__name__}, not a policy "
            "class or factory"
        )
    try:
        policy = factory(**params)
    except ConfigError as exc:  # a parameter's value: name the policy unless it says it
        if str(exc).startswith(("policy ", "agent ")):
            raise
        raise ConfigError(f"policy {name!r}: {exc}") from None
    except DLClusterError:
        raise  # already a clear message (e.g. a missing agent checkpoint)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"policy {name!r}: bad parameters {params}: {exc}") from None
    if not hasattr(policy, "schedule") and not bound:
        raise ConfigError(f"policy {name!r} ({target or name}) has no schedule(view) method")
    if not getattr(policy, "name", None) or policy.name == "base":
        with contextlib.suppress(AttributeError):
            policy.name = name
    return policy


KINDS: tuple[str, ...] = ("deployable", "clairvoyant", "bound")
"""What an entrant may know: ``deployable`` (only what a real scheduler observes),
``clairvoyant`` (declares ``clairvoyant = True``: reads job lengths or future arrivals),
``bound`` (an analytical bound computed without the engine, e.g. ``ideal``)."""


def policy_kind(name: str, params: dict[str, Any] | None = None) -> str:
    """The :data:`KINDS` entry of policy ``name`` with ``params`` (a registered name, an
    import path or ``agent:PATH``): bounds from the registry, clairvoyance from the policy's
    own declaration (which may depend on its parameters, e.g. Themis's ``lengths``)."""
    _, spec = resolve_policy(name)
    if spec.bound:
        return "bound"
    return "clairvoyant" if is_clairvoyant(make_policy(name, **(params or {}))) else "deployable"


def parse_policy_args(items: Sequence[str]) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict, values parsed as YAML (numbers, lists, mappings; booleans are
    ``true``/``false`` only: ``yes``, ``on`` and the like stay text). A key given twice is an
    error (the last would win silently)."""
    import yaml

    from dlcluster_gym.config import safe_load

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--policy-arg {item!r}: expected key=value")
        key = key.strip()
        if key in out:
            raise ConfigError(
                f"--policy-arg {item!r}: parameter {key!r} is given twice; give each once"
            )
        try:
            out[key] = safe_load(value)
        except yaml.YAMLError:
            out[key] = value
    return out


# Built-in policies (imported lazily).
register_policy(
    "fcfs",
    "dlcluster_gym.baselines.fcfs:FCFS",
    "strict arrival order, head-of-line blocking, first fit, no preemption",
)
register_policy(
    "fcfs-consolidated",
    "dlcluster_gym.baselines.fcfs:FCFSConsolidated",
    "FCFS that waits for the most consolidated placement the job can have",
)
register_policy(
    "random",
    "dlcluster_gym.baselines.random_policy:RandomPlacement",
    "FCFS order, random feasible GPUs",
)
register_policy(
    "dally",
    "dlcluster_gym.baselines.dally:Dally",
    "Dally: Nw_sens-ordered offers, delay scheduling with auto-tuned timers, preemption",
)
register_policy(
    "dally-manual",
    "dlcluster_gym.baselines.dally:DallyManual",
    "Dally with fixed delay timers (12 h machine, 24 h rack)",
)
register_policy(
    "tiresias",
    "dlcluster_gym.baselines.tiresias:Tiresias",
    "Tiresias: discretized 2D-LAS queues, preemption, skew-based consolidation",
)
register_policy(
    "gandiva",
    "dlcluster_gym.baselines.gandiva:Gandiva",
    "Gandiva: 60 s time-slicing by suspend-resume, oversubscription, unpacking, migration",
)
register_policy(
    "gandiva-placement",
    "dlcluster_gym.baselines.gandiva:GandivaPlacementOnly",
    "Gandiva's placement-and-migration-only variant (first fit, no time-slicing)",
)
register_policy(
    "themis",
    "dlcluster_gym.baselines.themis:Themis",
    "Themis: finish-time fairness, 10-minute leases, auctions maximizing the summed rho "
    "improvement over bids for several worker counts (Cassini's base scheduler)",
)
register_policy(
    "themis-greedy",
    "dlcluster_gym.baselines.themis:ThemisGreedy",
    "Themis with the greedy arbiter: bidders served in decreasing finish-time fairness rho",
)
register_policy(
    "themis-demand",
    "dlcluster_gym.baselines.themis:ThemisDemand",
    "Themis whose jobs bid for their demand only (worker counts not tuned)",
)
register_policy(
    "cassini",
    "dlcluster_gym.baselines.cassini:Cassini",
    "Th+Cassini: Themis with Cassini's placement candidates, compatibility and time shifts",
)
register_policy(
    "cassini-demand",
    "dlcluster_gym.baselines.cassini:CassiniDemand",
    "Th+Cassini over themis-demand (worker counts not tuned)",
)
register_policy(
    "dally+cassini",
    "dlcluster_gym.baselines.cassini:DallyCassini",
    "Dally with Cassini's placement candidates and time shifts (new combination)",
)
register_policy(
    "fcfs+cassini",
    "dlcluster_gym.baselines.cassini:FCFSCassini",
    "FCFS with Cassini's placement candidates and time shifts (new combination)",
)
register_policy(
    "las-slots",
    "dlcluster_gym.envs.native:LASSlotsScheduler",
    "least attained GPU-service first over waiting and running jobs, preempts (Scheduler-env "
    "policy run natively)",
)
register_policy(
    "qssf",
    "dlcluster_gym.baselines.qssf:QSSF",
    "Helios QSSF: shortest estimated GPU-service first (history by user/job name, VC/GPUs), "
    "no preemption",
)
register_policy(
    "qssf-preemptive",
    "dlcluster_gym.envs.native:QSSFSlotsScheduler",
    "QSSF with las-slots's placement and preemption: least estimated remaining GPU-service",
)
register_policy(
    "gittins-slots",
    "dlcluster_gym.envs.native:GittinsSlotsScheduler",
    "Gittins index of attained run time under Dally's duration distribution, las-slots's "
    "placement and preemption (knows the distribution, not the lengths)",
)
register_policy(
    "srsf",
    "dlcluster_gym.envs.native:SRSFSlotsScheduler",
    "CLAIRVOYANT shortest true remaining GPU-service first, las-slots's placement and preemption",
)
register_policy(
    "srw",
    "dlcluster_gym.baselines.srw:ShortestRemainingWork",
    "CLAIRVOYANT reference: shortest true remaining work first, waits for the best tier",
)
register_policy(
    "ideal",
    "dlcluster_gym.baselines.ideal:IdealBound",
    "BOUND: every job alone on a dedicated cluster (no queueing, no contention)",
    bound=True,
)
register_policy(
    "nearchus",
    "dlcluster_gym.baselines.nearchus:Nearchus",
    "Nearchus: PS jobs start small, scale up x1.5 when efficient, else add PS/worker (CPU)",
)
register_policy(
    "optimus",
    "dlcluster_gym.baselines.optimus:Optimus",
    "Optimus as in Nearchus V: 20 profiled configs, fitted speed model, +1 5-vCPU node / 10 min",
)
register_policy(
    "fa-bf",
    "dlcluster_gym.baselines.fa_bf:FABF",
    "FA-BF (Nearchus V): best fixed (n_ps, n_wk) at 5 vCPUs/node by offline exhaustive search",
)
register_policy(
    "nearchus-gpu",
    "dlcluster_gym.baselines.nearchus_gpu:NearchusGPU",
    "our extension: Nearchus's scaling rule on GPU jobs with elastic worker counts (Resize)",
)
register_policy(
    "crius",
    "dlcluster_gym.baselines.crius:Crius",
    "Crius: Cells (GPU count x type x stages), agile estimation, Algorithm 1 with scaling",
)
register_policy(
    "gavel",
    "dlcluster_gym.baselines.gavel:Gavel",
    "Gavel: heterogeneity-aware max-sum-throughput LP (HiGHS), time-shared in rounds",
)
register_policy(
    "gavel-las",
    "dlcluster_gym.baselines.gavel:GavelLAS",
    "Gavel's max-min fairness (LAS) LP over GPU time, time-shared in 6-minute rounds",
)
register_policy(
    "gavel-las-agnostic",
    "dlcluster_gym.baselines.gavel:GavelLASAgnostic",
    "gavel-las with every GPU type profiled at the reference type's speed (agnostic)",
)
register_policy(
    "gavel-ftf",
    "dlcluster_gym.baselines.gavel:GavelFTF",
    "CLAIRVOYANT Gavel finish-time fairness (reads remaining iterations), rounds",
)
register_policy(
    "gavel-ftf-history",
    "dlcluster_gym.baselines.gavel:GavelFTFHistory",
    "Gavel finish-time fairness with remaining work estimated from finished jobs, rounds",
)
register_policy(
    "gavel-ftf-history-agnostic",
    "dlcluster_gym.baselines.gavel:GavelFTFHistoryAgnostic",
    "gavel-ftf-history with every GPU type profiled at the reference type's speed (agnostic)",
)
register_policy(
    "elasticflow-ls",
    "dlcluster_gym.baselines.elasticflow:ElasticFlowLS",
    "ElasticFlow with loosened deadlines: elastic scaling by data-parallel marginal throughput",
)
