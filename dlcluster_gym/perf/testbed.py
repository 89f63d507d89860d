"""Communication profiles of the Cassini / HotNets'22 testbed, and a fluid model of a shared link.

The testbed of Cassini (thesis 4.1.1, 4.5.1, ``shared/papers/cassini-mltcp-thesis.txt``) and of
HotNets'22 (section 2, ``shared/papers/hotnets22-congestion-control-ml-clusters.txt``): one
A100 GPU and one 50 Gb/s ConnectX-5 RDMA NIC per server, a 2:1 over-subscribed two-tier
topology, DCQCN congestion control. The link two jobs share in every experiment we reproduce is
one 50 Gb/s link. :func:`testbed_profile` gives the per-iteration network demand of each
Cassini Table 4.2 model as it would be profiled in isolation on that testbed
(:class:`~dlcluster_gym.perf.geometry.CommProfile`), for ``geometry.link_compatibility``.

**Units.** Profiles are in seconds, and demands are *fractions of the link* the job shares: a
job that sends at ``g`` Gb/s during an Up phase has demand ``g / link_gbps``, so the capacity
to pass to ``perf.geometry`` is ``1.0``. The table below is in ms and Gb/s; the Gb/s are the
rates on the testbed and do not change with ``link_gbps`` (a faster link does not make the
backward pass inside an Up phase faster). A job whose peak rate is above ``link_gbps`` would
congest the link on its own, which an isolated profile cannot do:
:func:`testbed_profile` raises :class:`~dlcluster_gym.errors.ConfigError`.

**Phases.** Data-parallel models (4.2, HotNets section 2) have one Down phase (the forward pass,
zero demand) followed by one Up phase (backward pass and all-reduce together, HotNets: "we
refer to the backpropagation and allreduce phases together as the communication phase").
Model-parallel models (GPT-1/2/3 and DLRM, Table 4.2) have several Up and Down phases per
iteration (Fig. 4.1(b)-(d), 4.3.3), given as back-to-back ``(duration, rate)`` segments.

**Batch scaling.** ``batch_per_gpu`` scales every Down (compute) segment linearly from the
reference batch: ``down(b) = down(b_ref) * b / b_ref``. Up segments keep their duration and rate:
the bytes a job sends per iteration (gradients, activations of a fixed pipeline cut) do not
depend on the batch. Batches outside the documented range of a model raise ``ConfigError``.

**Constants** live in ``configs/profiles/cassini-testbed.yaml`` (read by
``workload.testbed_profiles``): per model the reference batch, the batch range (Table 4.2's,
widened where a paper's own experiment used a batch outside it) and the segments, with what is
a paper number ("measured") and what we derived and why. The model-parallel periods (400 ms
for GPT-1/2, 1000 ms for GPT-3 and DLRM) and phase positions were chosen so that the pairs
thesis 4.5.4 calls compatible (GPT-1 + GPT-2, GPT-3 + DLRM) score 1.0 and the pairs it calls
incompatible (GPT-3 + GPT-2, GPT-1 + DLRM) score below 0.95, at the reference batches
(``tests/test_compat.py``). The model names are the model zoo's (``workload.models``); ``gpt2``
means Cassini's model-parallel GPT-2, the zoo's ``gpt2-medium``, and ``wideresnet``/``wrn``
mean ``wide-resnet101``. The engine runs the same numbers through its own network model
(profile source ``cassini-testbed``, ``workload.profiles.testbed_model_profile``).

**Shared-link fluid model** (:func:`shared_link_iteration_times`), for the fair-sharing
iteration times of HotNets Table 1: the jobs start together (HotNets: "start simultaneously"),
each segment of a job runs in turn, Down segments take their duration, Up segments carry their
bytes (duration x rate) at the rate the link gives them, never above their own rate. The link
is shared by weighted max-min (water-filling with each job capped at its rate); equal weights
are DCQCN's fair sharing, HotNets' unfair runs use weights that double per rank of
aggressiveness (Fig. 1: 30 vs 15 Gb/s). Rates are piecewise constant between events, so the
simulation is exact for the model. Unlike ``perf.contention``'s one-pass stretch, this model
lets contention move the phases (HotNets Fig. 2's sliding) and is used only for reproductions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.perf.contention import SharedLinks, link_stretch, profile_phases
from dlcluster_gym.perf.geometry import CommProfile, link_compatibility
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.workload.models import get_model
from dlcluster_gym.workload.profiles import model_profile, testbed_model_profile
from dlcluster_gym.workload.testbed_profiles import FlowRate, ProfiledModel, testbed_table

__all__ = [
    "CASSINI_TABLE_4_3",
    "HOTNETS_TABLE_1",
    "TESTBED_LINK_GBPS",
    "TESTBED_OVERSUBSCRIPTION",
    "HotNetsGroup",
    "JobSpec",
    "ProfiledModel",
    "Snapshot",
    "get_profiled_model",
    "hotnets_engine_ms",
    "job_keys",
    "link_report",
    "parse_job_specs",
    "shared_link_iteration_times",
    "testbed_models",
    "testbed_overheads",
    "testbed_profile",
]

TESTBED_LINK_GBPS = 50.0
"""NIC and link speed of the Cassini / HotNets testbed (thesis 4.5.1, HotNets section 2)."""
TESTBED_OVERSUBSCRIPTION = 2.0
"""The testbed's 2:1 over-subscribed topology (thesis 4.5.1); why cross-rack links are shared."""

