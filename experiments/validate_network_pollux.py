"""Validate the network-tier model away from Dally's reference placements, on Pollux data.

Usage: python experiments/validate_network_pollux.py [--traces-dir DIR] [--calibrate]

Pollux (OSDI'21) measured step times of each model for every placement of up to 16 GPUs on
AWS g4dn.12xlarge nodes (4x T4 on PCIe 3.0, 50 Gb/s Ethernet between nodes). For each model and
local batch size we compare the measured ratio step_time(spread) / step_time(packed) for the
same GPU count with the model's prediction (1 + f_spread) / (1 + f_packed), where f is
``perf.network.comm_overhead`` with compute_s = the measured 1-GPU step time at that batch.
Writes experiments/results/network_validation.md. ``--calibrate`` also prints the fitted
CommParams literals of the Dally Table 1 models (needs scipy).

Traces: $DLCLUSTER_TRACES, else ../shared/traces relative to the repository root.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Shape
from dlcluster_gym.perf import network as nw
from dlcluster_gym.workload.models import get_model

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("bert", "yolov3", "ncf", "deepspeech2", "cifar10", "imagenet")
REQUIRED = ("bert", "yolov3", "ncf", "deepspeech2")  # the brief's four; the rest are extra
PAIRS = (("2", "11"), ("3", "111"), ("4", "22"), ("4", "1111"), ("44", "2222"))
# Catalog presets as they are (bandwidth per GPU). A variant that divides the node's 50 Gb/s
# NIC among its 4 GPUs (``--nic-shared``) fits worse overall (see the report).
_ETH = interconnect("eth-50")
LINKS: nw.Links = (interconnect("pcie"), _ETH, _ETH)
_ETH_SHARED = replace(_ETH, name="eth-50/4", bandwidth_Bps=_ETH.bandwidth_Bps / 4)
LINKS_NIC_SHARED: nw.Links = (interconnect("pcie"), _ETH_SHARED, _ETH_SHARED)


def traces_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("DLCLUSTER_TRACES")
    return Path(env) if env else ROOT.parent / "shared" / "traces"


def placement_shape(placement: str) -> Shape:
    """Pollux placement string (one digit per node) -> shape; all nodes in one rack."""
    return (tuple(sorted((int(c) for c in placement), reverse=True)),)


def load(path: Path) -> dict[tuple[str, int], float]:
    """Mean step_time per (placement, local_bsz)."""
    acc: dict[tuple[str, int], list[float]] = defaultdict(list)
    with path.open() as f:
        for row in csv.DictReader(f):
            acc[(row["placement"], int(row["local_bsz"]))].append(float(row["step_time"]))
    return {k: statistics.fmean(v) for k, v in acc.items()}


def validate(root: Path, links: nw.Links = LINKS) -> tuple[list[tuple], dict[str, float]]:
    rows: list[tuple] = []
    per_model: dict[str, float] = {}
    for model in MODELS:
        steps = load(root / "pollux_adaptdl" / "traces" / model / "placements.csv")
        base = get_model(model)
        errs: list[float] = []
        for packed, spread in PAIRS:
            ms, ps = [], []
            for (pl, bsz), t_pack in steps.items():
                if pl != packed or (spread, bsz) not in steps or ("1", bsz) not in steps:
                    continue
                prof = replace(base, compute_s=steps[("1", bsz)])
                f_pack = nw.comm_overhead(prof, placement_shape(packed), links)
                f_spread = nw.comm_overhead(prof, placement_shape(spread), links)
                ms.append(steps[(spread, bsz)] / t_pack)
                ps.append((1 + f_spread) / (1 + f_pack))
            if not ms:
                continue
            measured, predicted = statistics.fmean(ms), statistics.fmean(ps)
            err = (predicted - measured) / measured
            errs.append(abs(err))
            rows.append((model, f"{packed} vs {spread}", len(ms), measured, predicted, err))
        per_model[model] = statistics.fmean(errs)
    return rows, per_model


def report(rows: list[tuple], per_model: dict[str, float], cmd: str, links: nw.Links) -> str:
    lines = [
        "# Network-tier model vs Pollux placements",
        "",
        f"Command: `{cmd}`",
        "",
        "Cluster: 4 GPUs per node (g4dn.12xlarge), links (machine, rack, network) = "
        f"({', '.join(link.name for link in links)}), all nodes in one rack. Ratio = "
        "step_time(spread) / step_time(packed), same GPU count and local batch, averaged over "
        "the local batch sizes measured for both placements and for one GPU. Predicted = "
        "(1 + f_spread) / (1 + f_packed), f from `perf.network.comm_overhead` with the model's "
        "zoo CommParams (physics defaults: fp32 gradients, 25 MB DDP buckets, overlap 0) and "
        "compute_s = measured 1-GPU step time at that batch.",
        "",
        "| model | packed vs spread | batches | measured ratio | predicted ratio | error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for model, pair, n, m, p, e in rows:
        lines.append(f"| {model} | {pair} | {n} | {m:.3f} | {p:.3f} | {e:+.1%} |")
    lines += ["", "Mean absolute relative error per model:", ""]
    lines += [
        f"- {m}: {e:.1%}" + ("" if m in REQUIRED else " (extra)") for m, e in per_model.items()
    ]
    req = statistics.fmean(per_model[m] for m in REQUIRED)
    lines += ["", f"Mean over bert, yolov3, ncf, deepspeech2: {req:.1%}", ""]
    return "\n".join(lines)


NOTES = """
## Reading the errors

