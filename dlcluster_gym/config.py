"""Typed, validated, frozen configs (cluster, workload, scenario) loaded from YAML.

Presets live in ``configs/{clusters,scenarios}/NAME.yaml``; a config field may name a preset
or give the mapping inline. Errors name the file, the field, the bad value and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlcluster_gym.cluster.catalog import GPU_TYPES, INTERCONNECTS, Interconnect
from dlcluster_gym.errors import ConfigError, DLClusterError, UnknownNameError

# The file helpers live in the leaf module ``files``; they stay importable from here.
from dlcluster_gym.files import MAX_CONFIG_BYTES as MAX_CONFIG_BYTES
from dlcluster_gym.files import MAX_CONFIG_VALUES as MAX_CONFIG_VALUES
from dlcluster_gym.files import PACKAGED_CONFIGS as PACKAGED_CONFIGS
from dlcluster_gym.files import REPO_CONFIGS as REPO_CONFIGS
from dlcluster_gym.files import RefusedYAMLError as RefusedYAMLError
from dlcluster_gym.files import configs_dir as configs_dir
from dlcluster_gym.files import load_yaml_file as load_yaml_file
from dlcluster_gym.files import read_yaml as read_yaml
from dlcluster_gym.files import safe_load as safe_load
from dlcluster_gym.files import yaml_problem as yaml_problem
from dlcluster_gym.workload.groups import (
    DEFAULT_HABIT,
    DEFAULT_P_NEW_GROUP,
    DEFAULT_R_GROUP,
    DEFAULT_USERS_PER_VC,
    PHILLY_R_VC,
    PHILLY_VC_SHARES,
)
from dlcluster_gym.workload.traces import TraceFormat


def _integer(v: Any) -> Any:
    """An integer field takes integers only: not ``true`` (the number 1 to Python), ``2.0`` or
    the text ``"2"`` (a fraction such as ``1.5`` goes on to pydantic's own message)."""
    if isinstance(v, bool):
        raise ValueError("expected an integer, not a boolean")
    if isinstance(v, float) and v.is_integer():
        raise ValueError(f"expected an integer, not the decimal number {v!r}")
    if isinstance(v, str):
        raise ValueError("expected an integer, not text")
    return v


def _not_bool(v: Any) -> Any:
    """A number field does not take ``true``/``false`` (1 and 0 to Python)."""
    if isinstance(v, bool):
        raise ValueError("expected a number, not a boolean")
    return v


# Strict scalar types of every config model: an integer field takes integers, a boolean field
# ``true``/``false``, a number field numbers (integers included), never a boolean.
Int = Annotated[int, BeforeValidator(_integer)]
Bool = Annotated[bool, Field(strict=True)]
Float = Annotated[float, BeforeValidator(_not_bool), Field(allow_inf_nan=False)]
PositiveInt = Annotated[Int, Field(gt=0)]
NonNegInt = Annotated[Int, Field(ge=0)]
NonNegFloat = Annotated[Float, Field(ge=0)]
PositiveFloat = Annotated[Float, Field(gt=0)]


# --------------------------------------------------------------------------- size limits
# The largest run a config may ask for: far above every shipped scenario (the largest cluster
# has 1,280 GPUs; the largest trace ~100k jobs) and small enough that a typo (``racks:
# 1000000000``) is a clear error at load instead of a machine running out of memory. Building
# a 32,000-machine cluster takes ~0.2 s; the engine's cost grows with jobs x decisions.
MAX_MACHINES = 100_000
MAX_GPUS = 1_000_000
MAX_JOBS = 2_000_000  # synthetic num_jobs and max_jobs; trace loaders check the same bound
MAX_LOAD = 10.0  # offered load (1 = every GPU busy on average); above it, queues only grow
MAX_NICS = 1_000_000  # NICs over the whole cluster (each is a link the network model tracks)
MAX_GPU_DEMAND = MAX_GPUS  # a job's GPU count (no cluster has more); trace loaders check it too
# A synthetic job's iterations: a billion iterations of 0.1 s is three years of training.
MAX_ITERATIONS = 1_000_000_000
# The shortest scheduling round: every round is an event, so a period of a millisecond over a
# week of simulated time is 600 million events. Policies decide in rounds of minutes (Gavel
# and Crius 5 minutes, Tiresias and Gandiva their own timers); 1 s is far below any of them.
MIN_ROUND_PERIOD_S = 1.0

MAX_SEED = 2**63 - 1  # seeds are stored as int64 (results tables, Parquet, numpy arrays)

JobCount = Annotated[Int, Field(gt=0, le=MAX_JOBS)]
GPUDemand = Annotated[Int, Field(gt=0, le=MAX_GPU_DEMAND)]
Iterations = Annotated[Int, Field(gt=0, le=MAX_ITERATIONS)]
Seed = Annotated[Int, Field(ge=0, le=MAX_SEED)]
Load = Annotated[Float, Field(gt=0, le=MAX_LOAD)]


def _window(v: Any) -> Any:
    """A time window ``[start, end)`` with start < end."""
    if v is not None and not v[0] < v[1]:
        raise ValueError(f"time_window_s must be [start, end) with start < end, got {list(v)}")
    return v


def _weights_match(values: tuple, weights: tuple | None, what: str, of: str) -> None:
    if weights is not None and len(weights) != len(values):
        raise ValueError(
            f"{what} has {len(weights)} entries for {len(values)} {of}; give one weight per "
            f"entry of {of}"
        )


def _known_models(names: Any) -> Any:
    """Check a tuple of model-zoo names (``workload.models``) when the config loads."""
    if isinstance(names, tuple):
        from dlcluster_gym.workload.models import get_model

        for name in names:
            try:
                get_model(name)
            except UnknownNameError as exc:
                raise ValueError(str(exc)) from None
    return names


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- cluster


class LinkSpec(_Frozen):
    """A tier's link: a catalog preset name, or explicit bandwidth and latency."""

    preset: str | None = None
    bandwidth_gbps: PositiveFloat | None = None
    latency_us: NonNegFloat | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        return {"preset": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> LinkSpec:
        if self.preset is not None and self.preset not in INTERCONNECTS:
            raise ValueError(
                f"unknown interconnect {self.preset!r}; known: {', '.join(sorted(INTERCONNECTS))}"
            )
        if self.preset is None and (self.bandwidth_gbps is None or self.latency_us is None):
            raise ValueError(
                "give an interconnect preset name, or both bandwidth_gbps and latency_us"
            )
        return self

    def resolve(self) -> Interconnect:
        """The interconnect with any explicit overrides applied."""
        base = INTERCONNECTS[self.preset] if self.preset else None
        bw = self.bandwidth_gbps if self.bandwidth_gbps is not None else base.bandwidth_gbps
        lat = self.latency_us if self.latency_us is not None else base.latency_s * 1e6
        return Interconnect(
            name=self.preset or "custom",
            bandwidth_Bps=bw * 1e9 / 8.0,
            latency_s=lat * 1e-6,
            description=base.description if base else "custom link",
        )


class MachineGroup(_Frozen):
    """Racks of identical machines. A cluster is one or more groups, racks numbered in order."""

    name: str = "default"
    racks: PositiveInt
    machines_per_rack: PositiveInt
    gpus_per_machine: NonNegInt  # 0: a CPU-only server (PS jobs, Nearchus)
    gpu_type: str = "A100"
    cpus_per_machine: PositiveInt = 64  # physical cores (the MU bottleneck depends on it)
    memory_gb_per_machine: PositiveFloat = 512.0
    # vCPUs a scheduler may hand out (Kubernetes "allocatable"); default: all cores.
    allocatable_cpus_per_machine: PositiveFloat | None = None
    # NICs of each machine (``perf.network``). Default: one NIC per GPU at the rack tier's
    # bandwidth (DGX-style, Dally 5.1.2); ``nic_gbps`` alone means one NIC of that speed (a
    # server NIC, as on the Nearchus and Crius clusters); ``nics_per_machine`` NICs of
    # ``nic_gbps`` each (default the rack tier's bandwidth) shared evenly by the GPUs unless
    # ``nic_gpus`` lists the local GPU indices of each NIC.
    nic_gbps: PositiveFloat | None = None
    nics_per_machine: PositiveInt | None = None
    nic_gpus: tuple[tuple[NonNegInt, ...], ...] | None = None
    machine_link: LinkSpec | None = None  # overrides the cluster's `tiers.machine` for the group

    @model_validator(mode="after")
    def _check_nics(self) -> MachineGroup:
        g, n = self.gpus_per_machine, self.nics_per_machine
        if n is not None and g > 0 and n > g:
            raise ValueError(
                f"{self._where()}nics_per_machine={n} is more than gpus_per_machine={g}; "
                "a NIC must serve at least one GPU (allowed: 1.."
                f"{g})"
            )
        if self.nic_gpus is not None:
            if g == 0:
                raise ValueError(f"{self._where()}nic_gpus needs GPUs on the machine")
            count = n if n is not None else len(self.nic_gpus)
            flat = sorted(i for nic in self.nic_gpus for i in nic)
            if len(self.nic_gpus) != count or flat != list(range(g)) or not all(self.nic_gpus):
                raise ValueError(
                    f"{self._where()}nic_gpus={[list(x) for x in self.nic_gpus]} must "
                    f"list {count} non-empty NICs that together hold each local GPU "
                    f"0..{g - 1} exactly once"
                )
        return self

    def _where(self) -> str:
        """Error prefix naming the group (none for the short form's implicit 'default')."""
        return "" if self.name == "default" else f"group {self.name!r}: "

    def num_nics(self, default_count: int) -> int:
        """NICs per machine (``default_count``: the cluster-level rule for unset fields)."""
        if self.nics_per_machine is not None:
            return self.nics_per_machine
        if self.nic_gpus is not None:
            return len(self.nic_gpus)
        if self.nic_gbps is not None or self.gpus_per_machine == 0:
            return 1
        return default_count

    def gpu_nic(self, num_nics: int) -> tuple[int, ...]:
        """Local NIC index of each local GPU (``nic_gpus``, else evenly in GPU order)."""
        g = self.gpus_per_machine
        if self.nic_gpus is not None:
            out = [0] * g
            for k, nic in enumerate(self.nic_gpus):
                for i in nic:
                    out[i] = k
            return tuple(out)
        return tuple(i * num_nics // g for i in range(g)) if g else ()

    @field_validator("gpu_type")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPU_TYPES:
            raise ValueError(f"unknown GPU type {v!r}; known: {', '.join(sorted(GPU_TYPES))}")
        return v


class Tiers(_Frozen):
    """Links per tier: inside a machine, between machines of a rack, between racks."""

    machine: LinkSpec = LinkSpec(preset="nvswitch")
    rack: LinkSpec = LinkSpec(preset="ib-quantum")
    network: LinkSpec = LinkSpec(preset="spectrum-eth")


class ClusterConfig(_Frozen):
    """A hierarchical cluster: GPU -> machine -> rack -> spine."""

    name: str = "custom"
    description: str = ""
    groups: tuple[MachineGroup, ...]
    tiers: Tiers = Tiers()
    # ToR uplink: the rack's NIC capacity / this ratio (per rail switch with rail_optimized).
    rack_uplink_oversubscription: Annotated[Float, Field(ge=1.0)] = 1.0
    # Spine: the summed ToR uplink capacity / this ratio, one link all cross-rack flows share.
    spine_oversubscription: Annotated[Float, Field(ge=1.0)] = 1.0
    # NIC i of every machine in a rack on rail switch i (needs equal NIC counts everywhere).
    rail_optimized: Bool = False
    # Legacy short form: one NIC of this speed per machine (for groups without NIC fields).
    machine_uplink_gbps: PositiveFloat | None = None
    # "hierarchical": ring in the machine, then halving/doubling across machines and racks;
    # "flat-ring": one ring over all GPUs in which every GPU's flow leaves through its NIC
    # (ranks that do not share memory, e.g. one container per GPU over TCP sockets).
    collective: Literal["hierarchical", "flat-ring"] = "hierarchical"
    # Fraction of a NIC's line rate a collective reaches (transport and protocol overheads).
    transport_efficiency: Annotated[Float, Field(gt=0.0, le=1.0)] = 1.0

    @model_validator(mode="after")
    def _check_network(self) -> ClusterConfig:
        if not self.groups:
            raise ValueError("groups is empty: give at least one machine group")
        names = [g.name for g in self.groups]
        twice = [n for n in dict.fromkeys(names) if names.count(n) > 1]
        if twice:
            raise ValueError(f"group name {twice[0]!r} appears twice; give each group its own name")
        if self.machine_uplink_gbps is not None:
            for g in self.groups:
                if g.nic_gbps is not None or g.nics_per_machine is not None or g.nic_gpus:
                    raise ValueError(
                        f"machine_uplink_gbps={self.machine_uplink_gbps:g} and the NIC fields"
                        f"{f' of group {g.name!r}' if g.name != 'default' else ''} (nic_gbps, "
                        "nics_per_machine, nic_gpus) both set the NICs; give one of them"
                    )
        if self.rail_optimized:
            counts = {g.name: g.num_nics(g.gpus_per_machine) for g in self.groups}
            if self.machine_uplink_gbps is not None:
                counts = dict.fromkeys(counts, 1)
            if len(set(counts.values())) > 1:
                raise ValueError(
                    "rail_optimized needs the same number of NICs on every machine; got "
                    + ", ".join(f"{k}: {v}" for k, v in counts.items())
                )
        return self

    @model_validator(mode="before")
    @classmethod
    def _single_group(cls, v: Any) -> Any:
        """Accept the homogeneous short form (racks, machines_per_rack, ... at top level)."""
        if not isinstance(v, dict):
            return v
        keys = set(MachineGroup.model_fields) - {"name"}
        flat = {k: v[k] for k in list(v) if k in keys}
        if flat:
            if "groups" in v:
                raise ValueError(
                    f"give either `groups` or the homogeneous fields ({', '.join(sorted(flat))}),"
                    " not both"
                )
            v = {k: x for k, x in v.items() if k not in flat}
            v["groups"] = [flat]
        return v

    @model_validator(mode="after")
    def _bounded(self) -> ClusterConfig:
        if self.num_machines > MAX_MACHINES:
            raise ValueError(
                f"{self.num_machines:,} machines is more than the limit of {MAX_MACHINES:,} "
                "(racks x machines_per_rack, summed over groups)"
            )
        if self.num_gpus > MAX_GPUS:
            raise ValueError(f"{self.num_gpus:,} GPUs is more than the limit of {MAX_GPUS:,}")
        if self.num_nics > MAX_NICS:
            raise ValueError(
                f"{self.num_nics:,} NICs is more than the limit of {MAX_NICS:,} (machines x "
                "nics_per_machine, summed over groups)"
            )
        return self

    @property
    def num_nics(self) -> int:
        """NICs over the cluster (one per machine with ``machine_uplink_gbps``)."""
        if self.machine_uplink_gbps is not None:
            return self.num_machines
        return sum(
            g.racks * g.machines_per_rack * g.num_nics(g.gpus_per_machine) for g in self.groups
        )

    @property
    def num_racks(self) -> int:
        return sum(g.racks for g in self.groups)

    @property
    def num_machines(self) -> int:
        return sum(g.racks * g.machines_per_rack for g in self.groups)

    @property
    def num_gpus(self) -> int:
        return sum(g.racks * g.machines_per_rack * g.gpus_per_machine for g in self.groups)


# --------------------------------------------------------------------------- workload


class _WorkloadBase(_Frozen):
    max_jobs: JobCount | None = None  # keep only the first N jobs (by arrival)


MAX_VCS = 1_000  # virtual clusters of a ``groups`` workload (each job costs one Phi per VC)
MAX_USERS_PER_VC = 100_000
Fraction = Annotated[Float, Field(ge=0.0, le=1.0)]


class WorkloadGroups(_Frozen):
    """Virtual clusters and recurring job groups of a synthetic workload, whose durations
    carry their signal (``workload.groups``: a Gaussian copula that keeps the generator's
    duration distribution). Defaults: the VC shares and ``r_vc`` fitted to Philly
    (``experiments/workloads/fit_philly_groups.py``); the rest are modelling choices, not fits."""

    # VCs: ``vc_weights`` (job shares, one per VC); default Philly's fitted shares, or equal
    # shares over ``num_vcs`` VCs when only ``num_vcs`` is given.
    num_vcs: Annotated[Int, Field(gt=0, le=MAX_VCS)] | None = None
    vc_weights: tuple[PositiveFloat, ...] | None = None
    # Shares of the latent (normal-score) duration variance the VC and the group explain.
    r_vc: Annotated[Float, Field(ge=0.0, lt=1.0)] = PHILLY_R_VC
    r_group: Annotated[Float, Field(ge=0.0, lt=1.0)] = DEFAULT_R_GROUP
    # A job starts a new recurring group of its VC with this probability, else it joins the
    # group of an earlier job of its VC drawn uniformly (groups grow with their size).
    p_new_group: Annotated[Float, Field(gt=0.0, le=1.0)] = DEFAULT_P_NEW_GROUP
    users_per_vc: Annotated[Int, Field(gt=0, le=MAX_USERS_PER_VC)] = DEFAULT_USERS_PER_VC
    # Probability that a job reuses its group's model and GPU demand.
    habit: Fraction = DEFAULT_HABIT

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadGroups:
        if self.vc_weights is not None:
            if not self.vc_weights:
                raise ValueError("vc_weights must not be empty: give one job share per VC")
            if len(self.vc_weights) > MAX_VCS:
                raise ValueError(
                    f"vc_weights has {len(self.vc_weights)} VCs, more than the limit of {MAX_VCS}"
                )
            if self.num_vcs is not None and self.num_vcs != len(self.vc_weights):
                raise ValueError(
                    f"num_vcs={self.num_vcs} but vc_weights has {len(self.vc_weights)} entries; "
                    "give one weight per VC, or only one of the two"
                )
        if self.r_vc + self.r_group >= 1.0:
            raise ValueError(
                f"r_vc + r_group must be < 1 (a job's own noise keeps some variance), got "
                f"r_vc={self.r_vc:g} + r_group={self.r_group:g} = {self.r_vc + self.r_group:g}"
            )
        return self

    @property
    def weights(self) -> tuple[float, ...]:
        """The job share of each VC (need not sum to 1)."""
        if self.vc_weights is not None:
            return self.vc_weights
        if self.num_vcs is not None:
            return (1.0,) * self.num_vcs
        return PHILLY_VC_SHARES


class DallyWorkload(_WorkloadBase):
    """Synthetic jobs over the six Dally Table 1 models, fitted to public traces."""

    kind: Literal["dally"]
    num_jobs: JobCount
    arrival: Literal["batch", "poisson"] = "batch"
    load: Load | None = 0.9  # offered load for Poisson arrivals (fraction of GPUs)
    rate_per_hour: PositiveFloat | None = None  # explicit Poisson rate (overrides load)
    # VCs and recurring groups whose durations carry signal (None: no VCs, as before).
    groups: WorkloadGroups | None = None


class SyntheticWorkload(_WorkloadBase):
    """Generic synthetic jobs: chosen models, GPU demands and iteration counts."""

    kind: Literal["synthetic"]
    num_jobs: JobCount
    arrival: Literal["batch", "poisson"] = "poisson"
    load: Load | None = 0.9
    rate_per_hour: PositiveFloat | None = None
    models: tuple[str, ...] = ("resnet50",)
    gpu_demands: tuple[GPUDemand, ...] = (1, 2, 4, 8)
    gpu_demand_weights: tuple[PositiveFloat, ...] | None = None
    iterations: tuple[Iterations, Iterations] = (1000, 10000)  # uniform [lo, hi]
    # Durations instead of iterations (when given, ``iterations`` is not used): bands [lo, hi,
    # weight] of log10(minutes); a band is drawn by weight, then x uniform in it, and the job
    # runs 10^x minutes at packed consolidation on the reference GPU type (Gavel's generator).
    log10_duration_min: tuple[tuple[Float, Float, PositiveFloat], ...] | None = None
    # VCs and recurring groups whose durations (or iterations) carry signal (None: no VCs).
    groups: WorkloadGroups | None = None

    _models = field_validator("models")(_known_models)

    @model_validator(mode="after")
    def _consistent(self) -> SyntheticWorkload:
        if self.log10_duration_min is not None:
            if not self.log10_duration_min:
                raise ValueError("log10_duration_min must not be empty: give [lo, hi, weight]")
            for band in self.log10_duration_min:
                if not (-3.0 <= band[0] <= band[1] <= 6.0):
                    raise ValueError(
                        "log10_duration_min bands must be [lo, hi, weight] with "
                        f"-3 <= lo <= hi <= 6 (log10 of minutes), got {list(band)}"
                    )
        if not self.models:
            raise ValueError("models must not be empty: name at least one zoo model")
        if not self.gpu_demands:
            raise ValueError("gpu_demands must not be empty: give at least one GPU count")
        _weights_match(self.gpu_demands, self.gpu_demand_weights, "gpu_demand_weights",
                       "gpu_demands")  # fmt: skip
        lo, hi = self.iterations
        if lo > hi:
            raise ValueError(f"iterations must be [lo, hi] with lo <= hi, got [{lo}, {hi}]")
        return self


class TraceWorkload(_WorkloadBase):
    """Jobs read from a trace file under the trace root."""

    kind: Literal["trace"]
    format: TraceFormat
    path: str  # relative to the trace root (or absolute)
    # "dally": uniform over the six Dally models; "pollux": Pollux's GPU-time classes;
    # "trace": the trace's model names; a list: uniform over those zoo names.
    models: Literal["dally", "trace", "pollux"] | tuple[str, ...] = "dally"
    columns: dict[str, str] | None = None  # generic format: our field -> the file's column
    task_path: str | None = None  # alibaba-pai: the task table (default: beside the job table)
    on_error: Literal["fail", "skip"] = "fail"  # malformed rows: raise, or skip and count
    # Jobs wanting more GPUs than the cluster has: keep (the engine's oversize_jobs applies),
    # cap them at the cluster size, or filter them out at load.
    gpu_demand: Literal["keep", "cap", "filter"] = "keep"
    target_load: Load | None = None  # rescale arrivals to this offered load
    # How durations become iterations: the duration is the run time at this consolidation.
    duration_tier: Literal["machine", "rack", "network"] = "machine"
    time_window_s: tuple[NonNegFloat, NonNegFloat] | None = None
    # "trace": use the trace's iteration counts when it has them; "duration": always derive
    # iterations from the duration (use it when models are reassigned, e.g. models: dally).
    iterations_from: Literal["trace", "duration"] = "trace"
    # generic format: seconds per unit of the file's numbers; time_unit_s sets both,
    # arrival_unit_s (arrival and end) and duration_unit_s override it per column.
    time_unit_s: PositiveFloat | None = None
    arrival_unit_s: PositiveFloat | None = None
    duration_unit_s: PositiveFloat | None = None

    _models = field_validator("models")(_known_models)

    @model_validator(mode="after")
    def _generic_only(self) -> TraceWorkload:
        given = [
            k
            for k in ("columns", "time_unit_s", "arrival_unit_s", "duration_unit_s")
            if getattr(self, k) is not None
        ]
        if given and self.format != "generic":
            raise ValueError(f"{given[0]} applies to format 'generic' only, not {self.format!r}")
        if self.task_path is not None and self.format != "alibaba-pai":
            raise ValueError(f"task_path applies to format 'alibaba-pai' only, not {self.format!r}")
        _window(self.time_window_s)
        return self


class PSWorkload(_WorkloadBase):
    """Parameter-server jobs on CPUs (Nearchus V-B): ``num_jobs`` drawn uniformly from the pool
    models x variants, each variant an (epochs, vCPU budget) pair; see ``workload.ps``."""

    kind: Literal["ps"]
    num_jobs: JobCount
    arrival: Literal["batch", "poisson"] = "poisson"
    rate_per_hour: PositiveFloat = 1.0
    models: tuple[str, ...] = (
        "mobilenet", "densenet201", "nasnetlarge", "resnet50", "inception-v3",
    )  # fmt: skip
    variants: tuple[tuple[PositiveFloat, PositiveFloat], ...] | None = None  # None: PS_VARIANTS

    @field_validator("models")
    @classmethod
    def _some_models(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        # the names are checked when the jobs are made (``workload.ps`` imports this module)
        if not names:
            raise ValueError("models must not be empty: name at least one PS model")
        return names

    @field_validator("variants")
    @classmethod
    def _some_variants(cls, v: tuple | None) -> tuple | None:
        if v is not None and not v:
            raise ValueError("variants must not be empty (leave it out for the defaults)")
        return v


class CriusWorkload(_WorkloadBase):
    """Large-model jobs as in Crius 8.1: arrivals and durations from a trace window; model,
    size, global batch, GPU amount and GPU type drawn at random (``scenario.crius``)."""

    kind: Literal["crius"]
    format: TraceFormat = "philly"  # a format ``workload.traces.load_trace`` reads
    path: str  # relative to the trace root (or absolute)
    time_window_s: tuple[NonNegFloat, NonNegFloat] | None = None
    # Crius Table 2 model names (``workload.large_models``); None: all 14 sizes, weighted
    # towards small sizes (``workload.crius.DEFAULT_SIZE_WEIGHTS``).
    models: tuple[str, ...] | None = None
    model_weights: tuple[PositiveFloat, ...] | None = None
    gpu_demands: tuple[GPUDemand, ...] = (1, 2, 4, 8, 16)
    gpu_demand_weights: tuple[PositiveFloat, ...] | None = None
    # Trace durations are capped at max_duration_s, then scaled so that the offered load
    # (GPU-seconds at the requested allocation / cluster GPU-seconds over the window) is
    # target_load; None keeps them.
    max_duration_s: PositiveFloat | None = None
    target_load: Load | None = None

    @model_validator(mode="after")
    def _consistent(self) -> CriusWorkload:
        from dlcluster_gym.workload.large_models import parse_large_model

        if self.models is not None:
            if not self.models:
                raise ValueError("models must not be empty (leave it out for all 14 sizes)")
            for name in self.models:
                try:
                    parse_large_model(name)
                except UnknownNameError as exc:
                    raise ValueError(f"models: {exc}") from None
            _weights_match(self.models, self.model_weights, "model_weights", "models")
        elif self.model_weights is not None:
            raise ValueError("model_weights needs models: one weight per model named there")
        if not self.gpu_demands:
            raise ValueError("gpu_demands must not be empty: give at least one GPU count")
        _weights_match(self.gpu_demands, self.gpu_demand_weights, "gpu_demand_weights",
                       "gpu_demands")  # fmt: skip
        _window(self.time_window_s)
        return self


WorkloadConfig = Annotated[
    DallyWorkload | SyntheticWorkload | TraceWorkload | PSWorkload | CriusWorkload,
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- scenario


class Overheads(_Frozen):
    """Modeled overheads (seconds) of preemption, migration and resizing."""

    checkpoint_s: NonNegFloat = 10.0
    restore_s: NonNegFloat = 20.0
    restart_s: NonNegFloat = 30.0


class ScenarioConfig(_Frozen):
    """A cluster, a workload and the engine settings: everything a run needs besides a policy."""

    name: str = "custom"
    description: str = ""
    cluster: ClusterConfig
    workload: WorkloadConfig
    seed: Seed = 1
    # Periodic scheduling rounds, at least MIN_ROUND_PERIOD_S apart (None: events only).
    round_period_s: Annotated[Float, Field(ge=MIN_ROUND_PERIOD_S)] | None = None
    oversize_jobs: Literal["reject", "drop"] = "drop"
    overheads: Overheads = Overheads()
    # Link sharing between jobs (max-min fair, ``perf.network``): on unless a scenario turns
    # it off.
    contention: Bool = True
    # "model": the network model; "ideal": no communication cost at all (cross-checks against
    # simulators without a topology).
    network: Literal["model", "ideal"] = "model"
    # Where model performance profiles come from (``workload.profiles``): "physics" (gradient
    # bytes and compute time, no per-model fudge factor), "dally-table1" (Dally Table 1's
    # per-tier calibration, for the Dally reproduction presets), "cassini-testbed", and the
    # named variant "physics-ddp" (physics + DDP backward overlap, ``workload.profiles``).
    profile: Literal["physics", "physics-ddp", "dally-table1", "cassini-testbed"] = "physics"
    max_sim_time_s: PositiveFloat = 100 * 365 * 86400.0  # safety net against runaway policies

    @model_validator(mode="after")
    def _gpus_for_gpu_jobs(self) -> ScenarioConfig:
        if self.workload.kind != "ps" and self.cluster.num_gpus == 0:
            raise ValueError(
                f"workload kind {self.workload.kind!r} runs on GPUs but cluster "
                f"{self.cluster.name!r} has none (gpus_per_machine: 0 in every group); use a "
                "cluster with GPUs, or a ps workload for CPU-only servers"
            )
        return self


# --------------------------------------------------------------------------- loading


def list_presets(kind: str) -> dict[str, str]:
    """Preset name -> one-line description for ``kind`` in {clusters, scenarios, ...}."""
    out: dict[str, str] = {}
    for path in sorted((configs_dir() / kind).glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            data = {}
        out[path.stem] = str(data.get("description", "")).strip().splitlines()[0:1]
        out[path.stem] = out[path.stem][0] if out[path.stem] else ""
    return out


def _format_validation(source: str, exc: ValidationError, flat: bool = False) -> ConfigError:
    """One line per problem: where (dotted path), what, and the value given. A mapping-valued
    input (a whole-section check) is not echoed; with ``flat`` (a cluster in the homogeneous
    short form), the implicit ``groups.0`` the user never wrote is left out of the path."""
    lines = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"]]
        if flat and "groups" in parts and parts[parts.index("groups") + 1 :][:1] == ["0"]:
            i = parts.index("groups")
            parts = parts[:i] + parts[i + 2 :] or ["cluster"]
        loc = ".".join(parts) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        got = "" if isinstance(value, dict) else f" (got {repr(value)[:80]})"
        lines.append(f"  {loc}: {msg}{got}")
    return ConfigError(f"{source}: invalid config:\n" + "\n".join(lines))


def _is_flat_cluster(data: Any) -> bool:
    """True for a cluster mapping in the homogeneous short form (no ``groups``)."""
    return isinstance(data, dict) and "groups" not in data


def _preset_path(kind: str, name: str) -> Path:
    path = configs_dir() / kind / f"{name}.yaml"
    if not path.is_file():
        raise UnknownNameError(kind.rstrip("s"), name, list_presets(kind))
    return path


def _resolve_refs(data: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """Replace `cluster: NAME` by the preset's mapping, or `cluster: FILE.yaml` by the file's
    (a relative path is taken relative to the scenario file's folder, else the current one)."""
    cluster = data.get("cluster")
    if isinstance(cluster, str):
        data = dict(data)
        if cluster.endswith((".yaml", ".yml")):
            path = Path(cluster)
            if not path.is_absolute() and base is not None and (base / path).is_file():
                path = base / path
            if not path.is_file():
                raise ConfigError(f"cluster: file {cluster!r} not found")
            cfg = read_yaml(path)
            cfg.setdefault("name", path.stem)
            _validate(ClusterConfig, cfg, str(path))  # errors name the cluster's own file
            data["cluster"] = cfg
        else:
            data["cluster"] = read_yaml(_preset_path("clusters", cluster))
    return data


def _validate(model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        cluster = data if model is ClusterConfig else data.get("cluster")
        raise _format_validation(source, exc, _is_flat_cluster(cluster)) from None


def load_cluster(spec: str | Path | dict[str, Any] | ClusterConfig) -> ClusterConfig:
    """A cluster config from a preset name, a YAML path, a mapping or an existing config."""
    if isinstance(spec, ClusterConfig):
        return spec
    if isinstance(spec, dict):
        return _validate(ClusterConfig, spec, "<cluster mapping>")
    path = Path(spec) if str(spec).endswith((".yaml", ".yml")) else _preset_path("clusters", spec)
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    return _validate(ClusterConfig, data, str(path))


def merge_overrides(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: the one rule of scenario overrides, used by
    :func:`load_scenario`'s keyword overrides, the environments' ``scenario_overrides`` and the
    overrides of scenario entries in agent configs and splits.

    A mapping in ``over`` merges into the mapping it overrides, key by key and at every depth,
    unless it names a ``kind`` (a workload's kind decides which fields it has): then it
    replaces that mapping whole, so that ``{"workload": {"kind": "trace", ...}}`` switches a
    synthetic workload to a trace without keeping fields the trace does not have. Any other
    value (a number, a list, a preset name) replaces what was there. ``base`` is not changed.
    """
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping) and "kind" not in value:
            out[key] = merge_overrides(old, value)
        else:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def load_scenario(
    spec: str | Path | dict[str, Any] | ScenarioConfig, **overrides: Any
) -> ScenarioConfig:
    """A scenario from a preset name, a YAML path, a mapping or a config, with ``overrides``
    (top-level fields, merged as :func:`merge_overrides` says; a None leaves a field as it is):
    ``load_scenario("dally-poisson-2rack", workload={"num_jobs": 40}, seed=3)``."""
    base = None
    if isinstance(spec, ScenarioConfig):
        data, source = spec.model_dump(), f"scenario {spec.name}"
    elif isinstance(spec, dict):
        data, source = dict(spec), "<scenario mapping>"
    else:
        is_file = str(spec).endswith((".yaml", ".yml"))
        path = Path(spec) if is_file else _preset_path("scenarios", str(spec))
        data, source, base = read_yaml(path), str(path), path.parent
        data.setdefault("name", path.stem)
    try:
        data = _resolve_refs(data, base)
    except DLClusterError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        try:  # an override may name a cluster preset or file, or change a referenced cluster
            data = _resolve_refs(merge_overrides(data, given), None)
        except DLClusterError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return _validate(ScenarioConfig, data, source)


def check_finite(name: str, value: float) -> float:
    """Raise a clear error for NaN/inf/negative times."""
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a finite non-negative number, got {value!r}")
    return value
