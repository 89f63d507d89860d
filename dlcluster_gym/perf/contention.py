"""Link contention: the shared links a placement crosses, its periodic demand on each, and the
stretch that fair sharing gives the jobs on an over-subscribed link.

The engine uses this module when ``scenario.contention`` is on (``sim/engine.py``). Sources:
the Cassini/MLTCP thesis 4.1-4.3 (``shared/papers/cassini-mltcp-thesis.txt``: Up/Down phases,
unified circle, multi-phase model-parallel jobs) and HotNets'22 (fair sharing keeps the phases
of competing jobs aligned; interleaving them removes the slowdown).

**Shared links** (:class:`SharedLinks`). Each machine's NIC uplink to its ToR and each ToR's
uplink to the spine, with the capacities of ``Cluster.graph``: machine ``m``'s uplink is
``Cluster.machine_uplink_Bps(m)``, rack ``r``'s ToR uplink is the sum of its machines' uplinks
divided by ``rack_uplink_oversubscription``. Link ids: machine uplink ``m`` -> ``m``, ToR uplink
``r`` -> ``num_machines + r``. A placement inside one machine crosses no shared link; one
spanning machines of one rack crosses their uplinks; one spanning racks also crosses the ToR
uplinks of those racks. ``SharedLinks.links`` caches the links per set of machines; the engine
computes a job's links and bytes once per placement (a few numpy operations on its machines;
the all-reduce stage terms are cached in ``perf.network``) and keeps them until it moves.

**Bytes per iteration on a link** (:func:`placement_traffic`), from the hierarchical all-reduce
of ``perf.network`` (gradient volume ``V = volume_scale * grad_bytes``, calibration factors
``(s_machine, s_rack, s_network) = tier_scale``). Let the job use ``k_r`` machines in rack ``r``
and ``R`` racks. Bytes are per direction (links are full duplex and an all-reduce sends as much
as it receives):

- the machine ring stays on NVSwitch: no shared link;
- rack stage: the ``g_m`` GPUs of machine ``m`` hold shards ``V / g_m`` and each sends
  ``2 (k_r - 1) / k_r * V / g_m``, so ``m``'s uplink carries ``2 (k_r - 1) / k_r * V``;
- network stage: machine ``m`` holds ``V / k_r`` after the rack stage and sends
  ``2 (R - 1) / R * V / k_r`` through its uplink; a ToR uplink carries the sum over the rack's
  ``k_r`` machines, ``2 (R - 1) / R * V``.

Each stage's bytes are multiplied by its calibration factor, as its time is in
``perf.network.comm_time_s``: Dally 4.2.2 calibrates by scaling the workload's volume, so a
calibrated stage moves ``s_t`` times the physical bytes at the physical rate.

**Demand during Up.** The Up phase of an iteration lasts the communication time ``U`` (the
engine's exposed communication ``/ (1 - overlap)``, at most the iteration time) and ends the
iteration (Down = compute first, Cassini 4.1.1). The demand on a link during Up is the link's
bytes per iteration divided by the model's communication time per iteration
(``comm_time_s``, calibrated, all stages): the mean rate over the whole Up phase, including the
machine stage and latencies. The engine applies Dally's trace scaling to the communication time
(``compute / profile.compute_s``) and keeps this rate, i.e. it scales the bytes with it. With the
default capacities (one rack-tier port per GPU, no oversubscription) data-parallel jobs can
never over-subscribe a link: a job's rate on machine ``m`` is at most (its GPUs on ``m``) x the
rack bandwidth, and on a ToR uplink at most (its GPUs in the rack) x the rack bandwidth.
Contention appears with ``machine_uplink_gbps`` below that, with ``rack_uplink_oversubscription
> 1``, or with model-parallel jobs.

**Model-parallel jobs** (``parallelism == "model"``: GPT-1/2/3, DLRM of Cassini Table 4.2) get
six phases per iteration, as Fig. 4.1(d) (hybrid data/pipeline/tensor parallelism, Cassini
4.3.3): the compute time is cut into three equal Down phases, each followed by an Up phase:
forward activations over 30% of ``U`` at half the mean rate (Fig. 4.1(b)/(c): pipeline
activations and tensor-parallel traffic at about half the link), backward activation gradients
over 30% of ``U`` at the mean rate, and the data-parallel all-reduce over the last 40% of ``U``
at 1.375x the mean rate (the rest of the bytes: 0.3 x 0.5 + 0.3 x 1 + 0.4 x 1.375 = 1, so bytes
per iteration are the same as a data-parallel job with the same ``U``). Data-parallel jobs have
one Down and one Up phase (Cassini 4.2).

**Jobs above a link alone.** A phase demand above a link's capacity is capped at the capacity:
the network model's time already accounts for the link bandwidth (no error here, unlike
``geometry.compatibility_score``, which scores profiles measured in isolation).

**Stretch** (:func:`stretch_factors`). The jobs on one link are laid on their unified circle
(perimeter = LCM of the iteration times with ``geometry.unified_circle``'s quantum, cap and
perimeter fit; :func:`circle_layout` computes that geometry without the demand vectors, with the
fit vectorised and cached, and is tested equal to ``unified_circle``; the quantum is
``min(5 ms, shortest iteration / 16)`` so each job spans at least 16 sectors),
each job's phases scaled onto its quantized iteration and rotated by its time shift (the engine's
``time_shift[job]``, seconds, delays the job's pattern; modulo the iteration time). With no shifts
assigned every rotation is 0: the phases are aligned, the fair-sharing outcome of HotNets'22.
The overlay is exact (piecewise constant between phase boundaries, not sector averages). Where
the total demand ``D`` exceeds the capacity ``C``, fair sharing gives each job ``C x d_j / D``
(its share of the capacity in proportion to its demand), so every byte sent there takes ``D / C``
times longer. A job's stretch on the link is the byte-weighted mean of ``max(1, D / C)`` over its
Up phases (for a one-level Up phase, the time-weighted mean); its exposed communication grows by
its worst link's stretch. When the jobs' summed peak demand on a link is at most ``C`` the
stretch is 1 and the circle is skipped (fast path). The stretch is one-shot: it is computed from
the jobs' uncontended profiles (as Cassini profiles jobs in isolation), without iterating the
longer Up phases back into the circle. It is exact for aligned identical jobs (their stretched
phases still coincide and the link runs at capacity through them) and for fully interleaved
ones; for partial overlaps it is a slight underestimate (longer phases would overlap a little
more), which we accept for a stretch that costs one pass. Factors within ``1e-9`` of 1 count
as 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.perf.geometry import (
    DEFAULT_MAX_SECTORS,
    DEFAULT_PRECISION_S,
    CommProfile,
    fit_perimeter,
)
from dlcluster_gym.perf.network import comm_time_s, placement_overhead
from dlcluster_gym.workload.models import ModelProfile

__all__ = [
    "UP_TEMPLATES",
    "CircleLayout",
    "PlacementTraffic",
    "SharedLinks",
    "UpTemplate",
    "circle_layout",
    "comm_profile",
    "job_link_profiles",
    "placement_traffic",
    "stretch_factors",
    "up_phases",
]

Parallelism = Literal["data", "model"]
_RTOL = 1e-9  # demand sums and stretch factors within this of the capacity / 1 count as equal
MIN_SECTORS_PER_ITERATION = 16


@dataclass(frozen=True)
class UpTemplate:
    """Up phases of one iteration of length ``T`` with communication time ``U``.

    Phase ``k`` starts at ``down[k] * (T - U) + up[k] * U``, lasts ``share[k] * U`` and demands
    ``level[k]`` times the job's mean Up rate on the link. ``sum(share * level) == 1``.
    """

    down: tuple[float, ...]
    up: tuple[float, ...]
    share: tuple[float, ...]
    level: tuple[float, ...]

    def __post_init__(self) -> None:
        if not math.isclose(sum(s * v for s, v in zip(self.share, self.level, strict=True)), 1.0):
            raise ValueError(f"UpTemplate must conserve bytes: {self}")

    @property
    def peak(self) -> float:
        """Largest level (phases do not overlap)."""
        return max(self.level)


UP_TEMPLATES: dict[str, UpTemplate] = {
    # Cassini 4.2: one Down (compute) phase, then one Up phase at the mean rate.
    "data": UpTemplate(down=(1.0,), up=(0.0,), share=(1.0,), level=(1.0,)),
    # Cassini Fig. 4.1(d) / 4.3.3: three Down + three Up phases (module docstring).
    "model": UpTemplate(
        down=(1.0 / 3.0, 2.0 / 3.0, 1.0),
        up=(0.0, 0.3, 0.6),
        share=(0.3, 0.3, 0.4),
        level=(0.5, 1.0, 1.375),
    ),
}


def up_phases(
    parallelism: str, iteration_s: float, up_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, durations, levels) of the Up phases of one iteration (module docstring)."""
    tpl = UP_TEMPLATES[parallelism]
    up = min(max(up_s, 0.0), iteration_s)
    down = iteration_s - up
    starts = np.asarray(tpl.down) * down + np.asarray(tpl.up) * up
    return starts, np.asarray(tpl.share) * up, np.asarray(tpl.level)


