"""Training configs (``configs/agents/*.yaml``), validated with pydantic; unknown keys fail."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from dlcluster_gym.config import (
    Bool,
    Float,
    Int,
    NonNegInt,
    PositiveFloat,
    PositiveInt,
    load_scenario,
    load_yaml_file,
)
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.envs.sampling import one_line_error
from dlcluster_gym.errors import ConfigError, DLClusterError

_REPO_CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "agents"
_PKG_CONFIGS = Path(__file__).resolve().parent.parent / "dlcluster_gym" / "_configs" / "agents"
CONFIG_DIR = _REPO_CONFIGS if _REPO_CONFIGS.is_dir() else _PKG_CONFIGS
DEFAULT_CONFIGS: dict[str, str] = {
    "placement": "placement",
    "delay-timer": "delay_timer",
    "scheduler": "scheduler",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Processes and environments a config may ask for at once (each env holds a simulator, each
# rollout worker is a process): far above a machine's cores, far below what exhausts one.
MAX_PARALLEL = 256
MAX_TIMESTEPS = 10_000_000_000  # ten billion environment steps (months of training)

MIN_CI_SEEDS = 10
"""Seeds per scenario below which ``dlcluster evaluate`` warns that its 95 % confidence
intervals are too wide to trust."""
DEFAULT_EVAL_SEEDS: tuple[int, ...] = tuple(range(101, 101 + MIN_CI_SEEDS))
"""An evaluation set's seeds when its config names none (held out: training draws from
``train.seeds``, validation has its own)."""


class ScenarioSpec(_Strict):
    """One scenario of a set: a preset (or YAML path) with nested overrides; in an evaluation
    or validation set, ``seeds`` replaces the set's seeds for this scenario."""

    scenario: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None
    weight: PositiveFloat = 1.0  # sampling weight in training
    requires_traces: Bool = False  # skipped when the trace root is absent
    seeds: tuple[NonNegInt, ...] | None = Field(None, min_length=1)

    @property
    def name(self) -> str:
        return self.label or self.scenario

    def seeds_or(self, default: Sequence[int]) -> tuple[int, ...]:
        """This scenario's own seeds, else ``default`` (the set's)."""
        return tuple(self.seeds) if self.seeds is not None else tuple(default)


class TrainScenarioSpec(ScenarioSpec):
    """A training scenario: episode seeds come from ``train.seeds``, never per scenario."""

    @field_validator("seeds")
    @classmethod
    def _no_seeds(cls, v: tuple[int, ...] | None) -> None:
        if v is not None:
            raise ValueError(
                "training draws episode seeds from train.seeds [lo, hi); per-scenario seeds "
                "apply to evaluation and validation scenarios"
            )
        return None


class TrainSpec(_Strict):
    """The training distribution: scenarios sampled by weight, seeds from ``seeds`` [lo, hi)."""

    scenarios: tuple[TrainScenarioSpec, ...] = Field(min_length=1)
    seeds: tuple[Int, Int] = (0, 10_000)
    timesteps: Annotated[PositiveInt, Field(le=MAX_TIMESTEPS)] = 100_000
    n_envs: Annotated[PositiveInt, Field(le=MAX_PARALLEL)] = 2
    vec_env: Literal["dummy", "subproc"] = "dummy"
    seed: Int = 0
    # a policy run natively on each training episode's scenario and seed; its job time is
    # added back to the rewards (agents/reference_reward.py: variance reduction, same optimum)
    reward_reference: str | None = None

    @field_validator("seeds")
    @classmethod
    def _seed_range(cls, v: tuple[int, int]) -> tuple[int, int]:
        lo, hi = v
        if not 0 <= lo < hi:
            raise ValueError("must be [lo, hi) with 0 <= lo < hi (episode seeds)")
        return v


class EvalSetSpec(_Strict):
    """A set of scenarios x seeds scored by average JCT relative to ``reference``: each
    scenario runs its own ``seeds`` where it names them, else the set's (default
    ``DEFAULT_EVAL_SEEDS``, ten held-out seeds)."""

    scenarios: tuple[ScenarioSpec, ...] = Field(min_length=1)
    seeds: tuple[NonNegInt, ...] = Field(DEFAULT_EVAL_SEEDS, min_length=1)
    reference: str = "dally"

    def seeds_of(self, spec: ScenarioSpec) -> tuple[int, ...]:
        """The seeds ``spec`` runs in this set."""
        return spec.seeds_or(self.seeds)


class ValidationSpec(EvalSetSpec):
    """Periodic evaluation during training (the best checkpoint by score is kept)."""

    seeds: tuple[NonNegInt, ...] = Field(min_length=1)
    every_steps: PositiveInt = 10_000


