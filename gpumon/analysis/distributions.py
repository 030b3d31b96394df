"""Exclusive vs shared distributions of one metric: medians, KS and chi-square tests, effect sizes.

Samples taken within a run are autocorrelated, so the tests' p-values come out
too small; the effect sizes (median shift, Wasserstein distance) are what to
judge by.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from gpumon.extras import ANALYSIS, install_hint

CAUTION = (
    "Caution: samples within a run are autocorrelated, so these p-values are too small; "
    "judge by the effect sizes (median shift, Wasserstein distance)."
)
TESTS_NEED = (
    "distribution tests (KS, chi-square, Wasserstein) skipped: they need scipy, which is not installed "
    f"({install_hint(ANALYSIS)})"
)
MIN_SAMPLES = 2
MAX_BINS = 10
MIN_PER_BIN = 5


@dataclass(frozen=True)
class Metric:
    """A quantity compared between conditions: key, label for tables and plots, unit."""

    key: str
    label: str
    unit: str


COPY_BANDWIDTH = Metric("copy_bandwidth", "per-copy bandwidth", "B/s")
COPY_RATE = Metric("copy_bytes_per_s", "copy bytes/s of wall time", "B/s")
COPY_NOTE = (
    "Per-copy bandwidth is bytes ÷ the CUDA-event time of each copy: while sharing, those events include the "
    "time the job's context waits for its time slice, so it falls even on an idle link. What the link carried "
    "is the 'link busy' column of the why table (PCIe traffic ÷ the link's capacity)."
)
CPU_COPY_NOTE = (
    "On the CPU a job's 'copies' are RAM-to-RAM memcpy timed on the host: per-copy bandwidth is bytes ÷ the time "
    "of each memcpy (no PCIe link, no time slice); a fall under sharing is the cores or memory bandwidth shared."
)
GPU_UTIL = Metric("gpu_util", "GPU util", "%")
CPU = Metric("cpu_pct", "CPU", "%")
METRICS = (COPY_BANDWIDTH, COPY_RATE, GPU_UTIL, CPU)


@dataclass(frozen=True)
class DistributionTest:
    """One metric, exclusive vs shared: sizes, medians, tests and effect sizes (NaN when undefined)."""

    metric: str
    label: str
    unit: str
    n_exclusive: int
    n_shared: int
    median_exclusive: float
    median_shared: float
    median_shift: float
    relative_shift: float
    wasserstein: float
    ks_statistic: float
    ks_pvalue: float
    chi2: float
    chi2_pvalue: float
    chi2_dof: int

    def to_dict(self) -> dict[str, object]:
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in asdict(self).items()
        }


def common_bins(pooled: np.ndarray) -> np.ndarray:
    """Bin edges for both samples: equal-frequency bins of the pooled sample (about MIN_PER_BIN
    values a bin, at most MAX_BINS), or equal-width ones when few distinct values collapse those."""
    bins = max(2, min(MAX_BINS, len(pooled) // MIN_PER_BIN))
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)))
    return edges if len(edges) >= 3 else np.histogram_bin_edges(pooled, bins=bins)


def contingency(exclusive: np.ndarray, shared: np.ndarray) -> np.ndarray | None:
    """Counts of both samples on common bins, empty bins dropped (None: fewer than two bins, no chi-square)."""
    edges = common_bins(np.concatenate([exclusive, shared]))
    if len(edges) < 3:
        return None
    table = np.array([np.histogram(exclusive, edges)[0], np.histogram(shared, edges)[0]])
    table = table[:, table.sum(axis=0) > 0]
    return table if table.shape[1] >= 2 else None


@dataclass(frozen=True, eq=False)
class Samples:
    """One metric's finite samples on both sides and their contingency table: what the scipy tests take."""

    metric: Metric
    exclusive: np.ndarray
    shared: np.ndarray
    table: np.ndarray | None


