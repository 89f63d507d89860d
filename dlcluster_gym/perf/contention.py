"""Link sharing between jobs: each job's per-stage demand on the links it crosses, laid on
Cassini's unified circle, and the stretch that max-min fair sharing gives it.

The engine uses this module when ``scenario.contention`` is on (the default; ``sim/engine.py``).
Sources: the Cassini/MLTCP thesis 4.1-4.3 (``shared/papers/cassini-mltcp-thesis.txt``: Up/Down
phases, unified circle, multi-phase model-parallel jobs) and HotNets'22 (fair sharing keeps the
phases of competing jobs aligned; interleaving them removes the slowdown).

**Shared links** (:class:`SharedLinks`): the cluster's NICs, rack (or rail) uplinks and spine
link, with the capacities and ids of ``Cluster._init_nics``; a GPU's port inside its machine
belongs to one job and is never shared.

**Demand per stage** (:func:`link_phases`, from ``perf.network.placement_traffic``). The Up
phase of an iteration lasts the communication time ``U`` (the engine's exposed communication
``/ (1 - overlap)``, at most the iteration time) and ends the iteration (Down = compute first,
Cassini 4.1.1). Inside it the hierarchical all-reduce runs its stages in turn: the machine
reduce-scatter, the rack stage (on the job's NICs), the network stage (NICs, uplinks, spine),
the machine all-gather. On each link a data-parallel job demands, during each stage that
crosses it, the rate its flows there reach when the job runs alone (``perf.network``: its own
flows already share NICs and uplinks max-min), and nothing in the other stages. The engine
applies Dally's trace scaling to the communication time (``compute / profile.compute_s``) and
keeps these rates, i.e. it scales the bytes with it.

**Model-parallel jobs** (``parallelism == "model"``: GPT-1/2/3, DLRM of Cassini Table 4.2) get
six phases per iteration, as Fig. 4.1(d) (hybrid data/pipeline/tensor parallelism, Cassini
4.3.3): the compute time is cut into three equal Down phases, each followed by an Up phase:
forward activations over 30% of ``U`` at half the link's mean Up rate (Fig. 4.1(b)/(c):
pipeline activations and tensor-parallel traffic at about half the link), backward activation
gradients over 30% of ``U`` at the mean rate, and the data-parallel all-reduce over the last
40% of ``U`` at 1.375x the mean rate (0.3 x 0.5 + 0.3 x 1 + 0.4 x 1.375 = 1: bytes per
iteration are those of the stage model). Phase demands are capped at the link's capacity.

**Stretch** (:func:`link_stretch`). The jobs on one link are laid on their unified circle
(perimeter = LCM of the iteration times with ``geometry.unified_circle``'s quantum, cap and
perimeter fit; :func:`circle_layout`; the quantum is ``min(5 ms, shortest iteration / 16)`` so
each job spans at least 16 sectors), each job's phases scaled onto its quantised iteration and
rotated by its time shift (the engine's ``time_shift[job]``). With no shifts every rotation is
0: the phases are aligned, the fair-sharing outcome of HotNets'22. Between consecutive phase
boundaries the active flows share the link max-min fairly (:func:`water_level`; every flow
counts, several flows of one job included): a flow whose demand is above the level moves its
bytes ``demand / level`` times slower, so a light flow is not slowed at all (unlike a
proportional split). A job's extra Up time per iteration is the sum of those slow-downs over
its phases; its exposed communication grows by ``1 + extra / U`` on its worst link. When the
summed peak demand on a link is at most its capacity the factor is 1 and the circle is skipped
(fast path). The stretch is one-shot: computed from the uncontended profiles (as Cassini
profiles jobs in isolation), without iterating the longer phases back into the circle, and per
link (a flow slowed elsewhere does not free capacity here). It is exact for aligned identical
jobs and for fully interleaved ones; for partial overlaps it slightly underestimates (longer
phases would overlap a little more), which we accept for a stretch that costs one pass.
Factors within ``1e-9`` of 1 count as 1. The sweep over the circle runs compiled
(``perf.stretch_kernel``, numba) with the numpy path's arithmetic, bit for bit; so do the
circle's layout (``perf.layout_kernel``) and, for the engine, all the links of one update in
one call (:func:`batch_stretch`, ``perf.links_kernel``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.perf.geometry import (
    DEFAULT_MAX_SECTORS,
    DEFAULT_PRECISION_S,
    CommProfile,
    fit_perimeter,
)
from dlcluster_gym.perf.layout_kernel import RowTable
from dlcluster_gym.perf.layout_kernel import layout as _compiled_layout
from dlcluster_gym.perf.layout_kernel import warm as warm_layout
from dlcluster_gym.perf.links_kernel import factors as _batch_factors
from dlcluster_gym.perf.links_kernel import usage as _link_usage
from dlcluster_gym.perf.network import (
    PlacementTraffic,
    placement_overhead,
    placement_traffic,
    unique_small,
    warm_traffic,
)
from dlcluster_gym.perf.stretch_kernel import MAX_JOBS as _KERNEL_MAX_JOBS
from dlcluster_gym.perf.stretch_kernel import stretch as _stretch
from dlcluster_gym.perf.stretch_kernel import warm as warm_kernel
from dlcluster_gym.perf.traffic_kernel import group_by_link as _group_by_link
from dlcluster_gym.perf.traffic_kernel import signature as _signature_arrays
from dlcluster_gym.workload.models import ModelProfile

__all__ = [
    "UP_TEMPLATES",
    "CircleLayout",
    "LinkPhases",
    "LinkProfiles",
    "PlacementTraffic",
    "SharedLinks",
    "UpTemplate",
    "batch_stretch",
    "circle_layout",
    "comm_profile",
    "job_link_profiles",
    "link_phases",
    "link_stretch",
    "placement_signature",
    "placement_traffic",
    "sharing_can_bind",
    "up_phases",
    "water_level",
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
    """The links jobs share (NICs, rack uplinks, spine) of a cluster, and what placements
    send over them (``perf.network``)."""

    _CACHE = 8192  # placements remembered per instance (policies re-score the same ones)
    _PROFILE_CACHE = 65536  # (model, compute, placement signature) -> link profiles

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.capacity_Bps = cluster.link_capacity_Bps
        self.num_links = cluster.num_links
        self._traffic: dict[tuple, PlacementTraffic] = {}
        self._phase_shapes: dict[tuple, tuple[tuple[int, LinkPhases], ...]] = {}
        self._profiles: dict[tuple, _RankedProfiles] = {}
        self._shapes: dict[tuple, tuple[float, tuple[tuple[int, LinkPhases], ...]]] = {}
        self._signatures: dict[bytes, tuple[tuple, list[int], list[int]]] = {}
        if sharing_can_bind(cluster):
            warm_kernel()  # numba's caches load here, not on the first contended link
            warm_traffic(cluster)
            placement_signature(cluster, np.arange(min(2, cluster.num_gpus)))  # its kernel
            warm_layout()
            _warm_batch(self.capacity_Bps)

    def label(self, link: int) -> str:
        """'machine 3 NIC 1', 'rack 1 ToR uplink', 'rack 1 rail 2 uplink' or 'spine'."""
        return self.cluster.link_label(link)

    def links(self, gpus: Sequence[int] | np.ndarray) -> np.ndarray:
        """Link ids a placement's collective crosses (sorted): its NICs when it spans
        machines; also their uplinks and the spine when it spans racks."""
        c = self.cluster
        gpus = np.asarray(gpus, dtype=np.int64)
        nics = np.unique(c.gpu_nic[gpus])
        if np.unique(c.nic_machine[nics]).size <= 1:
            return np.zeros(0, dtype=np.int64)
        if np.unique(c.gpu_rack[gpus]).size <= 1:
            return nics
        extra = [c.spine_link] if c.spine_link >= 0 else []
        return np.unique(np.concatenate((nics, c.nic_uplink[nics], extra))).astype(np.int64)

    def profiles(
        self,
        profile: ModelProfile,
        compute_s: float,
        gpus: Sequence[int] | np.ndarray,
        comm_scale: float = 1.0,
    ) -> tuple[LinkProfiles, list[int]]:
        """(:func:`job_link_profiles`, :meth:`links` as a list) of a placement, cached by its
        :func:`placement_signature`: a job placed on other GPUs of the same structure reuses
        the profiles computed for the first one, on its own link ids (the same values, see
        :func:`placement_signature`). The dict and its profiles are shared: do not mutate."""
        gpus = np.asarray(gpus, dtype=np.int64)
        key, ids, crossed = self._signature(gpus)
        full = (profile, compute_s, key, comm_scale)
        ranked = self._profiles.get(full)
        if ranked is None:
            if len(self._profiles) >= self._PROFILE_CACHE:
                self._profiles.clear()
            shape = self._shapes.get((profile, key))
            if shape is None:  # compute-independent: shared by the jobs of this model
                if len(self._shapes) >= self._PROFILE_CACHE:
                    self._shapes.clear()
                fraction = placement_overhead(self.cluster, profile, gpus)
                phases = (
                    link_phases(placement_traffic(self.cluster, profile, gpus), profile.parallelism)
                    if fraction > 0.0
                    else {}
                )
                rank = {link: r for r, link in enumerate(ids)}
                shape = self._shapes[(profile, key)] = (
                    fraction,
                    tuple((rank[link], ph) for link, ph in phases.items()),
                )
            fraction, phased = shape
            if comm_scale != 1.0:
                fraction *= comm_scale
            caps = self.capacity_Bps[ids].tolist()
            ranked = self._profiles[full] = _RankedProfiles(
                profile, compute_s, fraction, tuple((r, caps[r], ph) for r, ph in phased)
            )
        return LinkProfiles(ranked, ids), crossed

    def _signature(self, gpus: np.ndarray) -> tuple[tuple, list[int], list[int]]:
        """:func:`placement_signature` of ``gpus`` (int64), with the link ids as a list,
        remembered per GPU list (the same GPU sets come back: swaps, preemption churn)."""
        sig = self._signatures.get(raw := gpus.tobytes())
        if sig is None:
            if len(self._signatures) >= self._PROFILE_CACHE:
                self._signatures.clear()
            key, link_ids, crossed = placement_signature(self.cluster, gpus)
            sig = self._signatures[raw] = (key, link_ids.tolist(), crossed)
        return sig

    def _cached(self, store: dict, profile: ModelProfile, gpus: np.ndarray, make) -> Any:
        """``make(gpus)`` for this placement, remembered in ``store`` (bounded)."""
        gpus = np.asarray(gpus, dtype=np.int64)
        key = (profile, np.sort(gpus).tobytes())
        got = store.get(key)
        if got is None:
            if len(store) >= self._CACHE:
                store.clear()
            got = store[key] = make(gpus)
        return got

    def traffic(self, profile: ModelProfile, gpus: np.ndarray) -> PlacementTraffic:
        """:func:`perf.network.placement_traffic` on this cluster (cached per placement)."""
        return self._cached(
            self._traffic, profile, gpus, lambda g: placement_traffic(self.cluster, profile, g)
        )

    def phases(self, profile: ModelProfile, gpus: np.ndarray) -> dict[int, LinkPhases]:
        """:func:`link_phases` of ``profile`` on ``gpus``, cached by the placement's
        :func:`placement_signature` like :meth:`profiles`: a placement of the same structure
        on other machines reuses the phases (the same floats) on its own link ids. A new
        dict per call; its phases are shared (immutable)."""
        gpus = np.asarray(gpus, dtype=np.int64)
        key, ids, _ = self._signature(gpus)
        shape = self._phase_shapes.get((profile, key))
        if shape is None:
            if len(self._phase_shapes) >= self._PROFILE_CACHE:
                self._phase_shapes.clear()
            phases = link_phases(self.traffic(profile, gpus), profile.parallelism)
            rank = {link: r for r, link in enumerate(ids)}
            shape = self._phase_shapes[(profile, key)] = tuple(
                (rank[link], ph) for link, ph in phases.items()
            )
        return {ids[r]: ph for r, ph in shape}


class _RankedProfiles:
    """:func:`job_link_profiles` of a placement signature, by link rank; each profile is
    built when first read (a Cassini candidate is mostly scored on the links it shares
    with others, or not at all when its score is cached)."""

    __slots__ = ("compute_s", "fraction", "links", "made", "profile")

    def __init__(
        self,
        profile: ModelProfile,
        compute_s: float,
        fraction: float,
        links: tuple[tuple[int, float, LinkPhases], ...],
    ) -> None:
        self.profile = profile
        self.compute_s = compute_s
        self.fraction = fraction
        self.links = links if fraction > 0.0 else ()  # (rank, capacity, phases) per link
        self.made: list[CommProfile | None] = [None] * len(self.links)

    def get(self, i: int) -> CommProfile:
        got = self.made[i]
        if got is None:
            _, cap, ph = self.links[i]
            got = _profiles_on_links(self.profile, self.compute_s, self.fraction, [(cap, ph)])[0]
            self.made[i] = got
        return got


class LinkProfiles(Mapping[int, CommProfile]):
    """Read-only ``{link id: CommProfile}`` of a placement (the value of
    :func:`job_link_profiles`, keys in the same order), whose profiles are built on first
    read and shared by every placement with the same signature."""

    __slots__ = ("_ids", "_index", "_ranked")

    def __init__(self, ranked: _RankedProfiles, ids: list[int]) -> None:
        self._ranked = ranked
        self._ids = ids
        self._index: dict[int, int] | None = None

    def _where(self) -> dict[int, int]:
        if self._index is None:
            ids = self._ids
            self._index = {ids[r]: i for i, (r, _, _) in enumerate(self._ranked.links)}
        return self._index

    def __getitem__(self, link: int) -> CommProfile:
        return self._ranked.get(self._where()[link])

    def __iter__(self) -> Iterator[int]:
        ids = self._ids
        return (ids[r] for r, _, _ in self._ranked.links)

    def __len__(self) -> int:
        return len(self._ranked.links)


def placement_signature(
    cluster: Cluster, gpus: Sequence[int] | np.ndarray
) -> tuple[tuple, np.ndarray, list[int]]:
    """(key, link ids, crossed links) of a placement: what its traffic and link profiles are a
    function of, with the ids relabelled, so that isomorphic placements share one key.

    ``link ids``: the sorted ids of the placement's NICs, their uplinks and the spine; the key
    names links by their rank in it. The key holds the machine group of the first GPU (its
    network parameters, ``perf.network.placement_net``), per NIC the placement uses (sorted
    by id) its link rank, its uplink's rank, the job's GPUs on it, the rank of its machine
    and of its rack, its index inside its machine and its machine's NIC count (the NIC shape,
    ``placement_nic_shape``), and the capacities of the ranked links (heterogeneous NICs and
    uplinks). :func:`placement_traffic`, :func:`link_phases` and :func:`job_link_profiles`
    only compare, sort, group and index by these ids (``np.unique``, ``argsort``,
    ``bincount`` in input order, capacities looked up by id), so an order-preserving
    relabelling changes none of their floats: equal keys give the same profiles on the
    respective link ids, bit for bit (``tests/test_contention_signature.py`` checks it).
    ``crossed links``: :meth:`SharedLinks.links` of the placement, as a list.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    if _signature_arrays is not None:
        return _compiled_signature(cluster, gpus)
    nics, _, _, counts = unique_small(cluster.gpu_nic[gpus])
    machine = cluster.nic_machine[nics]
    uplink = cluster.nic_uplink[nics]
    rack = cluster.machine_rack[machine]
    spine = cluster.spine_link
    ids = np.concatenate((nics, uplink, [spine])) if spine >= 0 else np.concatenate((nics, uplink))
    link_ids, _, rank, _ = unique_small(ids)
    m_ids, _, m_rank, _ = unique_small(machine)
    r_ids, _, r_rank, _ = unique_small(rack)
    key = (
        int(cluster.machine_group[cluster.gpu_machine[gpus[0]]]) if gpus.size else -1,
        nics.size,
        rank.tobytes(),
        counts.tobytes(),
        m_rank.tobytes(),
        r_rank.tobytes(),
        cluster.nic_local[nics].tobytes(),
        cluster.machine_num_nics[machine].tobytes(),
        cluster.link_capacity_Bps[link_ids].tobytes(),
    )
    if m_ids.size <= 1:
        crossed: list[int] = []
    elif r_ids.size <= 1:
        crossed = nics.tolist()
    else:
        crossed = link_ids.tolist()
    return key, link_ids, crossed


