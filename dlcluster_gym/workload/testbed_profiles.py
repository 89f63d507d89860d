"""The Cassini / HotNets'22 testbed profiles, loaded from ``configs/profiles/cassini-testbed.yaml``.

Each of the 13 Cassini Table 4.2 models is a sequence of back-to-back ``(duration_ms,
rate_gbps)`` segments of one iteration at its reference batch on the testbed's 50 Gb/s link
(rate 0 = a Down / compute segment). The YAML file holds the numbers and their provenance
(which are printed in a paper, which we derived and why); this module only reads and checks
them. ``perf.testbed`` builds Cassini circles and the HotNets fluid model on top, and
``workload.profiles`` turns them into engine profiles (source ``cassini-testbed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.files import configs_dir, read_yaml

Segment = tuple[float, float]
"""``(duration_ms, rate_gbps)``; rate 0 is a Down (compute) segment."""

TESTBED_SOURCE = "cassini-testbed"

FlowRate = Literal["up-rate", "line-rate"]
FLOW_RATES: dict[str, str] = {
    "up-rate": "a job's flows reach at most its profile's Up rate (ProfiledModel.up_gbps)",
    "line-rate": "a job's flows reach the link's line rate (bytes sent in shorter bursts)",
}


@dataclass(frozen=True)
class ProfiledModel:
    """One Table 4.2 model as profiled on the testbed at its reference batch (YAML entry)."""

    name: str
    paper_name: str
    parallelism: Literal["data", "model"]
    reference_batch: int
    batch_range: tuple[int, int]
    segments: tuple[Segment, ...]
    source: str

    def scaled_segments(self, batch: int) -> tuple[Segment, ...]:
        """Segments at ``batch`` per GPU: Down durations scale with the batch, Up ones do not."""
        k = batch / self.reference_batch
        return tuple((d * k if rate == 0 else d, rate) for d, rate in self.segments)

    def iteration_ms(self, batch: int | None = None) -> float:
        segs = self.scaled_segments(self.reference_batch if batch is None else batch)
        return sum(d for d, _ in segs)

    def compute_ms(self, batch: int | None = None) -> float:
        """Total Down (compute) time per iteration."""
        b = self.reference_batch if batch is None else batch
        return sum(d for d, rate in self.scaled_segments(b) if rate == 0)

    @property
    def up_ms(self) -> float:
        """Total Up (communication) time per iteration; independent of the batch."""
        return sum(d for d, rate in self.segments if rate > 0)

    @property
    def peak_gbps(self) -> float:
        return max(rate for _, rate in self.segments)

    @property
    def gbit_per_iteration(self) -> float:
        """Bits sent per iteration (Gb), independent of the batch."""
        return sum(d * rate for d, rate in self.segments) / 1e3

    @property
    def up_gbps(self) -> float:
        """Mean rate over the Up segments (Gb/s): bits per iteration / Up time. The one Up
        rate of a data-parallel profile; the byte-weighted mean of a multi-phase one."""
        return self.gbit_per_iteration / self.up_ms * 1e3


def _positive(path: str, field: str, value: Any, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    x = float(value) if ok else math.nan
    if not (math.isfinite(x) and (x >= 0 if allow_zero else x > 0)):
        allowed = "a number >= 0" if allow_zero else "a number > 0"
        raise ConfigError(f"{path}: {field}: expected {allowed}, got {value!r}")
    return x


def _entry(path: str, name: str, e: Any) -> ProfiledModel:
    where = f"models.{name}"
    if not isinstance(e, dict):
        raise ConfigError(f"{path}: {where}: expected a mapping, got {e!r}")
    par = e.get("parallelism")
    if par not in ("data", "model"):
        raise ConfigError(f"{path}: {where}.parallelism: expected data or model, got {par!r}")
    ref = e.get("reference_batch")
    rng = e.get("batch_range")
    if not (isinstance(ref, int) and ref > 0):
        raise ConfigError(f"{path}: {where}.reference_batch: expected an integer > 0, got {ref!r}")
    if not (
        isinstance(rng, list)
        and len(rng) == 2
        and all(isinstance(x, int) and x > 0 for x in rng)
        and rng[0] <= ref <= rng[1]
    ):
        raise ConfigError(
            f"{path}: {where}.batch_range: expected [lo, hi] integers with lo <= "
            f"reference_batch <= hi, got {rng!r}"
        )
    segs = e.get("segments")
    if not (isinstance(segs, list) and segs):
        raise ConfigError(f"{path}: {where}.segments: expected a list of [ms, Gb/s], got {segs!r}")
    out: list[Segment] = []
    for i, s in enumerate(segs):
        if not (isinstance(s, list) and len(s) == 2):
            raise ConfigError(f"{path}: {where}.segments[{i}]: expected [ms, Gb/s], got {s!r}")
        out.append(
            (
                _positive(path, f"{where}.segments[{i}] duration", s[0]),
                _positive(path, f"{where}.segments[{i}] rate", s[1], allow_zero=True),
            )
        )
    if not any(r > 0 for _, r in out) or not any(r == 0 for _, r in out):
        raise ConfigError(f"{path}: {where}.segments: need at least one Up and one Down segment")
    keys = [k for k in ("measured", "derived") if e.get(k) not in (None, "", "none")]
    note = "; ".join(f"{k}: {e[k]}" for k in keys)
    return ProfiledModel(
        name, str(e.get("paper_name", name)), par, ref, (rng[0], rng[1]), tuple(out), note
    )


@cache
def _read() -> tuple[float, FlowRate, tuple[ProfiledModel, ...]]:
    path = configs_dir() / "profiles" / f"{TESTBED_SOURCE}.yaml"
    data = read_yaml(path)
    if not isinstance(data.get("models"), dict):
        raise ConfigError(f"{path}: expected a `models` mapping of model -> profile")
    link = _positive(str(path), "link_gbps", data.get("link_gbps"))
    flow = data.get("flow_rate", "line-rate")
    if flow not in FLOW_RATES:
        raise ConfigError(
            f"{path}: flow_rate: expected one of {', '.join(FLOW_RATES)}, got {flow!r}"
        )
    models = tuple(_entry(str(path), str(n), e) for n, e in data["models"].items())
    return link, flow, models


def testbed_table() -> tuple[float, tuple[ProfiledModel, ...]]:
    """``(link_gbps, models)`` of ``configs/profiles/cassini-testbed.yaml`` (checked once)."""
    link, _, models = _read()
    return link, models


def testbed_flow_rate() -> FlowRate:
    """The file's ``flow_rate`` (:data:`FLOW_RATES`; ``line-rate`` when absent): the rate
    the engine lets a testbed job's flows reach (``workload.profiles.testbed_model_profile``)."""
    return _read()[1]