def samples_of(metric: Metric, exclusive: np.ndarray, shared: np.ndarray) -> Samples | None:
    """The finite values of both sides (None when a side has fewer than MIN_SAMPLES)."""
    exclusive = exclusive[np.isfinite(exclusive)]
    shared = shared[np.isfinite(shared)]
    if len(exclusive) < MIN_SAMPLES or len(shared) < MIN_SAMPLES:
        return None
    return Samples(metric, exclusive, shared, contingency(exclusive, shared))


Stats = tuple[float, float, float, float, float, int]


def scipy_stats(batch: Sequence[Samples]) -> list[Stats]:
    """KS statistic and p-value, Wasserstein distance, chi-square statistic, p-value and dof of each."""
    # deferred: scipy is the analysis extra, and scipy.stats adds 0.9 s CPU to gpumon compare
    from scipy.stats import chi2_contingency, ks_2samp, wasserstein_distance

    out: list[Stats] = []
    for s in batch:
        with warnings.catch_warnings():
            # scipy's exact KS p-value fails for some small samples (five a side, nearly alike) and says so on the
            # user's terminal while it returns the asymptotic one: the figure is right, the warning is noise
            warnings.filterwarnings(
                "ignore", "ks_2samp: Exact calculation unsuccessful", RuntimeWarning
            )
            ks = ks_2samp(s.exclusive, s.shared)
        chi2 = chi2_contingency(s.table) if s.table is not None else None
        out.append(
            (
                float(ks.statistic),
                float(ks.pvalue),
                float(wasserstein_distance(s.exclusive, s.shared)),
                float(chi2.statistic) if chi2 is not None else math.nan,
                float(chi2.pvalue) if chi2 is not None else math.nan,
                int(chi2.dof) if chi2 is not None else 0,
            )
        )
    return out


def result_of(s: Samples, stats: Stats) -> DistributionTest:
    """The DistributionTest of ``s`` from its ``scipy_stats``."""
    ks_d, ks_p, wasserstein, chi2, chi2_p, dof = stats
    med_x = float(np.median(s.exclusive))
    med_s = float(np.median(s.shared))
    return DistributionTest(
        metric=s.metric.key,
        label=s.metric.label,
        unit=s.metric.unit,
        n_exclusive=len(s.exclusive),
        n_shared=len(s.shared),
        median_exclusive=med_x,
        median_shared=med_s,
        median_shift=med_s - med_x,
        relative_shift=(med_s - med_x) / abs(med_x) if med_x else math.nan,
        wasserstein=wasserstein,
        ks_statistic=ks_d,
        ks_pvalue=ks_p,
        chi2=chi2,
        chi2_pvalue=chi2_p,
        chi2_dof=dof,
    )


def compare_samples(
    metric: Metric, exclusive: np.ndarray, shared: np.ndarray
) -> DistributionTest | None:
    """Tests and effect sizes of one metric (None when a side has fewer than MIN_SAMPLES values)."""
    s = samples_of(metric, exclusive, shared)
    return result_of(s, scipy_stats([s])[0]) if s is not None else None


def histogram_counts(
    exclusive: np.ndarray, shared: np.ndarray, bins: int = 20
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts of both samples on common equal-width bins: (edges, exclusive counts, shared counts)."""
    pooled = np.concatenate([exclusive, shared])
    edges = (
        np.histogram_bin_edges(pooled, bins=bins) if len(pooled) else np.linspace(0, 1, bins + 1)
    )
    return edges, np.histogram(exclusive, edges)[0], np.histogram(shared, edges)[0]


def display_scale(unit: str, values: np.ndarray) -> tuple[float, str]:
    """A divisor and unit that keep byte rates readable (B/s, kB/s, MB/s, GB/s)."""
    if unit != "B/s":
        return 1.0, unit
    peak = float(np.nanmax(np.abs(values))) if len(values) else 0.0
    for factor, name in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if peak >= factor:
            return factor, name
    return 1.0, unit