def _compiled_signature(cluster: Cluster, gpus: np.ndarray) -> tuple[tuple, np.ndarray, list[int]]:
    """:func:`placement_signature` with its arrays from ``perf.traffic_kernel.signature``
    (one compiled call; the same values and dtypes, so the same key)."""
    assert _signature_arrays is not None
    c = cluster
    nics, counts, rank, m_rank, r_rank, local, num_nics, caps, link_ids, n_m, n_r = (
        _signature_arrays(
            gpus, c.gpu_nic, c.nic_machine, c.nic_uplink, c.machine_rack, c.nic_local,
            c.machine_num_nics, c.link_capacity_Bps, c.spine_link,
        )
    )  # fmt: skip
    key = (
        int(c.machine_group[c.gpu_machine[gpus[0]]]) if gpus.size else -1,
        nics.size,
        rank.tobytes(),
        counts.tobytes(),
        m_rank.tobytes(),
        r_rank.tobytes(),
        local.tobytes(),
        num_nics.tobytes(),
        caps.tobytes(),
    )
    crossed = [] if n_m <= 1 else nics.tolist() if n_r <= 1 else link_ids.tolist()
    return key, link_ids, crossed


def sharing_can_bind(cluster: Cluster) -> bool:
    """False when no link of ``cluster`` can ever be over-subscribed, whatever runs on it:
    every NIC serves one GPU (so one job), each rack (rail) uplink carries at least the NICs
    below it, and no spine link is modelled. Then sharing changes no iteration time and the
    engine skips the link bookkeeping (the Dally presets)."""
    one_gpu_per_nic = bool((np.bincount(cluster.gpu_nic, minlength=cluster.num_nics) == 1).all())
    return not (
        one_gpu_per_nic
        and cluster.config.rack_uplink_oversubscription <= 1.0
        and cluster.spine_link < 0
    )