_LINK, _MODELS = testbed_table()
if _LINK != TESTBED_LINK_GBPS:
    raise ConfigError(
        f"configs/profiles/cassini-testbed.yaml: link_gbps {_LINK:g}, expected the testbed's "
        f"{TESTBED_LINK_GBPS:g} Gb/s"
    )

_BY_NAME: dict[str, ProfiledModel] = {m.name: m for m in _MODELS}
# Names that mean something else on the Cassini testbed than in the zoo, or short forms.
_TESTBED_ALIASES = {
    "gpt2": "gpt2-medium",
    "gpt-2": "gpt2-medium",
    "wideresnet": "wide-resnet101",
    "wide-resnet": "wide-resnet101",
    "wrn": "wide-resnet101",
}


def testbed_models() -> list[str]:
    """Sorted names of the models :func:`testbed_profile` knows."""
    return sorted(_BY_NAME)


def get_profiled_model(name: str) -> ProfiledModel:
    """The testbed entry of ``name`` (zoo names and aliases, case-insensitive)."""
    if not isinstance(name, str):
        raise UnknownNameError("model", repr(name), _BY_NAME)
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = _TESTBED_ALIASES.get(key, key)
    if key not in _BY_NAME:
        try:
            key = get_model(key).name
        except UnknownNameError:
            raise UnknownNameError("model", name, _BY_NAME) from None
    if key not in _BY_NAME:
        raise UnknownNameError("model", name, _BY_NAME)
    return _BY_NAME[key]


def _link(link_gbps: object) -> float:
    if isinstance(link_gbps, bool) or not isinstance(link_gbps, int | float):
        raise ConfigError(f"link speed must be a number of Gb/s > 0, got {link_gbps!r}")
    x = float(link_gbps)
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(f"link speed must be a finite number of Gb/s > 0, got {link_gbps!r}")
    return x


def _batch(model: ProfiledModel, batch: object) -> int:
    if batch is None:
        return model.reference_batch
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise ConfigError(f"batch size per GPU must be an integer, got {batch!r}")
    lo, hi = model.batch_range
    if not lo <= batch <= hi:
        raise ConfigError(
            f"batch size per GPU {batch} of {model.name} is outside its documented range "
            f"{lo}-{hi} (Cassini Table 4.2 / HotNets Table 1)"
        )
    return batch


