"""Means and 95% t-intervals over independent replicates: the seeds of a sweep, the tasks of a paired
difference."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (above 30: the normal 1.96
# plus the first-order correction 2.4/df, within 0.002 of the exact value)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (for 95% intervals)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval of independent replicates (NaN bounds for a single value).

    >>> [round(v, 3) for v in mean_ci([0.2, 0.4, 0.6])]
    [0.4, -0.097, 0.897]
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if len(x) == 1:
        return (mean, math.nan, math.nan)
    half = t_quantile_975(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return (mean, mean - half, mean + half)