@dataclass(frozen=True, eq=False)
class LinkPhases:
    """A job's demand on one link in one iteration of length ``T`` with Up time ``U``.

    Phase ``k`` starts at ``down[k] * (T - U) + up[k] * U``, lasts ``length[k] * U``, and the
    job's ``flows[k]`` flows on the link demand ``rate[k]`` bytes/s together.
    """

    down: np.ndarray
    up: np.ndarray
    length: np.ndarray
    rate: np.ndarray
    flows: np.ndarray

    def __post_init__(self) -> None:
        # Packed once per placement (``SharedLinks`` caches these): ``link_stretch`` runs on
        # every start and finish and concatenates the jobs' rows in one call.
        rows = (self.down, self.up, self.length, self.rate, self.flows)
        packed = np.array(rows, dtype=np.float64).reshape(5, -1)
        packed.setflags(write=False)
        object.__setattr__(self, "packed", packed)
        object.__setattr__(self, "peak", float(self.rate.max()) if self.rate.size else 0.0)

    packed: np.ndarray = field(init=False, repr=False)
    """Rows down, up, length, rate, flows (5 x phases), read-only."""
    peak: float = field(init=False)
    """Highest phase demand (bytes/s)."""

    @classmethod
    def from_packed(cls, packed: np.ndarray, peak: float) -> LinkPhases:
        """Phases whose rows are ``packed`` (5 x phases, read-only, not copied) and whose
        highest demand is ``peak`` (``link_phases`` builds all links of a placement at once)."""
        self = object.__new__(cls)
        down, up, length, rate, flows = packed
        self.__dict__.update(  # one update for the frozen fields (a new placement's links)
            down=down, up=up, length=length, rate=rate, flows=flows, packed=packed, peak=peak
        )
        return self

    @property
    def carried(self) -> float:
        """Bytes per Up second (the rates weighted by phase length)."""
        return float((self.length * self.rate).sum())