def testbed_profile(
    model: str, batch_per_gpu: int | None = None, link_gbps: float = TESTBED_LINK_GBPS
) -> CommProfile:
    """Isolated per-iteration demand of ``model`` at ``batch_per_gpu`` on a ``link_gbps`` link.

    Times in seconds; demands are fractions of ``link_gbps`` (capacity 1.0 for
    ``perf.geometry``). ``batch_per_gpu=None`` is the model's reference batch. The profile is
    named ``"<model>:<batch>"``. Raises ``UnknownNameError`` for a model not on the testbed and
    ``ConfigError`` for a batch outside the model's range, a non-positive link speed, or a link
    slower than the job's peak rate (module docstring).
    """
    m = get_profiled_model(model)
    b = _batch(m, batch_per_gpu)
    link = _link(link_gbps)
    if m.peak_gbps > link * (1 + 1e-12):
        raise ConfigError(
            f"{m.name}:{b} sends at {m.peak_gbps:g} Gb/s in its Up phase, more than the "
            f"{link:g} Gb/s link: it would congest the link on its own; use a link of at least "
            f"{m.peak_gbps:g} Gb/s"
        )
    segs = [(d / 1e3, rate / link) for d, rate in m.scaled_segments(b)]
    return CommProfile.from_segments(segs, name=f"{m.name}:{b}")


TESTBED_PLACEMENTS: dict[str, tuple[int, ...]] = {
    "rack-2": (0, 1),
    "net-2": (0, 2),
    "net-12": tuple(range(12)),
}
"""Reference placements on the ``cassini-testbed`` cluster (GPU ids; one GPU per server):
two servers under one ToR, two servers under two ToRs, twelve servers under six ToRs."""


def testbed_overheads() -> dict[str, dict[str, float]]:
    """Per testbed model, what the engine runs with profile source ``cassini-testbed``:
    ``ref_batch``, the profile's ``iteration_ms`` / ``up_ms`` / ``gbit`` per iteration, the
    engine's ``compute_ms`` and its exposed communication as % of compute at each of
    :data:`TESTBED_PLACEMENTS` on the ``cassini-testbed`` cluster, alone (no sharing).
    ``dlcluster models --overheads --profile cassini-testbed`` prints it."""
    cluster = Cluster(load_cluster("cassini-testbed"))
    out: dict[str, dict[str, float]] = {}
    for name in testbed_models():
        m = _BY_NAME[name]
        prof = model_profile(name, "cassini-testbed")
        row = {
            "ref_batch": float(m.reference_batch),
            "iteration_ms": m.iteration_ms(),
            "up_ms": m.up_ms,
            "gbit": m.gbit_per_iteration,
            "compute_ms": prof.compute_s * 1e3,
        }
        for label, gpus in TESTBED_PLACEMENTS.items():
            row[label] = 100.0 * placement_overhead(cluster, prof, np.asarray(gpus))
        out[name] = row
    return out


def _at_batch(m: ProfiledModel, batch: int) -> ProfiledModel:
    segs = m.scaled_segments(batch)
    return ProfiledModel(m.name, m.paper_name, m.parallelism, batch, (batch, batch), segs, m.source)


