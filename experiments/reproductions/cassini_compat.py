"""Reproduce the compatibility results of HotNets'22 Table 1 and Cassini thesis Table 4.3.

Usage: python experiments/reproductions/cassini_compat.py [--out PATH]

Builds each job's profile on the Cassini / HotNets testbed (``dlcluster_gym.perf.testbed``:
A100 GPUs, 50 Gb/s NICs) and scores the jobs sharing one link with Cassini's geometric
abstraction (``perf.geometry.link_compatibility``, the same path as ``dlcluster compat``):

(a) HotNets Table 1: every group classified compatible or not, with our fair-sharing (and
    unfair) iteration times from the shared-link fluid model next to the paper's;
(b) Cassini Table 4.3: the five snapshots' scores and time shifts next to the paper's, and our
    score when the paper's own shifts are applied;
(c) the 40 ms + 60 ms example of thesis 4.3.2 / HotNets Fig. 5;
plus the model-parallel pairs of thesis 4.5.4 and the time of one compatibility computation of
four jobs on a link. Prints the report and writes it to experiments/results/cassini/compat.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from dlcluster_gym.perf.geometry import (
    CommProfile,
    compatibility_score,
    link_compatibility,
    unified_circle,
)
from dlcluster_gym.perf.testbed import (
    CASSINI_TABLE_4_3,
    HOTNETS_TABLE_1,
    TESTBED_LINK_GBPS,
    JobSpec,
    get_profiled_model,
    link_report,
    shared_link_iteration_times,
    testbed_models,
    testbed_profile,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "experiments" / "results" / "cassini" / "compat.md"

COMPATIBLE_AT = 0.99
"""A group is fully compatible when its best score is at least this (section (a))."""
SCORE_TOLERANCE = 0.1
"""Acceptance: our Table 4.3 scores within this of the paper's."""
NOISE = 0.01
"""Speed-ups within 1% of 1 count as unchanged (HotNets Table 1 reports ResNet50 at 1.01x)."""
TIMING_TARGET_MS = 10.0
TIMING_SETS = (
    (("vgg16", 1400), ("wide-resnet101", 800), ("bert", 8), ("resnet50", 1600)),
    (("vgg19", 1400), ("vgg16", 1700), ("resnet50", 1600), ("wide-resnet101", 800)),
    (("bert", 8), ("roberta", 12), ("xlm", 8), ("camembert", 8)),
    (("gpt1", 32), ("gpt2-medium", 32), ("gpt3", 16), ("dlrm", 2000)),
)
MODEL_PARALLEL_PAIRS = (  # thesis 4.5.4
    (("gpt1", 32), ("gpt2-medium", 32), True),
    (("gpt3", 16), ("dlrm", 2000), True),
    (("gpt3", 16), ("gpt2-medium", 32), False),
    (("gpt1", 32), ("dlrm", 2000), False),
)


def _label(jobs: tuple[tuple[str, int], ...]) -> str:
    return " + ".join(f"{get_profiled_model(m).paper_name} ({b})" for m, b in jobs)


def _profiles(jobs: tuple[tuple[str, int], ...]) -> list[CommProfile]:
    return [testbed_profile(m, b) for m, b in jobs]


def _unfair_weights(n: int) -> list[float]:
    """HotNets: each job more aggressive than the next; Fig. 1's 30 vs 15 Gb/s -> 2:1 per rank."""
    return [2.0 ** (n - 1 - i) for i in range(n)]