def link_phases(traffic: PlacementTraffic, parallelism: str) -> dict[int, LinkPhases]:
    """Per link a placement crosses, the job's phases on it (module docstring).

    Data-parallel jobs: one phase per stage that crosses the link, where the stage sits in the
    Up phase, at the stage's own rate. Model-parallel jobs: the Up template of
    :data:`UP_TEMPLATES` at the link's mean Up rate (its bytes / the communication time).
    """
    out: dict[int, LinkPhases] = {}
    if traffic.links.size == 0:
        return out
    if parallelism == "data" and _group_by_link is not None:  # compiled, the same arrays
        packed, cuts, ids, peaks = _group_by_link(
            traffic.links, traffic.start, traffic.length, traffic.rate, traffic.flows
        )
        packed.setflags(write=False)
        bounds = cuts.tolist()
        for k, (link, peak) in enumerate(zip(ids.tolist(), peaks.tolist(), strict=True)):
            out[link] = LinkPhases.from_packed(packed[:, bounds[k] : bounds[k + 1]], peak)
        return out
    order = np.argsort(traffic.links, kind="stable")
    ids = traffic.links[order]
    change = np.ones(ids.size, dtype=bool)
    np.not_equal(ids[1:], ids[:-1], out=change[1:])
    cuts = np.flatnonzero(change)
    bounds = [*cuts.tolist(), ids.size]
    if parallelism == "data":  # every link's rows packed at once, as views of one array
        packed = np.array(
            (np.ones(order.size), traffic.start[order], traffic.length[order],
             traffic.rate[order], traffic.flows[order]), dtype=np.float64,
        )  # fmt: skip
        packed.setflags(write=False)
        peaks = np.maximum.reduceat(packed[3], cuts).tolist()
        link_ids = ids[cuts].tolist()
        for k, (i, j) in enumerate(itertools.pairwise(bounds)):
            out[link_ids[k]] = LinkPhases.from_packed(packed[:, i:j], peaks[k])
        return out
    tpl = UP_TEMPLATES[parallelism]
    for i, j in itertools.pairwise(bounds):
        rows = order[i:j]
        link = int(ids[i])
        mean = float(traffic.bytes_per_iter[rows].sum()) / traffic.comm_s
        k = len(tpl.level)
        out[link] = LinkPhases(
            np.asarray(tpl.down), np.asarray(tpl.up), np.asarray(tpl.share),
            np.asarray(tpl.level) * mean, np.full(k, float(traffic.flows[rows].max())),
        )  # fmt: skip
    return out


