"""One figure per scenario (or per single run): JCT CDFs, average JCT and makespan bars, GPU
utilization and jobs remaining over time, communication overhead. PNG bytes, Agg backend.

Deployable entrants are plain bars and solid lines; clairvoyant entrants (hatched bars, dashed
lines) and bounds (cross-hatched bars, dotted lines) carry their mark in the labels, and a
legend under the figure says what the marks mean."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcluster_gym.leaderboard.tables import DEPLOYABLE, MARKS, marked

CDF_POINTS = 400  # quantiles drawn per CDF line
HATCHES = {"clairvoyant": "///", "bound": "xxx"}  # other non-deployable kinds: "..."
LINESTYLES = {DEPLOYABLE: "-", "clairvoyant": "--", "bound": ":"}
LEGEND = {  # what each kind's marks mean, short enough for one line under the figure
    "clairvoyant": "knows job lengths or future arrivals; not ranked (dashed lines)",
    "bound": "analytical bound, not a schedule; not ranked (dotted lines)",
}


@dataclass
class Series:
    """What the figure shows for one entrant: pooled JCTs, bar values (mean, 95% CI half-width),
    one seed's time series (``t_s``, utilization in [0, 1], jobs remaining) and its kind
    (deployable, clairvoyant or bound: how it is drawn)."""

    label: str
    jct_s: np.ndarray
    avg_jct_s: tuple[float, float]
    makespan_s: tuple[float, float]
    comm_overhead: tuple[float, float]
    t_s: np.ndarray
    utilization: np.ndarray
    remaining: np.ndarray
    kind: str = DEPLOYABLE

    @property
    def name(self) -> str:
        """The label with its kind's mark (``srw (clairvoyant)``)."""
        return marked(self.label, self.kind)


def ci_whiskers(vals: list[tuple[float, float]], scale: float = 1.0) -> np.ndarray | None:
    """(2, n) lower/upper whisker lengths for bars of (mean, 95% CI half-width) pairs, or None
    when no pair has a CI (a single seed or a single run: no whiskers at all). The lower
    whisker stops at zero: every metric is non-negative, so the interval is
    [max(0, mean - half), mean + half], asymmetric where it would cross zero."""
    if not any(math.isfinite(v[1]) for v in vals):
        return None
    means = np.array([v[0] * scale if math.isfinite(v[0]) else 0.0 for v in vals])
    half = np.array([v[1] * scale if math.isfinite(v[1]) else 0.0 for v in vals])
    return np.vstack([np.minimum(half, np.maximum(means, 0.0)), half])


def _bars(
    ax: Any, series: list[Series], attr: str, scale: float, ylabel: str, colors: Any, what: str
) -> None:
    vals = [getattr(s, attr) for s in series]
    yerr = ci_whiskers(vals, scale)
    x = np.arange(len(series))
    bars = ax.bar(x, [v[0] * scale for v in vals], yerr=yerr, color=colors, capsize=3)
    for bar, s in zip(bars, series, strict=True):
        if s.kind != DEPLOYABLE:  # a reference: hatched, pale, outlined in its colour
            bar.set(hatch=HATCHES.get(s.kind, "..."), edgecolor=bar.get_facecolor(), lw=1.2)
            bar.set_facecolor((1, 1, 1, 0))
    first_ref = next((i for i, s in enumerate(series) if s.kind != DEPLOYABLE), 0)
    if first_ref:  # deployable bars left of the line, references right of it
        ax.axvline(first_ref - 0.5, color="0.5", ls=":", lw=1)
    ax.set_xticks(x, [s.name for s in series], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(what if yerr is None else f"{what} (mean, 95% CI cut at 0)")


def scenario_figure(title: str, series: list[Series]) -> bytes:
    """The six-panel figure for ``series`` as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")  # dark shades first, then the light ones
    colors = [cmap((2 * i) % 20 + (i // 10) % 2) for i in range(len(series))]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    fig.suptitle(title)
    ax = axes[0, 0]
    for s, c in zip(series, colors, strict=True):
        if s.jct_s.size:
            q = np.linspace(0, 1, min(CDF_POINTS, s.jct_s.size))
            ls = LINESTYLES.get(s.kind, "-.")
            ax.plot(np.quantile(s.jct_s, q) / 3600, q, label=s.name, color=c, ls=ls)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF (all seeds)")
    ax.legend(fontsize=6)
    _bars(axes[0, 1], series, "avg_jct_s", 1 / 3600, "avg JCT (h)", colors, "average JCT")
    _bars(axes[0, 2], series, "makespan_s", 1 / 3600, "makespan (h)", colors, "makespan")
    for ax, attr, label in (
        (axes[1, 0], "utilization", "GPU utilization"),
        (axes[1, 1], "remaining", "jobs remaining"),
    ):
        for s, c in zip(series, colors, strict=True):
            if s.t_s.size:
                ls = LINESTYLES.get(s.kind, "-.")
                ax.step(s.t_s / 3600, getattr(s, attr), where="post", color=c, lw=0.8, ls=ls)
        ax.set_xlabel("time (h)")
        ax.set_ylabel(label)
        ax.set_title(f"{label} over time (first seed)")
    _bars(
        axes[1, 2], series, "comm_overhead", 1.0, "exposed comm / compute", colors,
        "communication overhead",
    )  # fmt: skip
    kinds = [k for k in dict.fromkeys(s.kind for s in series) if k != DEPLOYABLE]
    bottom = 0.0
    if kinds:
        _kind_legend(fig, kinds, any(s.kind == DEPLOYABLE for s in series))
        bottom = 0.05
    fig.tight_layout(rect=(0, bottom, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def _kind_legend(fig: Any, kinds: list[str], deployable: bool) -> None:
    """Under the figure: what plain, hatched and dotted marks stand for."""
    from matplotlib.patches import Patch

    handles = []
    if deployable:
        handles.append(Patch(facecolor="0.6", label="deployable: ranked (solid lines)"))
    for k in kinds:
        label = f"{MARKS.get(k, k)}: {LEGEND.get(k, 'not ranked (dash-dot lines)')}"
        handles.append(
            Patch(facecolor="white", edgecolor="0.3", hatch=HATCHES.get(k, "..."), label=label)
        )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9, frameon=False)
