"""Cluster topology: GPU -> machine -> rack -> spine, as numpy index arrays plus a networkx graph.

Racks are numbered across machine groups in config order; machines and GPUs are numbered rack
by rack. The graph (GPU, machine, ToR and spine nodes; links with capacities) is built lazily
because the engine's hot path only needs the index arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from functools import cached_property

import networkx as nx
import numpy as np

from dlcluster_gym.cluster.catalog import Interconnect
from dlcluster_gym.config import ClusterConfig, load_cluster

# A placement's shape: per rack, the GPU counts of its machines; both levels sorted descending.
# Two placements with the same shape have the same communication cost (given the same links).
Shape = tuple[tuple[int, ...], ...]


class Tier(IntEnum):
    """Consolidation level of a placement (Dally 3): the widest tier its GPUs span."""

    MACHINE = 0
    RACK = 1
    NETWORK = 2

    @property
    def label(self) -> str:
        return self.name.lower()


class Cluster:
    """Immutable description of the hardware, with fast index arrays."""

    def __init__(self, config: ClusterConfig | str | dict) -> None:
        self.config = load_cluster(config)
        gpu_machine: list[int] = []
        machine_rack: list[int] = []
        machine_group: list[int] = []
        machine_gpus: list[int] = []
        rack = 0
        for gi, group in enumerate(self.config.groups):
            for _ in range(group.racks):
                for _ in range(group.machines_per_rack):
                    m = len(machine_rack)
                    machine_rack.append(rack)
                    machine_group.append(gi)
                    machine_gpus.append(group.gpus_per_machine)
                    gpu_machine.extend([m] * group.gpus_per_machine)
                rack += 1
        self.gpu_machine = np.asarray(gpu_machine, dtype=np.int64)
        self.machine_rack = np.asarray(machine_rack, dtype=np.int64)
        self.machine_group = np.asarray(machine_group, dtype=np.int64)
        self.machine_num_gpus = np.asarray(machine_gpus, dtype=np.int64)
        self.machine_first_gpu = np.concatenate(([0], np.cumsum(self.machine_num_gpus)[:-1]))
        self.gpu_rack = self.machine_rack[self.gpu_machine]
        self.num_gpus = int(self.gpu_machine.size)
        self.num_machines = int(self.machine_rack.size)
        self.num_racks = rack
        self.rack_first_machine = np.searchsorted(self.machine_rack, np.arange(rack))
        self.rack_num_machines = np.bincount(self.machine_rack, minlength=rack)
        self.rack_num_gpus = np.bincount(
            self.machine_rack, weights=self.machine_num_gpus, minlength=rack
        ).astype(np.int64)
        self.group_names = tuple(g.name for g in self.config.groups)
        self.machine_gpu_type = tuple(self.config.groups[g].gpu_type for g in machine_group)
        tiers = self.config.tiers
        self.rack_link: Interconnect = tiers.rack.resolve()
        self.network_link: Interconnect = tiers.network.resolve()
        self.group_machine_link: tuple[Interconnect, ...] = tuple(
            (g.machine_link or tiers.machine).resolve() for g in self.config.groups
        )
        self.max_gpus_per_machine = int(self.machine_num_gpus.max())
        self._init_nics(machine_group)
        self._init_cpu_resources(machine_group)
        self._init_gpu_types()
        self.max_gpus_per_rack = int(self.rack_num_gpus.max())
        # Cumulative GPUs of the largest machines first: how few machines can hold n GPUs.
        self.machines_by_size_cumsum = np.cumsum(np.sort(self.machine_num_gpus)[::-1])
        # When every machine has the same GPU count, GPU ids form a grid: ``gpu_grid[m]`` the
        # ids of machine m (placement search takes GPUs by whole rows); None otherwise.
        same = bool((self.machine_num_gpus == self.max_gpus_per_machine).all())
        # (first machine, machine count) of each rack, as Python ints
        self.rack_machine_span: tuple[tuple[int, int], ...] = tuple(
            zip(self.rack_first_machine.tolist(), self.rack_num_machines.tolist(), strict=True)
        )
        self.gpu_grid: np.ndarray | None = (
            np.arange(self.num_gpus, dtype=np.int64).reshape(self.num_machines, -1)
            if same
            else None
        )

    def _init_nics(self, machine_group: list[int]) -> None:
        """NICs and the links the network model shares (``perf.network``).

        Link ids: NIC ``i`` -> ``i`` (machines in order, their NICs in order); then the rack
        uplinks, one per rack (ToR to spine) or, with ``rail_optimized``, one per (rack, rail)
        (rail switch ``k`` of a rack to the spine, ``k`` = the NIC's index in its machine);
        then, when ``spine_oversubscription > 1``, one spine link every cross-rack flow
        crosses. Capacities in bytes/s: a NIC its speed x ``transport_efficiency``; an uplink
        the NIC capacity below it / ``rack_uplink_oversubscription``; the spine the summed
        uplinks / ``spine_oversubscription``.
        """
        cfg = self.config
        eff = cfg.transport_efficiency
        rack_bw = self.rack_link.bandwidth_Bps
        nic_machine: list[int] = []
        nic_local: list[int] = []
        nic_bw: list[float] = []
        gpu_nic: list[int] = []
        for m, gi in enumerate(machine_group):
            g = cfg.groups[gi]
            if cfg.machine_uplink_gbps is not None:
                count, speed, local = 1, cfg.machine_uplink_gbps * 1e9 / 8.0, None
            else:
                count = g.num_nics(max(g.gpus_per_machine, 1))
                speed = g.nic_gbps * 1e9 / 8.0 if g.nic_gbps is not None else rack_bw
                local = g.gpu_nic(count)
            first = len(nic_machine)
            nic_machine.extend([m] * count)
            nic_local.extend(range(count))
            nic_bw.extend([speed] * count)
            n_gpus = int(self.machine_num_gpus[m])
            gpu_nic.extend(first + (local[i] if local else 0) for i in range(n_gpus))
        self.nic_machine = np.asarray(nic_machine, dtype=np.int64)
        self.nic_local = np.asarray(nic_local, dtype=np.int64)
        self.nic_Bps = np.asarray(nic_bw, dtype=np.float64) * eff
        self.gpu_nic = np.asarray(gpu_nic, dtype=np.int64)
        self.num_nics = int(self.nic_machine.size)
        self.machine_num_nics = np.bincount(self.nic_machine, minlength=self.num_machines)
        nic_rack = self.machine_rack[self.nic_machine]
        rails = int(self.machine_num_nics.max()) if cfg.rail_optimized else 1
        self.num_rails = rails
        uplink_of_nic = self.num_nics + nic_rack * rails + (self.nic_local if rails > 1 else 0)
        n_up = self.num_racks * rails
        up_cap = np.bincount(
            uplink_of_nic - self.num_nics, weights=self.nic_Bps, minlength=n_up
        ) / float(cfg.rack_uplink_oversubscription)
        caps = [self.nic_Bps, up_cap]
        self.spine_link = -1
        if cfg.spine_oversubscription > 1.0:
            self.spine_link = self.num_nics + n_up
            caps.append(np.array([up_cap.sum() / cfg.spine_oversubscription]))
        self.nic_uplink = uplink_of_nic
        self.gpu_uplink = uplink_of_nic[self.gpu_nic]
        self.link_capacity_Bps = np.concatenate(caps)
        self.num_links = int(self.link_capacity_Bps.size)
        self.machine_nic_total_Bps = np.bincount(
            self.nic_machine, weights=self.nic_Bps, minlength=self.num_machines
        )
        for a in (self.nic_machine, self.nic_local, self.nic_Bps, self.gpu_nic, self.nic_uplink,
                  self.gpu_uplink, self.link_capacity_Bps, self.machine_num_nics,
                  self.machine_nic_total_Bps):  # fmt: skip
            a.setflags(write=False)

    def link_label(self, link: int) -> str:
        """'machine 3 NIC 1', 'rack 2 ToR uplink', 'rack 2 rail 5 uplink' or 'spine'."""
        link = int(link)
        if link < self.num_nics:
            return f"machine {self.nic_machine[link]} NIC {self.nic_local[link]}"
        if link == self.spine_link:
            return "spine"
        rack, rail = divmod(link - self.num_nics, self.num_rails)
        return (
            f"rack {rack} rail {rail} uplink" if self.num_rails > 1 else f"rack {rack} ToR uplink"
        )

    def _init_cpu_resources(self, machine_group: list[int]) -> None:
        """Per-machine CPU-side resources, for parameter-server jobs (``perf.ps``).

        ``machine_cores``: physical cores (what the MU bottleneck depends on);
        ``machine_vcpus``: allocatable vCPUs (Kubernetes "allocatable", default all cores);
        ``machine_memory_gb``; ``machine_nic_Bps``: the machine's NIC capacity (all its NICs;
        one rack-tier port for a machine without GPUs or NIC fields).
        """
        groups = [self.config.groups[g] for g in machine_group]
        self.machine_cores = np.array([g.cpus_per_machine for g in groups], dtype=np.float64)
        self.machine_vcpus = np.array(
            [g.allocatable_cpus_per_machine or g.cpus_per_machine for g in groups],
            dtype=np.float64,
        )
        self.machine_memory_gb = np.array([g.memory_gb_per_machine for g in groups])
        nic = [
            self.machine_uplink_Bps(m) or self.rack_link.bandwidth_Bps for m in range(len(groups))
        ]
        self.machine_nic_Bps = np.asarray(nic, dtype=np.float64)
        for a in (self.machine_cores, self.machine_vcpus, self.machine_memory_gb):
            a.setflags(write=False)
        self.machine_nic_Bps.setflags(write=False)

    def _init_gpu_types(self) -> None:
        """GPU types as small integers: ``gpu_types`` (names, in order of first appearance),
        ``machine_type`` and ``gpu_type_idx`` (index into ``gpu_types`` per machine / GPU),
        ``type_gpus[k]`` (GPU ids of type k) and ``type_num_gpus``. A job of the parallelism
        model runs on one type at a time (Crius 8.1)."""
        names: list[str] = []
        idx = []
        for t in self.machine_gpu_type:
            if t not in names:
                names.append(t)
            idx.append(names.index(t))
        self.gpu_types: tuple[str, ...] = tuple(names)
        self.machine_type = np.asarray(idx, dtype=np.int64)
        self.gpu_type_idx = self.machine_type[self.gpu_machine]
        self.type_gpus = tuple(np.flatnonzero(self.gpu_type_idx == k) for k in range(len(names)))
        self.type_num_gpus = np.array([g.size for g in self.type_gpus], dtype=np.int64)
        self.type_machines = tuple(
            np.flatnonzero((self.machine_type == k) & (self.machine_num_gpus > 0))
            for k in range(len(names))
        )
        self.heterogeneous = int((self.type_num_gpus > 0).sum()) > 1
        for a in (self.machine_type, self.gpu_type_idx, self.type_num_gpus, *self.type_gpus,
                  *self.type_machines):  # fmt: skip
            a.setflags(write=False)

    @property
    def name(self) -> str:
        return self.config.name

    def machine_gpus(self, machine: int) -> np.ndarray:
        """GPU ids of one machine."""
        first = int(self.machine_first_gpu[machine])
        return np.arange(first, first + int(self.machine_num_gpus[machine]))

    def rack_machines(self, rack: int) -> np.ndarray:
        """Machine ids of one rack."""
        first = int(self.rack_first_machine[rack])
        return np.arange(first, first + int(self.rack_num_machines[rack]))

    def links_for_group(self, group: int) -> tuple[Interconnect, Interconnect, Interconnect]:
        """(machine, rack, network) links seen by a job on machines of ``group``."""
        return (self.group_machine_link[group], self.rack_link, self.network_link)

    def check_gpus(self, gpus: Sequence[int]) -> None:
        """Raise IndexError naming the first GPU id that does not exist."""
        for g in gpus:
            if not 0 <= int(g) < self.num_gpus:
                raise IndexError(
                    f"GPU {g} does not exist (cluster has GPUs 0..{self.num_gpus - 1})"
                )

    def placement_tier(self, gpus: Sequence[int] | np.ndarray) -> Tier:
        """The widest tier a set of GPUs spans."""
        machines = self.gpu_machine[np.asarray(gpus, dtype=np.int64)]
        if machines.size <= 64:  # small placements: Python sets beat numpy's reductions
            ms = set(machines.tolist())
            if len(ms) <= 1:
                return Tier.MACHINE
            rack_of = self._machine_rack_list
            first = rack_of[ms.pop()]
            return Tier.RACK if all(rack_of[m] == first for m in ms) else Tier.NETWORK
        if machines.size == 0 or (machines == machines[0]).all():
            return Tier.MACHINE
        racks = self.machine_rack[machines]
        return Tier.RACK if (racks == racks[0]).all() else Tier.NETWORK

    def placement_shape(self, gpus: Sequence[int] | np.ndarray) -> Shape:
        """Canonical shape of a placement (see ``Shape``)."""
        counts: dict[int, int] = {}
        for m in self.gpu_machine[np.asarray(gpus, dtype=np.int64)].tolist():
            counts[m] = counts.get(m, 0) + 1
        rack_of = self._machine_rack_list
        per_rack: dict[int, list[int]] = {}
        for m, c in counts.items():
            per_rack.setdefault(rack_of[m], []).append(c)
        shape = [tuple(sorted(v, reverse=True)) for v in per_rack.values()]
        shape.sort(key=lambda t: (sum(t), t), reverse=True)
        return tuple(shape)

    @cached_property
    def _machine_rack_list(self) -> list[int]:
        return self.machine_rack.tolist()

    @cached_property
    def graph(self) -> nx.Graph:
        """Topology graph: nodes ('gpu', i), ('machine', m), ('tor', r), ('spine', 0).

        Edge attribute ``capacity_Bps``: GPU-machine edges carry the machine link, machine-ToR
        edges the machine uplink (NIC) capacity, ToR-spine edges the rack uplink capacity
        divided by the oversubscription ratio.
        """
        cfg = self.config
        g = nx.Graph()
        g.add_node(("spine", 0), kind="spine")
        for r in range(self.num_racks):
            g.add_node(("tor", r), kind="tor")
            up = sum(self.machine_uplink_Bps(int(m)) for m in self.rack_machines(r))
            g.add_edge(
                ("tor", r),
                ("spine", 0),
                capacity_Bps=up / cfg.rack_uplink_oversubscription,
                tier="network",
            )
        for m in range(self.num_machines):
            g.add_node(("machine", m), kind="machine", group=int(self.machine_group[m]))
            g.add_edge(
                ("machine", m),
                ("tor", int(self.machine_rack[m])),
                capacity_Bps=self.machine_uplink_Bps(m),
                tier="rack",
            )
            link = self.group_machine_link[int(self.machine_group[m])]
            for gpu in self.machine_gpus(m).tolist():
                g.add_node(("gpu", gpu), kind="gpu")
                g.add_edge(
                    ("gpu", gpu), ("machine", m), capacity_Bps=link.bandwidth_Bps, tier="machine"
                )
        return g

    def machine_uplink_Bps(self, machine: int) -> float:
        """Summed NIC capacity from a machine to its ToR (``_init_nics``)."""
        return float(self.machine_nic_total_Bps[machine])

    def describe(self) -> str:
        """One line for people."""
        groups = ", ".join(
            f"{g.racks}x{g.machines_per_rack}x{g.gpus_per_machine} {g.gpu_type}"
            for g in self.config.groups
        )
        return (
            f"{self.name}: {self.num_gpus} GPUs in {self.num_machines} machines, "
            f"{self.num_racks} racks ({groups})"
        )
