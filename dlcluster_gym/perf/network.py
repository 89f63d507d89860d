"""Network-tier model (STUB: being replaced by the calibrated hierarchical all-reduce)."""

from __future__ import annotations

from functools import lru_cache

from dlcluster_gym.cluster.catalog import Interconnect
from dlcluster_gym.cluster.topology import Shape, Tier
from dlcluster_gym.workload.models import ModelProfile

Links = tuple[Interconnect, Interconnect, Interconnect]


def reference_shape(tier: Tier, n: int = 8) -> Shape:
    """Dally Table 1 placements: n GPUs on one machine / n machines x 1 / n racks x 1."""
    if tier == Tier.MACHINE:
        return ((n,),)
    if tier == Tier.RACK:
        return ((1,) * n,)
    return tuple((1,) for _ in range(n))


@lru_cache(maxsize=65536)
def comm_overhead(profile: ModelProfile, shape: Shape, links: Links) -> float:
    """Exposed communication per iteration as a fraction of compute time."""
    n = sum(sum(r) for r in shape)
    if n <= 1:
        return 0.0
    tier = 0 if len(shape) == 1 and len(shape[0]) == 1 else (1 if len(shape) == 1 else 2)
    link = links[tier]
    t = 2 * (n - 1) / n * profile.grad_bytes / link.bandwidth_Bps
    t += 2 * (n - 1) * profile.comm.messages * link.latency_s
    return t / profile.compute_s