class RolloutSpec(_Strict):
    """Label the placement warm start by rollouts (``agents/rollouts.py``) instead of cloning
    the teacher as is: each offer's distinct answers are tried and the base policy followed
    for ``horizon_h`` simulated hours; the best answer is the label when it beats the
    teacher's by more than ``margin_job_h`` job-hours. ``workers`` processes label episodes.
    ``warm_start.episodes`` is the number of labelled episodes."""

    horizon_h: PositiveFloat = 96.0
    margin_job_h: Float = Field(0.0, ge=0)
    # cross-entropy weight of the labels that differ from the teacher's answer (they are
    # about one in ten; weight 1 clones the teacher almost exactly)
    deviation_weight: PositiveFloat = 1.0
    workers: Annotated[PositiveInt, Field(le=MAX_PARALLEL)] = 2


class WarmStartSpec(_Strict):
    """Behaviour cloning of an env policy (a heuristic) before reinforcement learning."""

    teacher: str = "dally"
    rollout: RolloutSpec | None = None
    episodes: PositiveInt = 8
    epochs: PositiveInt = 10
    batch_size: PositiveInt = 256
    learning_rate: PositiveFloat = 1e-3


class PPOParams(_Strict):
    """The (Maskable)PPO hyper-parameters we expose."""

    learning_rate: PositiveFloat = 3e-4
    n_steps: PositiveInt = 512
    batch_size: PositiveInt = 128
    n_epochs: PositiveInt = 5
    gamma: Float = Field(0.99, gt=0, le=1)
    gae_lambda: Float = Field(0.95, gt=0, le=1)
    clip_range: PositiveFloat = 0.2
    ent_coef: Float = Field(0.0, ge=0)
    vf_coef: PositiveFloat = 0.5
    max_grad_norm: PositiveFloat = 0.5
    target_kl: PositiveFloat | None = None


class PolicyParams(_Strict):
    """Network of the actor-critic policy."""

    net_arch: tuple[PositiveInt, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    log_std_init: Float = 0.0  # Box actions only


class AgentConfig(_Strict):
    """A full agent training config."""

    agent: Literal["placement", "delay-timer", "scheduler"]
    algorithm: Literal["maskable_ppo", "ppo"]
    description: str = ""
    # a named split (``dlcluster_gym.splits``): its train, validation and test parts replace
    # the train, validation and evaluation scenarios and seeds (``apply_split``)
    split: str | None = None
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    normalize_reward: Bool = True
    # "rack_timer": a placement agent may not wait once the job is past the base policy's
    # rack timer while a placement is valid (no offer is declined forever)
    wait_limit: Literal["none", "rack_timer"] = "none"
    ppo: PPOParams = PPOParams()
    policy: PolicyParams = PolicyParams()
    warm_start: WarmStartSpec | None = None
    train: TrainSpec
    validation: ValidationSpec
    evaluation: EvalSetSpec


def _fmt_error(source: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown key (value {err.get('input')!r})")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg} (got {err.get('input')!r})")
    return f"{source}: invalid agent config:\n  " + "\n  ".join(lines)


def load_agent_config(
    spec: str | Path | dict[str, Any], split: str | Path | None = None
) -> AgentConfig:
    """A config from a mapping, a YAML path or a name in ``configs/agents`` (``placement``,
    ``delay_timer``); errors name the file and the field. ``split`` (a split name or YAML
    path), else the config's own ``split:``, replaces its scenario sets (``apply_split``)."""
    if isinstance(spec, dict):
        data, source = spec, "<agent config mapping>"
    else:
        path = Path(spec)
        if not path.suffix:
            path = CONFIG_DIR / f"{spec}.yaml"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
            raise ConfigError(f"agent config {str(spec)!r} not found (built-in: {known})")
        source = str(path)
        data = load_yaml_file(path)
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping at the top level")
    named = split if split is not None else data.get("split")
    if split is None and isinstance(named, str) and not isinstance(spec, dict):
        beside = Path(source).parent / named  # a split file next to the config
        if named.endswith((".yaml", ".yml")) and not Path(named).is_absolute() and beside.is_file():
            named = str(beside)
    if named is not None:
        if not isinstance(named, str | Path):
            raise ConfigError(f"{source}: split: expected a split name, got {named!r}")
        data = apply_split(data, named, source)
    try:
        cfg = AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_fmt_error(source, exc)) from None
    check_scenarios(cfg, source)
    check_names(cfg, source)
    return cfg