def comm_profile(
    parallelism: str,
    iteration_s: float,
    up_s: float,
    rate_Bps: float,
    capacity_Bps: float = math.inf,
    name: str = "",
) -> CommProfile:
    """A job's demand on one link as a Cassini :class:`CommProfile` (bytes/s).

    Phase demands are ``level * rate_Bps`` capped at ``capacity_Bps``; pass the result to
    ``perf.geometry`` to score or rotate jobs on that link.
    """
    starts, durs, levels = up_phases(parallelism, iteration_s, up_s)
    demand = np.minimum(levels * rate_Bps, capacity_Bps)
    phases = [(float(s), float(d), float(v)) for s, d, v in zip(starts, durs, demand, strict=True)]
    return CommProfile.multi_phase(iteration_s, phases, name)


# ----------------------------------------------------------------------------- links


class SharedLinks:
    """Link ids and capacities of a cluster's shared links, and the links placements cross."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.num_machines = cluster.num_machines
        self.num_racks = cluster.num_racks
        machine_cap = np.array(
            [cluster.machine_uplink_Bps(m) for m in range(cluster.num_machines)], dtype=np.float64
        )
        rack_cap = np.bincount(
            cluster.machine_rack, weights=machine_cap, minlength=cluster.num_racks
        ) / float(cluster.config.rack_uplink_oversubscription)
        self.capacity_Bps = np.concatenate((machine_cap, rack_cap))
        self.capacity_Bps.setflags(write=False)
        self.num_links = int(self.capacity_Bps.size)
        self._links: dict[bytes, np.ndarray] = {}

    def machine_uplink(self, machine: int) -> int:
        """Link id of a machine's NIC uplink to its ToR."""
        return int(machine)

    def tor_uplink(self, rack: int) -> int:
        """Link id of a rack's ToR uplink to the spine."""
        return self.num_machines + int(rack)

    def label(self, link: int) -> str:
        """'machine 3 uplink' or 'rack 1 ToR uplink'."""
        if link < self.num_machines:
            return f"machine {link} uplink"
        return f"rack {link - self.num_machines} ToR uplink"

    def links_of_machines(self, machines: Sequence[int] | np.ndarray) -> np.ndarray:
        """Link ids crossed by a job on these machines (sorted ids, cached per machine set)."""
        ms = np.unique(np.asarray(machines, dtype=np.int64))
        key = ms.tobytes()
        links = self._links.get(key)
        if links is None:
            links = _links_of(self.cluster, ms)[0]
            links.setflags(write=False)
            self._links[key] = links
        return links

    def links(self, gpus: Sequence[int] | np.ndarray) -> np.ndarray:
        """Link ids crossed by a placement (GPU ids)."""
        return self.links_of_machines(self.cluster.gpu_machine[np.asarray(gpus, dtype=np.int64)])

    def traffic(
        self, profile: ModelProfile, gpus: np.ndarray, comm_s: float | None = None
    ) -> PlacementTraffic:
        """:func:`placement_traffic` on this cluster."""
        return placement_traffic(self.cluster, profile, gpus, comm_s)


