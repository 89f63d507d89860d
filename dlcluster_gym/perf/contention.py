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
uplinks of those racks. Links are computed once per set of machines (cached).

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
(``geometry.unified_circle``: perimeter = LCM of the iteration times with its quantum and cap;
the quantum is ``min(5 ms, shortest iteration / 16)`` so each job spans at least 16 sectors),
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
longer Up phases back into the circle; factors within ``1e-9`` of 1 count as 1.
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
    unified_circle,
)
from dlcluster_gym.perf.network import comm_time_s
from dlcluster_gym.workload.models import ModelProfile

__all__ = [
    "UP_TEMPLATES",
    "PlacementTraffic",
    "SharedLinks",
    "UpTemplate",
    "comm_profile",
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
    phases = [
        (float(s), float(d), float(v)) for s, d, v in zip(starts, durs, demand, strict=True)
    ]
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
        self._links: dict[tuple[int, ...], np.ndarray] = {}
        self._traffic: dict[tuple, PlacementTraffic] = {}

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
        key = tuple(sorted({int(m) for m in machines}))
        links = self._links.get(key)
        if links is None:
            if len(key) <= 1:
                links = np.zeros(0, dtype=np.int64)
            else:
                ms = np.asarray(key, dtype=np.int64)
                racks = np.unique(self.cluster.machine_rack[ms])
                tors = racks + self.num_machines if racks.size > 1 else racks[:0]
                links = np.concatenate((ms, tors)).astype(np.int64)
            links.setflags(write=False)
            self._links[key] = links
        return links

    def links(self, gpus: Sequence[int] | np.ndarray) -> np.ndarray:
        """Link ids crossed by a placement (GPU ids)."""
        return self.links_of_machines(self.cluster.gpu_machine[np.asarray(gpus, dtype=np.int64)])

    def traffic(self, profile: ModelProfile, gpus: np.ndarray) -> PlacementTraffic:
        """:func:`placement_traffic`, cached per (model, machines, GPUs per machine)."""
        machines, counts = np.unique(
            self.cluster.gpu_machine[np.asarray(gpus, dtype=np.int64)], return_counts=True
        )
        key = (profile, tuple(machines.tolist()), tuple(counts.tolist()))
        hit = self._traffic.get(key)
        if hit is None:
            hit = placement_traffic(self.cluster, profile, gpus, self)
            self._traffic[key] = hit
        return hit


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
    shared: SharedLinks | None = None,
) -> PlacementTraffic:
    """Links a placement crosses and the bytes per iteration on each (module docstring)."""
    shared = shared or SharedLinks(cluster)
    gpus = np.asarray(gpus, dtype=np.int64)
    machines, counts = np.unique(cluster.gpu_machine[gpus], return_counts=True)
    links = shared.links_of_machines(machines)
    if links.size == 0:
        empty = np.zeros(0)
        return PlacementTraffic(links, empty, 0.0, empty)
    racks = cluster.machine_rack[machines]
    rack_ids, k_of = np.unique(racks, return_inverse=True)
    k_per_rack = np.bincount(k_of)
    k = k_per_rack[k_of].astype(np.float64)  # job machines in each machine's rack
    n_racks = rack_ids.size
    volume = profile.comm.volume_scale * profile.grad_bytes
    _, s_rack, s_net = profile.comm.tier_scale
    machine_bytes = np.where(k > 1, s_rack * 2.0 * (k - 1.0) / k * volume, 0.0)
    tor_bytes = np.zeros(0)
    if n_racks > 1:
        net = s_net * 2.0 * (n_racks - 1) / n_racks * volume
        machine_bytes = machine_bytes + net / k
        tor_bytes = np.full(n_racks, net)
    by_link = np.concatenate((machine_bytes, tor_bytes))  # same order as links (sorted)
    group = int(cluster.machine_group[machines[0]])
    shape = cluster.placement_shape(gpus)
    comm = comm_time_s(profile, shape, cluster.links_for_group(group))
    rate = by_link / comm if comm > 0 else np.zeros_like(by_link)
    for arr in (by_link, rate):
        arr.setflags(write=False)
    return PlacementTraffic(links, by_link, float(comm), rate)


# ----------------------------------------------------------------------------- stretch


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
    peaks = np.array([UP_TEMPLATES[p].peak for p in parallelism]) * rate
    if np.minimum(peaks, 1.0).sum() <= 1.0 + _RTOL:
        return ones  # fast path: the link is never over-subscribed
    profiles = [
        comm_profile(p, float(t), float(u), float(r), 1.0)
        for p, t, u, r in zip(parallelism, it, up, rate, strict=True)
    ]
    circle = unified_circle(profiles, precision_s=_precision(it), max_sectors=max_sectors)
    perimeter = circle.perimeter_s
    pos_parts: list[np.ndarray] = []
    jobs_parts: list[np.ndarray] = []
    val_parts: list[np.ndarray] = []
    for j, prof in enumerate(profiles):
        length = circle.iteration_sectors[j] * circle.sector_s
        scale = length / prof.iteration_time
        reps = circle.perimeter_sectors // circle.iteration_sectors[j]
        st = np.array([ph.start for ph in prof.phases]) * scale
        du = np.array([ph.duration for ph in prof.phases]) * scale
        dm = np.array([ph.demand for ph in prof.phases])
        offset = (shift[j] % prof.iteration_time) * scale
        starts = np.fmod(offset + st[None, :] + length * np.arange(reps)[:, None], perimeter)
        starts = starts.ravel()
        ends = starts + np.tile(du, reps)
        dem = np.tile(dm, reps)
        wrap = ends > perimeter
        pos = (starts, np.minimum(ends, perimeter), np.zeros(int(wrap.sum())), ends[wrap] - perimeter)
        val = (dem, -dem, dem[wrap], -dem[wrap])
        for p, v in zip(pos, val, strict=True):
            pos_parts.append(p)
            val_parts.append(v)
            jobs_parts.append(np.full(p.size, j, dtype=np.int64))
    pos = np.concatenate(pos_parts)
    val = np.concatenate(val_parts)
    who = np.concatenate(jobs_parts)
    points = np.unique(np.concatenate((pos, [0.0, perimeter])))
    delta = np.zeros((n, points.size))
    np.add.at(delta, (who, np.searchsorted(points, pos)), val)
    level = np.cumsum(delta, axis=1)[:, :-1]  # demand of each job on [points[i], points[i+1])
    np.maximum(level, 0.0, out=level)
    seg = np.diff(points)
    total = level.sum(axis=0)
    ratio = np.where(total > 1.0 + _RTOL, total, 1.0)
    weight = level * seg
    w_sum = weight.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w_sum > 0, (weight * ratio).sum(axis=1) / w_sum, 1.0)
    out[out < 1.0 + _RTOL] = 1.0
    return out