def apply_split(data: dict[str, Any], split: str | Path, source: str = "") -> dict[str, Any]:
    """An agent config mapping trained and validated on a named split: ``train.scenarios``
    become the split's train entries and ``train.seeds`` the range ``[lo, hi + 1)`` of their
    seeds (training draws every episode's seed from one range, so the train entries' seeds
    together must be one range lo-hi, holding no validation seed); ``validation`` and
    ``evaluation`` take the validation and test entries, each with its own seeds. The other
    fields (timesteps, every_steps, references) stay; ``split`` records the name."""
    from dlcluster_gym.splits import SeedSet, SplitEntry, load_split, union_seeds

    where = f"{source}: split" if source else "split"
    try:
        sp = load_split(split)
    except DLClusterError as err:
        raise ConfigError(f"{where}: {err}") from None
    train_seeds = union_seeds(sp.train)
    span = train_seeds.span()
    if span is None:
        raise ConfigError(
            f"{where}: {sp.source}: the train seeds ({train_seeds}) are not one range; "
            "training draws every episode's seed from one range [lo, hi), so give the train "
            "entries seeds that together form one range lo-hi"
        )
    lo, hi = span
    inside = union_seeds(sp.validation) & SeedSet(((lo, hi),))
    if inside:
        raise ConfigError(
            f"{where}: {sp.source}: validation seeds {inside} lie in the train seeds' range "
            f"{lo}-{hi}, from which training draws every scenario's seeds; give validation "
            "seeds outside it"
        )

    def spec(e: SplitEntry, seeds: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": e.scenario, "label": e.label}
        if e.overrides:
            out["overrides"] = e.overrides
        if e.requires_traces:
            out["requires_traces"] = True
        if seeds:
            out["seeds"] = list(e.seeds)
        return out

    def part(key: str, entries: tuple[SplitEntry, ...], seeds: Any) -> dict[str, Any]:
        given = data.get(key)
        base = dict(given) if isinstance(given, dict) else {}
        return {**base, "scenarios": [spec(e, key != "train") for e in entries], "seeds": seeds}

    return {
        **data,
        "split": sp.name if str(split) == sp.name else str(split),
        "train": part("train", sp.train, [lo, hi + 1]),
        "validation": part("validation", sp.validation, list(sp.validation[0].seeds)),
        "evaluation": part("evaluation", sp.test, list(sp.test[0].seeds)),
    }


def check_names(cfg: AgentConfig, source: str) -> None:
    """The env kwargs build the training env, and the teacher and reference policies exist
    (checked when the config loads; the error names ``source`` and the field)."""
    import importlib

    from dlcluster_gym.envs import ENVS, VERSIONS
    from dlcluster_gym.envs.policies import check_env_policy_name
    from dlcluster_gym.scheduler import resolve_policy

    from . import AGENT_KINDS

    kind = AGENT_KINDS[cfg.agent]
    module, cls = ENVS[kind].split(":")
    env_cls = getattr(importlib.import_module(module), cls)
    first = cfg.train.scenarios[0]
    scenario = deep_merge(load_scenario(first.scenario).model_dump(), first.overrides)

    def probe_env() -> None:
        with warnings.catch_warnings():  # a probe: the training envs warn if they leak
            warnings.simplefilter("ignore", DeprecationWarning)
            env_cls(scenario, **{**VERSIONS[kind][0], **cfg.env_kwargs})

    checks: list[tuple[str, Any]] = [
        ("env_kwargs", probe_env),
        ("validation.reference", lambda: resolve_policy(cfg.validation.reference)),
        ("evaluation.reference", lambda: resolve_policy(cfg.evaluation.reference)),
    ]
    ref = cfg.train.reward_reference
    if ref is not None:
        checks.append(("train.reward_reference", lambda: _check_reference(ref)))
    if cfg.warm_start is not None:
        teacher = cfg.warm_start.teacher
        checks.append(("warm_start.teacher", lambda: check_env_policy_name(kind, teacher)))
    for field, check in checks:
        try:
            check()
        except DLClusterError as err:
            raise ConfigError(f"{source}: {field}: {err}") from None


def _check_reference(name: str) -> None:
    """A reward reference is a policy that schedules (a bound has no run to follow)."""
    from dlcluster_gym.scheduler import resolve_policy

    if resolve_policy(name)[1].bound:
        raise ConfigError(f"{name!r} is a bound, not a schedule; name a policy that runs")


def check_scenarios(cfg: AgentConfig, source: str) -> None:
    """Every scenario of the train, validation and evaluation sets loads with its overrides
    (checked before any training; the error names ``source`` and the key path)."""
    for part in ("train", "validation", "evaluation"):
        for i, spec in enumerate(getattr(cfg, part).scenarios):
            where = f"{source}: {part}.scenarios.{i}"
            try:
                base = load_scenario(spec.scenario)
            except ConfigError as err:
                raise one_line_error(f"{where}.scenario", err) from None
            except DLClusterError as err:  # an unknown preset name
                raise ConfigError(f"{where}.scenario: {err}") from None
            if spec.overrides:
                try:
                    load_scenario(deep_merge(base.model_dump(), spec.overrides))
                except ConfigError as err:
                    raise one_line_error(f"{where}.overrides", err) from None


def default_config(agent: str) -> AgentConfig:
    """The built-in config of ``agent`` (``placement`` or ``delay-timer``)."""
    if agent not in DEFAULT_CONFIGS:
        raise ConfigError(f"unknown agent {agent!r}; agents: {', '.join(DEFAULT_CONFIGS)}")
    return load_agent_config(DEFAULT_CONFIGS[agent])