- The model has one shape-independent bandwidth per tier, so it cannot reproduce what these
  T4/TCP measurements show: `22` (2+2 GPUs) is much slower than `1111`, and `2222` is faster
  than `44`, i.e. cost grows with the number of GPUs sharing a node's NIC and with NCCL's
  socket transport, not with the hierarchy the model assumes (which predicts `44` as the more
  consolidated, cheaper placement). `44 vs 2222` therefore always shows a large positive error.
- For bert and yolov3 the model under-predicts cross-node cost: the measured sync time (0.6-0.8 s
  for bert on four nodes) implies an effective 5-10 Gb/s per node, not the nominal 50 Gb/s.
- Splitting the NIC among the node's GPUs (`--nic-shared`) helps bert/yolov3/cifar10/imagenet
  but makes ncf (7 ms compute per step) far too slow; overall it fits worse (mean 66% over the
  four required models, vs the figure above).
- The default overlap for non-fitted models is 0: in these traces the step-time increase over
  one GPU is about the measured sync time, i.e. little communication is hidden (overlap 0.5
  gave a mean of 38% instead).
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces-dir", default=None)
    ap.add_argument(
        "--calibrate", action="store_true", help="print the Dally per-tier calibration factors"
    )
    ap.add_argument("--nic-shared", action="store_true", help="split the node NIC among 4 GPUs")
    ap.add_argument(
        "--out", default=str(ROOT / "experiments" / "results" / "network_validation.md")
    )
    args = ap.parse_args()
    if args.calibrate:
        for name, c in nw.calibrate().items():
            print(f"{name}: {c}")
    root = traces_dir(args.traces_dir)
    if not (root / "pollux_adaptdl" / "traces").is_dir():
        print(
            f"traces folder not found: {root / 'pollux_adaptdl' / 'traces'} "
            "(set DLCLUSTER_TRACES or pass --traces-dir)",
            file=sys.stderr,
        )
        return 2
    links = LINKS_NIC_SHARED if args.nic_shared else LINKS
    rows, per_model = validate(root, links)
    cmd = "python experiments/validate_network_pollux.py" + (
        " --nic-shared" if args.nic_shared else ""
    )
    text = report(rows, per_model, cmd, links) + NOTES
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