def job_link_profiles(
    links: SharedLinks,
    profile: ModelProfile,
    compute_s: float,
    gpus: Sequence[int] | np.ndarray,
    comm_scale: float = 1.0,
) -> dict[int, CommProfile]:
    """A job's uncontended demand on each shared link its placement crosses (bytes/s).

    The same phases the engine shares (:func:`link_phases`): iteration = compute + exposed
    communication, Up = communication / (1 - overlap), phase demands capped at the link's
    capacity. ``compute_s`` is the job's compute seconds per iteration on ``gpus``; the
    exposed communication is the placement's overhead x ``comm_scale`` x ``compute_s``
    (``comm_scale`` = GPUs / demand for a job on another count than its demand: its
    gradient, and so its all-reduce, keeps its size; the engine's ``_comm_basis``). For
    Cassini-style policies that score candidate placements (``baselines/cassini.py``).
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    fraction = placement_overhead(links.cluster, profile, gpus)
    if comm_scale != 1.0:
        fraction *= comm_scale
    if fraction <= 0.0:
        return {}
    phases = links.phases(profile, gpus)
    caps = [(float(links.capacity_Bps[link]), ph) for link, ph in phases.items()]
    return dict(zip(phases, _profiles_on_links(profile, compute_s, fraction, caps), strict=True))


def _profiles_on_links(
    profile: ModelProfile,
    compute_s: float,
    fraction: float,
    links: list[tuple[float, LinkPhases]],
) -> list[CommProfile]:
    """:func:`job_link_profiles` of a placement whose exposed communication is ``fraction``
    of the compute time, one profile per (link capacity, job phases on the link)."""
    if fraction <= 0.0:
        return []
    overlap = profile.comm.overlap
    comm = fraction * compute_s
    iteration = compute_s + comm
    up = min(comm / (1.0 - overlap), iteration)
    out = []
    for cap, ph in links:
        starts = ph.down * (iteration - up) + ph.up * up
        phases = [
            (float(s), float(d), float(min(v, cap)))
            for s, d, v in zip(starts, ph.length * up, ph.rate, strict=True)
        ]
        out.append(cap_overlaps(CommProfile.multi_phase(iteration, phases, profile.name), cap))
    return out


def cap_overlaps(profile: CommProfile, capacity: float) -> CommProfile:
    """``profile`` with the summed demand of its overlapping phases capped at ``capacity``.

    Phases can meet on one link: back-to-back stages or pipeline boundaries through one NIC,
    each at line rate, whose rounded end and start overlap on the circle (a data-parallel
    job's stages on ``a100-4nic-tor3``, a plan's boundaries on ``crius-philly-1280gpu``), or
    operators that start together on a link (every stage's all-reduce starts after the
    flush). A link carries at most its capacity, in isolation too (Cassini's geometry rejects
    a profile whose own peak exceeds the link). Unchanged when its peak fits; otherwise one
    phase per interval between phase boundaries."""
    if profile.peak_demand <= capacity:
        return profile
    phases = profile.phases
    cuts = sorted({t for p in phases for t in (p.start, p.end)})
    out = []
    for a, b in itertools.pairwise(cuts):
        level = sum(p.demand for p in phases if p.start <= a and b <= p.end)
        if level > 0.0:
            out.append((a, b - a, min(level, capacity)))
    return CommProfile.multi_phase(profile.iteration_time, out, profile.name)


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
    times = np.asarray(iteration_s, dtype=np.float64).tolist()
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


def link_stretch(
    iteration_s: Sequence[float] | np.ndarray,
    up_s: Sequence[float] | np.ndarray,
    shift_s: Sequence[float] | np.ndarray,
    phases: Sequence[LinkPhases],
    capacity_Bps: float,
    *,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> np.ndarray:
    """Per job, the factor by which sharing one link stretches its communication (Up) time.

    One entry per job on the link: its uncontended iteration time, Up time, time shift and
    phases on the link. The jobs are laid on their unified circle; between consecutive phase
    boundaries the flows active on the link share it max-min fairly (water-filling: a flow
    gets its demand or the common level, whichever is lower); a flow above the level moves its
    bytes ``demand / level`` times slower. A job's factor is ``1 + extra / U``, the extra Up
    seconds per iteration over ``U``. Returns ones when the summed peak demand fits.
    """
    it = np.asarray(iteration_s, dtype=np.float64)
    n = it.size
    if n < 2:
        return np.ones(n)
    cap = float(capacity_Bps)
    if sum([min(ph.peak, cap) for ph in phases]) <= cap * (1.0 + _RTOL):
        return np.ones(n)  # fast path: the link is never over-subscribed
    up = np.minimum(np.maximum(np.asarray(up_s, dtype=np.float64), 0.0), it)
    shift = np.asarray(shift_s, dtype=np.float64)
    sector_s, perimeter_sectors, sectors = _layout(it, max_sectors)
    perimeter = perimeter_sectors * sector_s
    if _stretch is not None and n <= _KERNEL_MAX_JOBS:  # compiled sweep, same arithmetic
        return _stretch(
            np.concatenate([ph.packed for ph in phases], axis=1),
            np.array([ph.packed.shape[1] for ph in phases], dtype=np.int64),
            it, up, shift % it, sectors, sector_s, perimeter_sectors, perimeter,
            cap, _RTOL,
        )  # fmt: skip
    packed = np.concatenate([ph.packed for ph in phases], axis=1)
    job_k = np.repeat(np.arange(n), [ph.packed.shape[1] for ph in phases])
    down, upf, share, rate, flows_k = packed
    dm = np.minimum(rate, cap) / cap
    fl = np.maximum(flows_k, 1.0)
    keep = (dm > 0) & (share > 0)
    if not keep.all():
        job_k, down, upf, share, dm, fl = (a[keep] for a in (job_k, down, upf, share, dm, fl))
    length = sectors * sector_s
    scale_j = length / it  # each job's pattern is stretched onto its quantised iteration
    scale = scale_j[job_k]
    t_k, u_k = it[job_k], up[job_k]
    st = (down * (t_k - u_k) + upf * u_k + (shift % it)[job_k]) * scale
    du = share * u_k * scale
    reps_j = perimeter_sectors // sectors
    reps = reps_j[job_k]
    row = np.repeat(np.arange(job_k.size), reps)
    nth = np.arange(row.size) - np.repeat(np.cumsum(reps) - reps, reps)
    starts = np.fmod(st[row] + length[job_k][row] * nth, perimeter)
    ends = starts + du[row]
    dem, flo, who = dm[row], fl[row], job_k[row]
    wrap = ends > perimeter  # phases that wrap past the perimeter continue at 0
    if wrap.any():
        lo = np.concatenate((starts, np.zeros(int(wrap.sum()))))
        hi = np.concatenate((np.minimum(ends, perimeter), ends[wrap] - perimeter))
        dem = np.concatenate((dem, dem[wrap]))
        flo = np.concatenate((flo, flo[wrap]))
        who = np.concatenate((who, who[wrap]))
    else:
        lo, hi = starts, np.minimum(ends, perimeter)
    points = np.concatenate((lo, hi, [0.0, perimeter]))
    points.sort()
    points = points[np.concatenate(([True], points[1:] != points[:-1]))]
    i_lo = np.searchsorted(points, lo)
    i_hi = np.searchsorted(points, hi)
    m = points.size
    at = np.concatenate((i_lo * n + who, i_hi * n + who))
    demand = np.bincount(at, np.concatenate((dem, -dem)), m * n).reshape(m, n)
    flows = np.bincount(at, np.concatenate((flo, -flo)), m * n).reshape(m, n)
    demand = np.cumsum(demand, axis=0)[:-1]
    flows = np.rint(np.cumsum(flows, axis=0)[:-1] * 1e6) / 1e6
    demand[flows <= 0] = 0.0
    over = demand.sum(axis=1) > 1.0 + _RTOL
    if not over.any():
        return np.ones(n)
    seg = np.diff(points)
    d_all, f_all = demand[over], flows[over]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_flow = np.where(f_all > 0, d_all / f_all, np.inf)
        level = water_level(per_flow, f_all, 1.0)
        slow = np.where(f_all > 0, np.maximum(per_flow / level[:, None] - 1.0, 0.0), 0.0)
        extra_q = (slow * seg[over][:, None]).sum(axis=0)  # quantised seconds over the circle
        extra = extra_q / scale_j / reps_j  # seconds per iteration
        out = np.where(up > 0, 1.0 + extra / up, 1.0)
    out[out < 1.0 + _RTOL] = 1.0
    return out


def batch_stretch(
    bounds: np.ndarray,
    capacity_Bps: np.ndarray,
    compute_s: np.ndarray,
    comm_s: np.ndarray,
    up_s: np.ndarray,
    shift_s: np.ndarray,
    carry_Bps: np.ndarray,
    phases: Sequence[LinkPhases],
    *,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`link_stretch` then, where a factor exceeds 1, :func:`conserve_capacity`, for a
    batch of links at once (compiled, ``perf.links_kernel``; the same floats).

    Link ``l``'s jobs are entries ``bounds[l]:bounds[l + 1]`` of the per-(link, job) inputs:
    compute and uncontended exposed communication per iteration (their sum is the iteration
    time), Up time, time shift, carried bytes per Up second and phases on the link. Returns
    (factors per entry, per link a status: 0 not done, to be computed one link at a time;
    1 no factor above 1; 2 some), or None without numba.
    """
    if _batch_factors is None:
        return None
    it = compute_s + comm_s
    up = np.minimum(np.maximum(up_s, 0.0), it)
    counts = np.array([ph.packed.shape[1] for ph in phases], dtype=np.int64)
    table = _row_table(max_sectors)
    return _batch_factors(
        bounds, _phase_bounds(counts, bounds), capacity_Bps, it, up, shift_s % it, compute_s,
        comm_s, up_s, carry_Bps, np.array([ph.peak for ph in phases]), counts,
        np.concatenate([ph.packed for ph in phases], axis=1), table.rows, table.slot,
        table.used, max_sectors, DEFAULT_PRECISION_S, MIN_SECTORS_PER_ITERATION, _RTOL,
    )  # fmt: skip