def hotnets_engine_ms(
    jobs: Sequence[tuple[str, int]],
    shape: Literal["engine", "profile"] = "engine",
    flow_rate: FlowRate | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(isolated, shared)`` iteration times (ms) of ``jobs`` (model, batch) sharing one ToR
    uplink of the ``cassini-testbed`` cluster under fair (max-min) sharing, from the engine's
    sharing function :func:`perf.contention.link_stretch`, phases aligned (HotNets: the jobs
    "start simultaneously"; no time shifts).

    ``shape="engine"``: each job as the engine runs it (profile source ``cassini-testbed``
    at that batch, two workers on two servers under two ToRs, its phases on one of the
    uplinks; its flows at most at ``flow_rate``, default the profile file's, see
    ``workload.profiles.testbed_model_profile``). ``shape="profile"``: the testbed profile's
    own Up segments (the profile's average Up rate over the whole Up phase).
    """
    if shape == "profile":
        parts = [profile_phases(testbed_profile(m, b)) for m, b in jobs]
        it = np.array([x[0] for x in parts])
        up = np.array([x[1] for x in parts])
        phases = [x[2] for x in parts]
        cap = 1.0
    else:
        cluster = Cluster(load_cluster("cassini-testbed"))
        links = SharedLinks(cluster)
        gpus = np.array([0, int(np.flatnonzero(cluster.gpu_rack == 1)[0])])  # two ToRs
        uplink = int(cluster.nic_uplink[cluster.gpu_nic[0]])
        it, up, phases = np.zeros(len(jobs)), np.zeros(len(jobs)), []
        for k, (m, b) in enumerate(jobs):
            entry = get_profiled_model(m)
            prof = testbed_model_profile(
                get_model(entry.name), _at_batch(entry, b), _LINK, flow_rate
            )
            comm = placement_overhead(cluster, prof, gpus) * prof.compute_s
            it[k], up[k] = prof.compute_s + comm, comm
            phases.append(links.phases(prof, gpus)[uplink])
        cap = float(links.capacity_Bps[uplink])
    stretch = link_stretch(it, up, np.zeros(it.size), phases, cap)
    return it * 1e3, (it + (stretch - 1.0) * up) * 1e3


# ----------------------------------------------------------------------------- paper data


class HotNetsGroup(NamedTuple):
    """One group of HotNets'22 Table 1: jobs (model, batch) sharing a link."""

    jobs: tuple[tuple[str, int], ...]
    fair_ms: tuple[float, ...]
    unfair_ms: tuple[float, ...]
    compatible: bool


class Snapshot(NamedTuple):
    """One snapshot of Cassini Table 4.3 (comm times are per-model averages, thesis 4.5.5)."""

    jobs: tuple[tuple[str, int], ...]
    score: float
    shifts_ms: tuple[float, ...]
    cassini_comm_ms: tuple[float, ...]
    themis_comm_ms: tuple[float, ...]


HOTNETS_TABLE_1: tuple[HotNetsGroup, ...] = (
    HotNetsGroup((("bert", 8), ("vgg19", 1200)), (183, 297), (157, 315), False),
    HotNetsGroup((("dlrm", 2000), ("dlrm", 2000)), (1301, 1300), (1001, 1019), True),
    HotNetsGroup(
        (("bert", 8), ("vgg19", 1400), ("wide-resnet101", 800)),
        (320, 494, 466),
        (216, 466, 505),
        False,
    ),
    HotNetsGroup((("wide-resnet101", 800), ("vgg16", 1400)), (295, 294), (273, 274), True),
    HotNetsGroup(
        (("vgg19", 1400), ("vgg16", 1700), ("resnet50", 1600)),
        (389, 389, 167),
        (329, 329, 165),
        True,
    ),
)
"""HotNets'22 Table 1 (iteration times in ms under fair and unfair DCQCN, "fully compatible")."""

CASSINI_TABLE_4_3: tuple[Snapshot, ...] = (
    Snapshot((("wide-resnet101", 800), ("vgg16", 1400)), 1.0, (0, 150), (138, 148), (206, 199)),
    Snapshot(
        (("vgg19", 1400), ("vgg16", 1700), ("resnet50", 1600)),
        1.0,
        (0, 158, 46),
        (168, 163, 59),
        (220, 220, 55),
    ),
    Snapshot((("vgg19", 1024), ("vgg16", 1200)), 0.9, (0, 100), (166, 168), (176, 177)),
    Snapshot((("roberta", 12), ("roberta", 12)), 0.8, (0, 60), (164, 180), (210, 208)),
    Snapshot(
        (("bert", 8), ("vgg19", 1400), ("wide-resnet101", 800)),
        0.6,
        (0, 42, 191),
        (209, 294, 265),
        (213, 292, 266),
    ),
)
"""Cassini thesis Table 4.3: the five snapshots, scores, time shifts and comm times (ms)."""


# ----------------------------------------------------------------------------- job specs


@dataclass(frozen=True)
class JobSpec:
    """One ``MODEL:BATCH`` of a job list, resolved to the testbed's name and batch."""

    model: str
    batch: int

    @property
    def key(self) -> str:
        return f"{self.model}:{self.batch}"


def parse_job_specs(text: str) -> list[JobSpec]:
    """``"MODEL:BATCH[,MODEL:BATCH...]"`` -> resolved specs (a bare ``MODEL`` = reference batch).

    Raises ``ConfigError`` for a malformed item (names the item and the expected form) and
    ``UnknownNameError`` / ``ConfigError`` for an unknown model or a batch out of range.
    """
    form = "expected MODEL:BATCH[,MODEL:BATCH...], e.g. vgg16:1400,wide-resnet101:800"
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"no jobs given; {form}")
    specs = []
    for raw in text.split(","):
        item = raw.strip()
        parts = item.split(":")
        if not item or len(parts) > 2 or not parts[0].strip():
            raise ConfigError(f"malformed job spec {item!r}; {form}")
        model = get_profiled_model(parts[0])
        batch = None
        if len(parts) == 2:
            digits = parts[1].strip()
            if not digits.isdigit():
                raise ConfigError(
                    f"malformed job spec {item!r}: batch {parts[1]!r} is not a positive "
                    f"integer; {form}"
                )
            batch = int(digits)
        specs.append(JobSpec(model.name, _batch(model, batch)))
    return specs


def job_keys(specs: Iterable[JobSpec]) -> list[str]:
    """``"<model>:<batch>"`` per job; the k-th repeat of a key (k >= 2) gets the suffix ``#k``."""
    seen: dict[str, int] = {}
    keys = []
    for s in specs:
        seen[s.key] = seen.get(s.key, 0) + 1
        keys.append(s.key if seen[s.key] == 1 else f"{s.key}#{seen[s.key]}")
    return keys


def link_report(specs: Sequence[JobSpec], link_gbps: float = TESTBED_LINK_GBPS) -> dict:
    """Compatibility of ``specs`` sharing one link, as ``dlcluster compat`` prints it.

    ``{"score": float, "shifts_ms": {key: ms}, "perimeter_ms": float}``: the Table 4.1 score
    (6 decimals), each job's Eq. 4.5 time shift in ms (3 decimals; the first job is the
    reference, 0 ms) and the unified circle's perimeter (the fitted one when the exact LCM is
    above ``geometry``'s cap); keys as :func:`job_keys`. Deterministic.
    """
    link = _link(link_gbps)
    if not specs:
        raise ConfigError("no jobs given; expected at least one MODEL:BATCH")
    profiles = [testbed_profile(s.model, s.batch, link) for s in specs]
    res = link_compatibility(profiles)
    return {
        "score": round(res.score, 6),
        "shifts_ms": {
            k: round(t * 1e3, 3) for k, t in zip(job_keys(specs), res.time_shifts, strict=True)
        },
        "perimeter_ms": round(res.circle.perimeter_s * 1e3, 3),
    }


# ----------------------------------------------------------------------------- fluid model


def _levels(profile: CommProfile) -> list[tuple[float, float]]:
    """Piecewise-constant ``(duration_s, demand)`` of one iteration, overlapping phases summed."""
    t = profile.iteration_time
    cuts = {0.0, t}
    for p in profile.phases:
        cuts.update(x for x in (p.start, p.end) if 0.0 < x < t)
    edges = sorted(cuts)
    out: list[tuple[float, float]] = []
    for a, b in itertools.pairwise(edges):
        if b - a <= 0:
            continue
        demand = sum(p.demand for p in profile.phases if p.start <= a and p.end >= b)
        if out and out[-1][1] == demand:
            out[-1] = (out[-1][0] + b - a, demand)
        else:
            out.append((b - a, demand))
    return out


def _water_fill(caps: list[float], weights: list[float], capacity: float) -> list[float]:
    """Weighted max-min rates with each flow capped at its own demand."""
    rates = [0.0] * len(caps)
    order = sorted(range(len(caps)), key=lambda i: caps[i] / weights[i])
    left, wsum = capacity, sum(weights)
    for pos, i in enumerate(order):
        share = left * weights[i] / wsum
        if caps[i] <= share:
            rates[i] = caps[i]
            left -= caps[i]
            wsum -= weights[i]
        else:
            for j in order[pos:]:
                rates[j] = left * weights[j] / wsum
            break
    return rates


def shared_link_iteration_times(
    profiles: Sequence[CommProfile],
    capacity: float = 1.0,
    *,
    weights: Sequence[float] | None = None,
    shifts: Sequence[float] | None = None,
    iterations: int = 40,
    warmup: int = 20,
) -> tuple[float, ...]:
    """Mean iteration time (s) of each job when they share one link (module docstring).

    Job ``j`` starts at ``shifts[j]`` seconds (default 0: together). ``weights`` (default
    equal: fair sharing) set the weighted max-min shares. The mean is over ``iterations``
    iterations after ``warmup`` ones.
    """
    n = len(profiles)
    cap = float(capacity)
    if not (math.isfinite(cap) and cap > 0):
        raise ConfigError(f"link capacity must be > 0, got {capacity!r}")
    w = [1.0] * n if weights is None else [float(x) for x in weights]
    s = [0.0] * n if shifts is None else [float(x) for x in shifts]
    if len(w) != n or len(s) != n or any(not x > 0 for x in w) or any(x < 0 for x in s):
        raise ConfigError("weights (> 0) and shifts (>= 0) need one value per job")
    if iterations < 1 or warmup < 0:
        raise ConfigError(f"need iterations >= 1 and warmup >= 0, got {iterations}, {warmup}")
    segs = [_levels(p) for p in profiles]
    for j, p in enumerate(profiles):
        if p.peak_demand > cap * (1 + 1e-9):
            raise ConfigError(f"job {j} ({p.name}) alone demands more than the link capacity")
    seg = [0] * n
    # remaining work of the current segment: seconds (Down) or demand x seconds (Up)
    left = [segs[j][0][0] * (segs[j][0][1] or 1.0) for j in range(n)]
    ends: list[list[float]] = [[] for _ in range(n)]
    need = warmup + iterations + 1
    t = 0.0
    while min(len(e) for e in ends) < need:
        started = [t >= s[j] for j in range(n)]
        up = [j for j in range(n) if started[j] and segs[j][seg[j]][1] > 0]
        rates = [0.0] * n
        shares = _water_fill([segs[j][seg[j]][1] for j in up], [w[j] for j in up], cap)
        for j, r in zip(up, shares, strict=True):
            rates[j] = r
        dts = []
        for j in range(n):
            if not started[j]:
                dts.append(s[j] - t)
            elif segs[j][seg[j]][1] > 0:
                dts.append(left[j] / rates[j])
            else:
                dts.append(left[j])
        dt = min(dts)
        t += dt
        for j in range(n):
            if not started[j]:
                continue
            level = segs[j][seg[j]][1]
            left[j] -= rates[j] * dt if level > 0 else dt
            full = segs[j][seg[j]][0] * (level or 1.0)
            while left[j] <= 1e-12 * full:
                seg[j] += 1
                if seg[j] == len(segs[j]):
                    seg[j] = 0
                    ends[j].append(t)
                d, level = segs[j][seg[j]]
                full = d * (level or 1.0)
                left[j] += full
    return tuple((e[warmup + iterations] - e[warmup]) / iterations for e in ends)