def profiles_section() -> list[str]:
    lines = [
        "## Testbed profiles (configs/profiles/cassini-testbed.yaml)",
        "",
        f"Isolated profiles on a {TESTBED_LINK_GBPS:g} Gb/s link at each model's reference "
        "batch; Down (compute) scales linearly with the batch, Up (communication) does not. "
        "What is a paper number and what is derived: the `measured` / `derived` notes of "
        "`configs/profiles/cassini-testbed.yaml`.",
        "",
        "| model | paper | parallelism | ref batch | range | iteration ms | compute ms | "
        "Up ms | peak Gb/s | Gb/iteration |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name in testbed_models():
        m = get_profiled_model(name)
        lo, hi = m.batch_range
        lines.append(
            f"| {m.name} | {m.paper_name} | {m.parallelism} | {m.reference_batch} | {lo}-{hi} | "
            f"{m.iteration_ms():.1f} | {m.compute_ms():.1f} | {m.up_ms:.1f} | "
            f"{m.peak_gbps:g} | {m.gbit_per_iteration:.2f} |"
        )
    return lines


def hotnets_section() -> tuple[list[str], bool]:
    lines = [
        "## (a) HotNets'22 Table 1: which groups are fully compatible",
        "",
        f"Threshold: a group is compatible when its best compatibility score is >= "
        f"{COMPATIBLE_AT}. HotNets calls jobs compatible when a rotation leaves *no* sector "
        "with more demand than the link (its formulation caps each sector at one "
        "communicating job), i.e. Cassini score 1; the 0.01 below 1 only forgives the 5 ms "
        "discretisation (one sector of overlap costs about 0.01 on a 250 ms circle). "
        "Cassini's first partial level (Table 4.3, 0.9) is far below it.",
        "",
        "Iteration times: our shared-link fluid model (jobs start together, weighted max-min "
        "sharing capped at each job's rate; 'unfair' doubles the weight per rank of "
        "aggressiveness, in table order, as HotNets' DCQCN tuning did). 'isolated' is the "
        "profile's own iteration time. HotNets' own criterion, 'unfairness speeds up every "
        "job', is checked on the fluid model too (no job more than 1% slower than under fair "
        "sharing, at least one more than 1% faster).",
        "",
        "| group | job (batch) | isolated ms | fair ms ours / paper | unfair ms ours / paper | "
        "score | compatible ours / paper | unfair speeds up all (ours) |",
        "|---:|---|---:|---:|---:|---:|---|---|",
    ]
    ok = True
    for g, group in enumerate(HOTNETS_TABLE_1, 1):
        profiles = _profiles(group.jobs)
        score = link_compatibility(profiles).score
        fair = shared_link_iteration_times(profiles)
        unfair = shared_link_iteration_times(profiles, weights=_unfair_weights(len(profiles)))
        ours = score >= COMPATIBLE_AT
        ok &= ours == group.compatible
        speedups = [f / u for f, u in zip(fair, unfair, strict=True)]
        speedup_all = min(speedups) >= 1 - NOISE and max(speedups) > 1 + NOISE
        for i, (m, b) in enumerate(group.jobs):
            first = i == 0
            yes = {True: "yes", False: "no"}
            lines.append(
                f"| {g if first else ''} | {get_profiled_model(m).paper_name} ({b}) | "
                f"{profiles[i].iteration_time * 1e3:.0f} | "
                f"{fair[i] * 1e3:.0f} / {group.fair_ms[i]:g} | "
                f"{unfair[i] * 1e3:.0f} / {group.unfair_ms[i]:g} | "
                + (
                    f"{score:.3f} | {yes[ours]} / {yes[group.compatible]}"
                    f"{'' if ours == group.compatible else ' **MISMATCH**'} | "
                    f"{yes[speedup_all]} |"
                    if first
                    else " | | |"
                )
            )
    lines += ["", f"All five groups classified as in the paper: **{'yes' if ok else 'NO'}**."]
    return lines, ok


def _rotations_for(shifts_ms: tuple[float, ...], circle) -> list[int]:
    return [
        round(s * 1e-3 / circle.sector_s) % n
        for s, n in zip(shifts_ms, circle.iteration_sectors, strict=True)
    ]


def cassini_section() -> tuple[list[str], bool]:
    lines = [
        "## (b) Cassini Table 4.3: the five snapshots",
        "",
        f"Scores must be within {SCORE_TOLERANCE} of the paper's. Shifts are Eq. 4.5's, the "
        "first job is the reference (0 ms). Cassini's optimum is rarely unique (any shift in a "
        "window interleaves the same way) and our search returns one point of that window, "
        "so the last column scores the paper's own shifts on our circles: equal to our "
        "score means the paper's shifts are optimal for our profiles too.",
        "",
        "| snapshot | jobs (batch) | score paper | score ours | diff | shifts ms paper | "
        "shifts ms ours | circle ms | score at paper's shifts |",
        "|---:|---|---:|---:|---:|---|---|---:|---:|",
    ]
    ok = True
    for k, snap in enumerate(CASSINI_TABLE_4_3, 1):
        specs = [JobSpec(get_profiled_model(m).name, b) for m, b in snap.jobs]
        rep = link_report(specs)
        profiles = _profiles(snap.jobs)
        circle = unified_circle(profiles)
        at_paper = compatibility_score(circle, _rotations_for(snap.shifts_ms, circle))
        diff = abs(rep["score"] - snap.score)
        ok &= diff <= SCORE_TOLERANCE
        ours = ", ".join(f"{v:g}" for v in rep["shifts_ms"].values())
        lines.append(
            f"| {k} | {_label(snap.jobs)} | {snap.score:g} | {rep['score']:.3f} | {diff:.3f} | "
            f"{', '.join(f'{s:g}' for s in snap.shifts_ms)} | {ours} | "
            f"{rep['perimeter_ms']:g}{'' if circle.exact else ' (fitted)'} | {at_paper:.3f} |"
        )
    lines += [
        "",
        f"All five scores within {SCORE_TOLERANCE} of the paper: **{'yes' if ok else 'NO'}**.",
    ]
    return lines, ok


def example_section() -> tuple[list[str], bool]:
    j1 = CommProfile.data_parallel(0.040, 0.010, 1.0, "j1")
    j2 = CommProfile.data_parallel(0.060, 0.010, 1.0, "j2")
    res = link_compatibility([j2, j1])
    circle = res.circle
    aligned = compatibility_score(circle, [0, 0])
    degrees = math.degrees(res.angles[1])
    ok = res.score == 1.0 and aligned < 1.0
    lines = [
        "## (c) Thesis 4.3.2 / HotNets Fig. 5: 40 ms and 60 ms jobs",
        "",
        "Both jobs send at the full link rate for 10 ms at the end of each iteration (the papers "
        "give the periods and the 30 degree rotation, not the Up durations).",
        "",
        f"- unified circle: {circle.perimeter_s * 1e3:g} ms (LCM(40, 60) = 120), "
        f"{circle.iterations[1]} periods of the 40 ms job, {circle.iterations[0]} of the 60 ms",
        f"- score with no rotation: {aligned:.3f}",
        f"- best score: {res.score:.3f} after rotating the 40 ms job by {degrees:g} degrees "
        f"({res.time_shifts[1] * 1e3:g} ms); the papers rotate it by 30 degrees",
        f"- fully compatible after a rotation: **{'yes' if ok else 'NO'}**",
    ]
    return lines, ok


def model_parallel_section() -> list[str]:
    lines = [
        "## Thesis 4.5.4: model-parallel pairs (reference batches)",
        "",
        "| pair | score | compatible ours / thesis |",
        "|---|---:|---|",
    ]
    for a, b, paper in MODEL_PARALLEL_PAIRS:
        score = link_compatibility(_profiles((a, b))).score
        ours = score >= COMPATIBLE_AT
        yes = {True: "yes", False: "no"}
        lines.append(f"| {_label((a, b))} | {score:.3f} | {yes[ours]} / {yes[paper]} |")
    return lines


def timing_section(repeats: int = 50) -> tuple[list[str], bool]:
    lines = [
        "## Time of one compatibility computation (4 jobs on a link)",
        "",
        f"`link_compatibility` of four testbed profiles, median of {repeats} runs after one "
        f"warm-up (target < {TIMING_TARGET_MS:g} ms). Machine-dependent.",
        "",
        "| jobs | circle sectors | method | score | median ms |",
        "|---|---:|---|---:|---:|",
    ]
    worst = 0.0
    for jobs in TIMING_SETS:
        profiles = _profiles(jobs)
        res = link_compatibility(profiles)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            link_compatibility(profiles)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times) * 1e3
        worst = max(worst, med)
        lines.append(
            f"| {_label(jobs)} | {res.circle.perimeter_sectors} | {res.method} | "
            f"{res.score:.3f} | {med:.2f} |"
        )
    ok = worst < TIMING_TARGET_MS
    lines += ["", f"Slowest median: {worst:.2f} ms (target met: **{'yes' if ok else 'NO'}**)."]
    return lines, ok