def _warm_batch(capacity_Bps: np.ndarray) -> None:
    """Load :func:`batch_stretch`'s kernel and the engine's link-usage kernel (numba's
    cache) for the engine's argument types: two jobs over-subscribing one link."""
    ph = LinkPhases(*(np.ones(1) for _ in range(5)))
    two = np.ones(2)
    batch_stretch(np.array([0, 2]), np.ones(1), two, two, two, two * 0.0, two, [ph, ph])
    if _link_usage is not None:
        _link_usage(np.zeros(capacity_Bps.size, dtype=np.int64), two[:0].copy(), capacity_Bps)


def _phase_bounds(counts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per link, where its jobs' phase columns start in the concatenation (and the end)."""
    ends = np.concatenate(([0], np.cumsum(counts)))
    return ends[bounds]


def conserve_capacity(
    stretch: np.ndarray,
    compute_s: np.ndarray,
    comm_s: np.ndarray,
    up_s: np.ndarray,
    carry_Bps: np.ndarray,
    capacity_Bps: float,
) -> np.ndarray:
    """Raise a link's stretch factors until its time-averaged load fits its capacity.

    :func:`link_stretch` shares the link among the jobs' *unstretched* phases; once the slowed
    jobs' Up phases are longer they overlap more, and where the summed demand is about twice
    the capacity the stretched jobs can still carry more bytes per second than the link
    holds (up to 16 % over in random runs with 2:1 and 4:1 ToR uplinks). A
    link cannot carry more than its capacity on average, so when
    ``sum_j carry_j * up_j / (compute_j + comm_j * f_j) > capacity`` the slowed jobs'
    extra factors ``f_j - 1`` are scaled by one common ``k > 1`` (bisection to 1e-12) until
    the load equals the capacity. Jobs the link does not slow keep factor 1; they carry at
    most their max-min share, so the slowed jobs alone make up the excess. Our choice where
    the papers are silent: a common scale keeps the max-min ratios between the slowed jobs'
    extra times. A job's iteration uses its worst link's factor, which is at least this
    link's, so the load on this link is then at most its capacity. Returns ``stretch``
    itself when the load already fits.
    """
    f = np.asarray(stretch, dtype=np.float64)
    slow = f > 1.0
    if not slow.any():
        return f
    bytes_it = carry_Bps * up_s  # bytes per iteration on this link

    def load(k: float) -> float:
        return float((bytes_it / (compute_s + comm_s * (1.0 + k * (f - 1.0)))).sum())

    cap = float(capacity_Bps)
    if load(1.0) <= cap * (1.0 + _RTOL):
        return f
    lo, hi = 1.0, 2.0
    while load(hi) > cap and hi < 1e12:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if load(mid) > cap:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return np.where(slow, 1.0 + hi * (f - 1.0), f)


Layout = tuple[float, int, np.ndarray]
"""(seconds per sector, perimeter in sectors, each job's iteration sectors) of a circle."""

_LAYOUTS: dict[tuple[int, tuple[float, ...]], Layout] = {}
_QUANTISED: dict[tuple[float, int, tuple[int, ...]], Layout] = {}


def _layout(iteration_s: np.ndarray, max_sectors: int) -> Layout:
    """``circle_layout`` at the engine's precision, remembered per tuple of iteration times
    (the same jobs share several links: each NIC of a machine, its uplink)."""
    key = (max_sectors, iteration_s.tobytes())
    got = _LAYOUTS.get(key)
    if got is None:
        if len(_LAYOUTS) >= 4096:
            _LAYOUTS.clear()
        got = _LAYOUTS[key] = _new_layout(iteration_s, max_sectors)
    return got


@cache
def _row_table(max_sectors: int) -> RowTable:
    return RowTable(max_sectors)


def _new_layout(iteration_s: np.ndarray, max_sectors: int) -> Layout:
    """:func:`_quantised_layout`, compiled (``perf.layout_kernel``, the same numbers) where
    numba is available."""
    if _compiled_layout is None:
        return _quantised_layout(iteration_s, max_sectors)
    table = _row_table(max_sectors)
    q, perimeter, sectors = _compiled_layout(
        iteration_s, max_sectors, DEFAULT_PRECISION_S, MIN_SECTORS_PER_ITERATION,
        table.rows, table.slot, table.used,
    )  # fmt: skip
    if perimeter < 0:
        return _quantised_layout(iteration_s, max_sectors)
    return q, perimeter, sectors


def _quantised_layout(iteration_s: np.ndarray, max_sectors: int) -> Layout:
    """``circle_layout`` at the engine's precision, with its operations: the quantum and the
    quantised times (again with a coarser quantum when one exceeds the cap), then the
    perimeter and the fitted sectors, a function of (quantum, quantised times) shared by the
    times that quantise alike. No times: an empty circle of one sector."""
    if iteration_s.size == 0:
        return DEFAULT_PRECISION_S, 1, np.zeros(0, dtype=np.int64)
    times = iteration_s.tolist()
    q = min(DEFAULT_PRECISION_S, min(times) / MIN_SECTORS_PER_ITERATION)  # _precision
    ns = _quantise(iteration_s, times, q)
    if max(ns) > max_sectors:  # one iteration alone is longer than the cap
        q *= math.ceil(max(ns) / max_sectors)
        ns = _quantise(iteration_s, times, q)
    key = (q, max_sectors, ns)
    got = _QUANTISED.get(key)
    if got is None:
        if len(_QUANTISED) >= 4096:
            _QUANTISED.clear()
        perimeter = math.lcm(*ns)
        fitted = ns
        if perimeter > max_sectors:
            perimeter, chosen, _ = fit_perimeter(ns, max_sectors)
            fitted = tuple([chosen[n] for n in ns])
        got = _QUANTISED[key] = (q, perimeter, np.array(fitted, dtype=np.int64))
    return got


def _quantise(iteration_s: np.ndarray, times: list[float], q: float) -> tuple[int, ...]:
    """``max(1, floor(t / q + 0.5))`` per time (``circle_layout``); numpy for many jobs
    (the same float operations)."""
    if len(times) <= 16:
        return tuple([max(1, math.floor(t / q + 0.5)) for t in times])
    return tuple(np.maximum(np.floor(iteration_s / q + 0.5), 1.0).astype(np.int64).tolist())


def water_level(per_flow: np.ndarray, flows: np.ndarray, capacity: float) -> np.ndarray:
    """Max-min fair level per row: flows of demand ``per_flow[i, j]`` (``flows[i, j]`` of
    them, ``inf`` demand where none) share ``capacity``; each gets ``min(demand, level)``.
    Rows must be over-subscribed (summed demand above the capacity)."""
    order = np.argsort(per_flow, axis=1, kind="stable")
    rows = np.arange(per_flow.shape[0])[:, None]
    d = per_flow[rows, order]
    f = flows[rows, order]
    fin = np.where(np.isfinite(d), d, 0.0)
    before = np.cumsum(fin * f, axis=1) - fin * f  # demand of the flows below position i
    after = np.cumsum(f[:, ::-1], axis=1)[:, ::-1]  # flows at positions >= i
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = (capacity - before) / after
    ok = (after > 0) & (lam <= d * (1.0 + 1e-12))
    first = np.argmax(ok, axis=1)
    return lam[np.arange(lam.shape[0]), first]


def profile_phases(profile: CommProfile) -> tuple[float, float, LinkPhases]:
    """``(iteration, Up time, phases)`` of an isolated :class:`CommProfile` (for instance a
    Cassini/HotNets testbed profile), so that :func:`link_stretch` can share it with others."""
    t = profile.iteration_time
    ups = sorted((p for p in profile.phases if p.demand > 0), key=lambda p: p.start)
    up = sum(p.duration for p in ups)
    down = t - up
    rows: list[tuple[float, float, float, float]] = []
    up_before = 0.0
    for p in ups:
        down_before = p.start - up_before
        rows.append((down_before / down if down > 0 else 1.0, up_before / up, p.duration / up,
                     p.demand))  # fmt: skip
        up_before += p.duration
    a = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    return t, up, LinkPhases(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.ones(len(rows)))
