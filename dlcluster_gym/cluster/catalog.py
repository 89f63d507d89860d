"""Hardware catalog: GPU types and interconnect presets.

Figures are vendor data-sheet values; latencies are end-to-end per-message figures we chose
for the all-reduce model (documented next to each preset). Bandwidths are per GPU and per
direction, in bytes/s (configs may say Gb/s; they are converted here, at the edge).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlcluster_gym.errors import UnknownNameError

GBIT = 1e9 / 8.0  # bytes/s in one Gb/s


@dataclass(frozen=True)
class GPUType:
    """One GPU model: memory, peak dense throughput and memory bandwidth."""

    name: str
    memory_gb: float
    fp16_tflops: float  # dense tensor-core peak
    fp32_tflops: float
    memory_gbs: float  # memory bandwidth, GB/s
    source: str


@dataclass(frozen=True)
class Interconnect:
    """One link technology: per-GPU bandwidth (bytes/s) and per-message latency (s)."""

    name: str
    bandwidth_Bps: float
    latency_s: float
    description: str

    @property
    def bandwidth_gbps(self) -> float:
        return self.bandwidth_Bps / GBIT


GPU_TYPES: dict[str, GPUType] = {
    g.name: g
    for g in (
        GPUType("V100", 32, 125.0, 15.7, 900, "NVIDIA V100 SXM2 data sheet (32 GB)"),
        GPUType("A100", 40, 312.0, 19.5, 1555, "NVIDIA A100 data sheet; 40 GB as in Crius Table 1"),
        GPUType("A100-80GB", 80, 312.0, 19.5, 2039, "NVIDIA A100 80 GB SXM data sheet"),
        GPUType("A40", 48, 149.7, 37.4, 696, "NVIDIA A40 data sheet"),
        GPUType("A10", 24, 125.0, 31.2, 600, "NVIDIA A10 data sheet"),
        GPUType("H100", 80, 989.0, 67.0, 3350, "NVIDIA H100 SXM data sheet (dense FP16)"),
        GPUType("T4", 16, 65.0, 8.1, 320, "NVIDIA T4 data sheet (Pollux testbed GPU)"),
        GPUType("P100", 16, 18.7, 9.3, 732, "NVIDIA P100 SXM2 data sheet"),
        GPUType("K80", 12, 4.4, 4.4, 240, "NVIDIA K80 data sheet, per GPU die (Philly era)"),
    )
}


def _ic(name: str, gbps: float, latency_us: float, description: str) -> Interconnect:
    return Interconnect(name, gbps * GBIT, latency_us * 1e-6, description)


INTERCONNECTS: dict[str, Interconnect] = {
    i.name: i
    for i in (
        # Dally 3.3 / 5.1.2: NVSwitch inside a machine, NVIDIA Quantum InfiniBand in a rack,
        # NVIDIA Spectrum Ethernet between racks.
        _ic("nvswitch", 900, 1.0, "NVSwitch inside a machine, 900 Gb/s (Dally 3.3)"),
        # 2.5 us: GPUDirect RDMA NIC -> Quantum switch -> NIC per message, end to end; just
        # above one NVSwitch ring step, so a rack all-reduce never undercuts a machine one
        # (perf.network, 8 GPUs: 6 halving/doubling steps x 2.5 us vs 14 ring steps x 1 us).
        _ic(
            "ib-quantum",
            400,
            2.5,
            "NVIDIA Quantum InfiniBand, 400 Gb/s per port, GPU RDMA (Dally 3.3)",
        ),
        _ic(
            "spectrum-eth",
            800,
            10.0,
            "NVIDIA Spectrum Ethernet, 800 Gb/s per port, higher latency (Dally 3.3)",
        ),
        # Other papers' clusters.
        _ic("nvlink", 1200, 1.0, "NVLink 2.0 (V100), 150 GB/s per direction"),
        _ic("nvlink4", 3600, 1.0, "NVLink 4 / NVSwitch (H100 SXM), 450 GB/s per direction"),
        _ic("pcie", 128, 5.0, "PCIe 3.0 x16, 16 GB/s"),
        _ic("pcie4", 256, 5.0, "PCIe 4.0 x16, 32 GB/s"),
        _ic("ib-50", 50, 20.0, "standard InfiniBand 50 Gb/s, tens of microseconds (Dally 3.3)"),
        _ic("ib-100", 100, 5.0, "InfiniBand EDR 100 Gb/s (Mellanox ConnectX-5, Crius Table 1)"),
        _ic("ib-200", 200, 5.0, "InfiniBand HDR 200 Gb/s (Mellanox ConnectX-6, Crius Table 1)"),
        _ic("eth-1", 1, 50.0, "1 Gb/s Ethernet, TCP (Nearchus cluster A)"),
        _ic("eth-10", 10, 30.0, "10 Gb/s Ethernet, TCP (Nearchus clusters C, D)"),
        _ic("eth-50", 50, 20.0, "50 Gb/s Ethernet (Cassini testbed NICs; Nearchus cluster B)"),
    )
}


def gpu_type(name: str) -> GPUType:
    """Look up a GPU type by name; unknown names list the known ones."""
    try:
        return GPU_TYPES[name]
    except KeyError:
        raise UnknownNameError("GPU type", name, GPU_TYPES) from None


def interconnect(name: str) -> Interconnect:
    """Look up an interconnect preset by name; unknown names list the known ones."""
    try:
        return INTERCONNECTS[name]
    except KeyError:
        raise UnknownNameError("interconnect", name, INTERCONNECTS) from None