def _links_of(cluster: Cluster, machines: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(link ids, job machines in each machine's rack, racks) for sorted unique machines.

    Machines are numbered rack by rack, so their racks are sorted and each rack is one run.
    """
    if machines.size <= 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0), 1
    racks = cluster.machine_rack[machines]
    first = np.flatnonzero(np.concatenate(([True], racks[1:] != racks[:-1])))
    sizes = np.diff(np.append(first, machines.size))
    k = np.repeat(sizes, sizes).astype(np.float64)
    n_racks = int(first.size)
    if n_racks == 1:
        return machines.copy(), k, 1
    return np.concatenate((machines, racks[first] + cluster.num_machines)), k, n_racks


@dataclass(frozen=True, eq=False)
class PlacementTraffic:
    """What one placement of one model sends over shared links per iteration.

    ``links``: link ids crossed; ``bytes_per_iter``: calibrated bytes per iteration on each
    (per direction, at the model's own compute time); ``comm_s``: the model's calibrated
    communication seconds per iteration on this placement (before overlap); ``rate_Bps``: mean
    demand during the Up phase, ``bytes_per_iter / comm_s``.
    """

    links: np.ndarray
    bytes_per_iter: np.ndarray
    comm_s: float
    rate_Bps: np.ndarray


def placement_traffic(
    cluster: Cluster,
    profile: ModelProfile,
    gpus: Sequence[int] | np.ndarray,
    comm_s: float | None = None,
) -> PlacementTraffic:
    """Links a placement crosses and the bytes per iteration on each (module docstring).

    ``comm_s`` is the model's calibrated communication time on this placement
    (``perf.network.comm_time_s``); computed when not given.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    machines = np.unique(cluster.gpu_machine[gpus])
    links, k, n_racks = _links_of(cluster, machines)
    if links.size == 0:
        empty = np.zeros(0)
        return PlacementTraffic(links, empty, 0.0, empty)
    volume = profile.comm.volume_scale * profile.grad_bytes
    _, s_rack, s_net = profile.comm.tier_scale
    by_link = np.where(k > 1, s_rack * 2.0 * (k - 1.0) / k * volume, 0.0)
    if n_racks > 1:
        net = s_net * 2.0 * (n_racks - 1) / n_racks * volume
        by_link = np.concatenate((by_link + net / k, np.full(n_racks, net)))
    if comm_s is None:
        group = int(cluster.machine_group[machines[0]])
        shape = cluster.placement_shape(gpus)
        comm_s = comm_time_s(profile, shape, cluster.links_for_group(group))
    rate = by_link / comm_s if comm_s > 0 else np.zeros_like(by_link)
    for arr in (links, by_link, rate):
        arr.setflags(write=False)
    return PlacementTraffic(links, by_link, float(comm_s), rate)


def job_link_profiles(
    links: SharedLinks,
    profile: ModelProfile,
    compute_s: float,
    gpus: Sequence[int] | np.ndarray,
) -> dict[int, CommProfile]:
    """A job's uncontended demand on each shared link its placement crosses (bytes/s).

    The same quantities the engine uses with contention on: iteration = compute + exposed
    communication, Up = communication / (1 - overlap), mean Up rate = the placement's bytes on
    the link / the model's communication time, phases capped at the link's capacity.
    ``compute_s`` is the job's compute seconds per iteration on ``gpus``. For Cassini-style
    policies that score candidate placements (``baselines/cassini.py``).
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    fraction = placement_overhead(links.cluster, profile, gpus)
    if fraction <= 0.0:
        return {}
    overlap = profile.comm.overlap
    comm = fraction * compute_s
    iteration = compute_s + comm
    up = min(comm / (1.0 - overlap), iteration)
    model_comm = fraction * profile.compute_s / (1.0 - overlap)
    traffic = links.traffic(profile, gpus, model_comm)
    caps = links.capacity_Bps[traffic.links]
    return {
        int(link): comm_profile(
            profile.parallelism, iteration, up, float(rate), float(cap), profile.name
        )
        for link, rate, cap in zip(traffic.links, traffic.rate_Bps, caps, strict=True)
    }


# ----------------------------------------------------------------------------- stretch


@dataclass(frozen=True)
class CircleLayout:
    """The unified circle's geometry for a set of iteration times (no demand vectors).

    Same quantisation and perimeter as ``geometry.unified_circle`` (tested equal):
    ``sector_s`` seconds per sector, job ``j`` spans ``iteration_sectors[j]`` sectors, the
    perimeter ``perimeter_sectors`` (a multiple of each).
    """

    sector_s: float
    iteration_sectors: tuple[int, ...]
    perimeter_sectors: int


def circle_layout(
    iteration_s: Sequence[float] | np.ndarray,
    precision_s: float = DEFAULT_PRECISION_S,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> CircleLayout:
    """Sector length, quantised iteration lengths and perimeter of the unified circle.

    The geometry of ``geometry.unified_circle`` (LCM of the quantised iteration times, capped
    at ``max_sectors`` with the same fit) without building demand vectors, and with the fit
    vectorised and cached: the engine's hot path needs only this.
    """
    q = float(precision_s)
    times = [float(t) for t in iteration_s]
    ns = [max(1, math.floor(t / q + 0.5)) for t in times]
    if ns and max(ns) > max_sectors:
        q *= math.ceil(max(ns) / max_sectors)
        ns = [max(1, math.floor(t / q + 0.5)) for t in times]
    perimeter = math.lcm(*ns) if ns else 1
    if perimeter > max_sectors:
        perimeter, chosen, _ = fit_perimeter(ns, max_sectors)
        ns = [chosen[n] for n in ns]
    return CircleLayout(q, tuple(ns), perimeter)


def _precision(iteration_s: np.ndarray) -> float:
    return min(DEFAULT_PRECISION_S, float(iteration_s.min()) / MIN_SECTORS_PER_ITERATION)


def stretch_factors(
    iteration_s: Sequence[float] | np.ndarray,
    up_s: Sequence[float] | np.ndarray,
    parallelism: Sequence[str],
    rate_Bps: Sequence[float] | np.ndarray,
    shift_s: Sequence[float] | np.ndarray,
    capacity_Bps: float,
    *,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> np.ndarray:
    """Per job, the factor by which fair sharing of one link stretches its communication.

    One entry per job on the link: its uncontended iteration time, Up (communication) time,
    parallelism (``"data"``/``"model"``), mean Up rate on this link and time shift. Returns
    factors >= 1 (module docstring: fast path, unified circle, byte-weighted ``max(1, D/C)``).
    """
    it = np.asarray(iteration_s, dtype=np.float64)
    up = np.minimum(np.maximum(np.asarray(up_s, dtype=np.float64), 0.0), it)
    rate = np.asarray(rate_Bps, dtype=np.float64) / float(capacity_Bps)  # units of capacity
    shift = np.asarray(shift_s, dtype=np.float64)
    n = it.size
    ones = np.ones(n)
    if n < 2:
        return ones
    tpls = [UP_TEMPLATES[p] for p in parallelism]
    peaks = np.array([t.peak for t in tpls]) * rate
    if np.minimum(peaks, 1.0).sum() <= 1.0 + _RTOL:
        return ones  # fast path: the link is never over-subscribed
    layout = circle_layout(it, _precision(it), max_sectors)
    perimeter = layout.perimeter_sectors * layout.sector_s
    # one row per (job, phase): start, duration, capped demand on the job's quantised iteration
    job_k = np.concatenate([np.full(len(t.level), j) for j, t in enumerate(tpls)])
    down = np.concatenate([t.down for t in tpls])
    upf = np.concatenate([t.up for t in tpls])
    share = np.concatenate([t.share for t in tpls])
    level = np.concatenate([t.level for t in tpls])
    sectors = np.asarray(layout.iteration_sectors, dtype=np.int64)
    length = sectors * layout.sector_s
    scale = (length / it)[job_k]  # each profile is stretched onto its quantised iteration
    t_k, u_k = it[job_k], up[job_k]
    st = (down * (t_k - u_k) + upf * u_k + (shift % it)[job_k]) * scale
    du = share * u_k * scale
    dm = np.minimum(level * rate[job_k], 1.0)
    # repeat each row once per iteration of its job around the circle
    reps = (layout.perimeter_sectors // sectors)[job_k]
    row = np.repeat(np.arange(job_k.size), reps)
    nth = np.arange(row.size) - np.repeat(np.cumsum(reps) - reps, reps)
    starts = np.fmod(st[row] + length[job_k][row] * nth, perimeter)
    ends = starts + du[row]
    dem = dm[row]
    who = job_k[row]
    wrap = ends > perimeter  # phases that wrap past the perimeter continue at 0
    lo = np.concatenate((starts, np.zeros(int(wrap.sum()))))
    hi = np.concatenate((np.minimum(ends, perimeter), ends[wrap] - perimeter))
    dem = np.concatenate((dem, dem[wrap]))
    who = np.concatenate((who, who[wrap]))
    # exact overlay: total demand is piecewise constant between phase boundaries
    points = np.unique(np.concatenate((lo, hi, [0.0, perimeter])))
    i_lo = np.searchsorted(points, lo)
    i_hi = np.searchsorted(points, hi)
    m = points.size
    delta = np.bincount(i_lo, dem, minlength=m) - np.bincount(i_hi, dem, minlength=m)
    total = np.cumsum(delta)[:-1]  # on [points[i], points[i + 1])
    ratio = np.where(total > 1.0 + _RTOL, total, 1.0)  # fair sharing: D / C where D > C
    stretched = np.concatenate(([0.0], np.cumsum(ratio * np.diff(points))))
    num = np.bincount(who, dem * (stretched[i_hi] - stretched[i_lo]), minlength=n)
    den = np.bincount(who, dem * (points[i_hi] - points[i_lo]), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / den, 1.0)
    out[out < 1.0 + _RTOL] = 1.0
    return out
