"""Re-derive the fitted constants of the Dally-style generator and the itp-cluster10 size.

Usage: python experiments/workloads/fit_dally_workload.py [--traces-dir DIR]

Prints the literals to paste into dlcluster_gym/workload/generators.py, the ITP cluster sizes
given by the rule of configs/clusters/itp-cluster10.yaml, and the Philly trace load time.
"""

from __future__ import annotations

import argparse
import math
import time

from dlcluster_gym.workload import traces as tr
from dlcluster_gym.workload.generators import fit_dally_distributions


def size_racks(jobs: tr.TraceJobs, gpus_per_rack: int, target_load: float) -> int:
    """Racks for the largest job and for an offered load of at most ``target_load``."""
    for_job = math.ceil(int(jobs.num_gpus.max()) / gpus_per_rack)
    busy = jobs.gpu_seconds() / float(jobs.arrival_s.max() - jobs.arrival_s.min())
    for_load = max(1, round(busy / (target_load * gpus_per_rack)))
    return max(for_job, for_load)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces-dir", default=None)
    args = ap.parse_args()
    fit = fit_dally_distributions(args.traces_dir)
    print(f"FIT_NUM_JOBS_PHILLY = {fit.num_jobs_philly}")
    print(f"FIT_NUM_JOBS_ITP = {fit.num_jobs_itp}")
    print(f"DALLY_DEMAND_PROBS = {fit.demand_probs}")
    print(f"DALLY_DURATION_QUANTILES_S = {fit.duration_quantiles_s}")
    print("\nITP clusters: 8 GPUs/machine, 8 machines/rack, target offered load 0.8")
    root = tr.trace_root(args.traces_dir) / tr.ITP_RAW_DIR
    for f in sorted(root.glob("cluster*.csv")):
        jobs = tr.load_itp_raw(f)
        racks = size_racks(jobs, 64, 0.8)
        print(
            f"  {f.stem}: {len(jobs)} jobs, max {int(jobs.num_gpus.max())} GPUs -> {racks} "
            f"rack(s), offered load {jobs.offered_load(racks * 64):.3f}"
        )
    t = time.perf_counter()
    jobs = tr.load_philly(tr.PHILLY_CSV, args.traces_dir)
    print(f"\nPhilly: {len(jobs)} jobs loaded in {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