DEVIATIONS = [
    "## Deviations from the papers",
    "",
    "- Time shifts differ from Table 4.3 although the scores agree: the optimum is a window of "
    "shifts and the search reports one point of it; the paper's shifts score the "
    "same on our circles (last column of (b)). Snapshots 3 and 5 mix iteration times whose "
    "unified circle holds every relative phase, so there the shift hardly matters.",
    "- Isolated iteration times are within about 5% of the papers' interleaved ('unfair', "
    "compatible groups) times, not equal: VGG19 (1400) is 315 ms (paper 329) because "
    "full compatibility on a circle needs VGG19 (1400) and VGG16 (1700) at the same period "
    "(HotNets shows them locked at one period), and VGG16 (1700) follows from the 255/141 ms "
    "anchor with linear batch scaling.",
    "- Fair-sharing times come from a fluid model (max-min sharing at full link efficiency, "
    "no DCQCN or PFC dynamics): within 5% of the paper for the compatible groups 2, 4, 5 and "
    "for BERT in group 1, 14% high for VGG19 (1200) in group 1, and 16-28% low in the "
    "three-job group 3, where the paper's jobs moved only about 35 Gb/s through the 50 Gb/s "
    "link on average (our bits per iteration over the paper's fair times) while max-min sharing "
    "keeps it about 90% busy.",
    "- The unfair column uses 2:1 weights per rank (HotNets Fig. 1's 30 vs 15 Gb/s), not "
    "DCQCN's timer change; it reproduces which groups gain, not the exact times.",
    "- GPT-1/2/3 and DLRM phase layouts are ours (the text gives no timings for them): they "
    "follow Fig. 4.1's shapes, HotNets' DLRM numbers and the pairs of thesis 4.5.4.",
]


def build_report() -> tuple[str, bool]:
    a, ok_a = hotnets_section()
    b, ok_b = cassini_section()
    c, ok_c = example_section()
    t, ok_t = timing_section()
    lines = [
        "# Cassini / HotNets'22 compatibility reproductions",
        "",
        "Generated by `python experiments/reproductions/cassini_compat.py`; "
        "the same computation as "
        "`dlcluster compat --jobs MODEL:BATCH,...`.",
        "",
        *profiles_section(),
        "",
        *a,
        "",
        *b,
        "",
        *c,
        "",
        *model_parallel_section(),
        "",
        *t,
        "",
        *DEVIATIONS,
        "",
    ]
    return "\n".join(lines), ok_a and ok_b and ok_c and ok_t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"report path (default {OUT})")
    args = parser.parse_args()
    report, ok = build_report()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    print(f"written to {args.out}; all checks passed: {ok}")


if __name__ == "__main__":
    main()
