"""Misalignment diagnostics: where dense process rewards and the sparse outcome disagree.

Three views of a batch, from coarse to fine:

- ``rank_agreement``: Kendall τ-b between process return and outcome within each group (the
  trajectories of one task), which is the ordering a group-relative advantage acts on;
- ``hacking_rate``: the share of the top quartile by process return whose outcome failed;
- ``disagreement_table``: every step's process-reward sign against whether its trajectory succeeded.

The core functions take plain arrays; ``diagnose`` takes the per-step DataFrame (columns
``group_id, traj_id, step, process_reward, outcome``, optional boolean ``won``) and runs all three.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

STEP_COLUMNS = ("group_id", "traj_id", "step", "process_reward", "outcome")


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall τ-b of two equally long sequences; NaN when either has no variance (or n < 2).

    τ-b = Σ_{i<j} sign(x_i − x_j)·sign(y_i − y_j) / √(n_x · n_y), where n_x (n_y) counts the pairs
    not tied in x (y). Ties in either variable lower the denominator, so τ-b reaches ±1 with ties,
    which matters here: outcomes are mostly 0/1. O(n²) memory, fine for groups of tens.

    >>> round(kendall_tau_b([0.1, 0.5, 0.9], [0, 1, 1]), 6)   # 2 / √(3 · 2)
    0.816497
    >>> kendall_tau_b([0.1, 0.5, 0.9], [1, 1, 1])
    nan
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of equal length, got shapes {x.shape} and {y.shape}")
    upper = np.triu_indices(len(x), k=1)
    sign_x = np.sign(x[:, None] - x[None, :])[upper]  # (n(n-1)/2,)
    sign_y = np.sign(y[:, None] - y[None, :])[upper]
    untied_x, untied_y = np.count_nonzero(sign_x), np.count_nonzero(sign_y)
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return float(np.dot(sign_x, sign_y) / math.sqrt(untied_x * untied_y))


@dataclass(frozen=True)
class RankAgreement:
    """Kendall τ-b per group; ``mean_tau`` averages the groups where τ is defined."""

    per_group: pd.Series  # τ-b indexed by group_id; NaN where a group has no variance
    mean_tau: float  # NaN when no group has variance in both process return and outcome
    n_groups: int
    n_undefined: int  # groups with < 2 trajectories or constant process return or outcome


def rank_agreement(
    process_return: Sequence[float], outcome: Sequence[float], group_id: Sequence
) -> RankAgreement:
    """Kendall τ-b between process return and outcome within each group, one value per trajectory.

    A group whose outcomes are all equal (all failed, all won) or whose process returns are all
    equal has no ranking to agree with: its τ is NaN and it is left out of ``mean_tau`` rather than
    counted as 0, so a batch of all-failing groups does not read as "process reward uninformative".

    >>> ra = rank_agreement([0.2, 0.8, 0.5, 0.1], [0, 1, 0, 0], ["a", "a", "b", "b"])
    >>> ra.per_group.to_dict(), ra.mean_tau, ra.n_undefined
    ({'a': 1.0, 'b': nan}, 1.0, 1)
    """
    frame = pd.DataFrame({"group_id": group_id, "process_return": process_return, "outcome": outcome})
    taus = {
        gid: kendall_tau_b(group["process_return"].to_numpy(), group["outcome"].to_numpy())
        for gid, group in frame.groupby("group_id", sort=True)
    }
    per_group = pd.Series(taus, dtype=float, name="kendall_tau").rename_axis("group_id")
    defined = per_group.dropna()
    mean_tau = float(defined.mean()) if len(defined) else math.nan
    return RankAgreement(per_group, mean_tau, len(per_group), int(per_group.isna().sum()))


@dataclass(frozen=True)
class HackingReport:
    """How often a high process return comes with a failed outcome."""

    rate: float  # n_hacked / n_top; NaN for an empty batch
    threshold: float  # process return at the quantile; trajectories at or above it are "top"
    n_top: int
    n_hacked: int


def hacking_rate(
    process_return: Sequence[float], succeeded: Sequence[bool], *, quantile: float = 0.75
) -> HackingReport:
    """Share of the trajectories in the top quartile of process return whose outcome failed.

    "Top" is process return ≥ the ``quantile`` of the batch (linear interpolation), ties included,
    so a batch of equal returns puts everyone on top and the rate becomes the failure rate.

    >>> report = hacking_rate([0.1, 0.2, 0.9, 1.0], [False, False, True, False])
    >>> report.n_top, report.n_hacked, report.rate
    (1, 1, 1.0)
    """
    if not (0.0 <= quantile <= 1.0):
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    returns = np.asarray(process_return, dtype=float)
    won = np.asarray(succeeded, dtype=bool)
    if returns.shape != won.shape:
        raise ValueError(f"process_return and succeeded differ in shape: {returns.shape} vs {won.shape}")
    finite = np.isfinite(returns)  # a trajectory without a process return cannot be on top
    if not finite.any():
        return HackingReport(math.nan, math.nan, 0, 0)
    threshold = float(np.quantile(returns[finite], quantile))
    top = finite & (returns >= threshold)
    n_top, n_hacked = int(top.sum()), int((top & ~won).sum())
    return HackingReport(n_hacked / n_top, threshold, n_top, n_hacked)


def _check_columns(steps: pd.DataFrame) -> None:
    missing = [c for c in STEP_COLUMNS if c not in steps.columns]
    if missing:
        raise KeyError(f"steps lacks columns {missing}; needs {list(STEP_COLUMNS)}")


def _succeeded(steps: pd.DataFrame, success_threshold: float) -> pd.Series:
    """Per row: the boolean ``won`` column when there is one, else ``outcome ≥ success_threshold``."""
    if "won" in steps.columns:
        return steps["won"].astype(bool)
    return steps["outcome"] >= success_threshold


def disagreement_table(steps: pd.DataFrame, *, success_threshold: float = 1.0) -> pd.DataFrame:
    """One row per step: its process-reward sign against whether its trajectory eventually succeeded.

    ``kind`` is ``"rewarded_failure"`` (process reward > 0 on a trajectory that failed),
    ``"unrewarded_success"`` (process reward ≤ 0 on one that succeeded) or ``"agree"``; ``disagrees``
    flags the first two, so ``table[table.disagrees]`` lists them. Success as in ``trajectory_table``.

    >>> steps = pd.DataFrame({"group_id": 0, "traj_id": [1, 1, 2], "step": [0, 1, 0],
    ...                       "process_reward": [0.5, -0.1, 0.2], "outcome": [1.0, 1.0, 0.0]})
    >>> disagreement_table(steps)["kind"].tolist()
    ['agree', 'unrewarded_success', 'rewarded_failure']
    """
    _check_columns(steps)
    table = steps.loc[:, list(STEP_COLUMNS)].copy()
    table["succeeded"] = _succeeded(steps, success_threshold)
    table["process_sign"] = np.sign(table["process_reward"].to_numpy()).astype(int)
    rewarded = table["process_reward"] > 0
    table["kind"] = np.select(
        [rewarded & ~table["succeeded"], ~rewarded & table["succeeded"]],
        ["rewarded_failure", "unrewarded_success"],
        default="agree",
    )
    table["disagrees"] = table["kind"] != "agree"
    return table.reset_index(drop=True)


def disagreement_by_step(table: pd.DataFrame) -> pd.DataFrame:
    """Per step index: how many steps there were and the share of each disagreement kind."""
    counts = pd.crosstab(table["step"], table["kind"])
    for kind in ("agree", "rewarded_failure", "unrewarded_success"):
        if kind not in counts:
            counts[kind] = 0
    n_steps = counts.sum(axis=1)
    by_step = counts[["rewarded_failure", "unrewarded_success"]].div(n_steps, axis=0)
    by_step.insert(0, "n_steps", n_steps)
    by_step["disagreement_rate"] = by_step["rewarded_failure"] + by_step["unrewarded_success"]
    by_step.columns.name = None
    return by_step


def trajectory_table(
    steps: pd.DataFrame, *, gamma: float = 1.0, success_threshold: float = 1.0
) -> pd.DataFrame:
    """One row per (group_id, traj_id): process_return (Σ_t γ^t r_t in step order), outcome, succeeded.

    Trajectories are keyed by group and id together, so ids may restart in every group. ``outcome``
    is read from the trajectory's first row (it is the same on every row). ``succeeded`` comes from a
    boolean ``won`` column when there is one, else ``outcome ≥ success_threshold``: the default 1.0
    fits the default outcomes (success = 1.0, WebShop score / 100 = 1.0 only on success); with an
    invalid-action penalty a success scores below 1, so pass ``won`` or lower the threshold.
    """
    _check_columns(steps)
    if not (0.0 <= gamma <= 1.0):
        raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
    keys = ["group_id", "traj_id"]
    ordered = steps.sort_values([*keys, "step"], kind="stable")
    position = ordered.groupby(keys, sort=False).cumcount().to_numpy()
    ordered = ordered.assign(
        discounted=ordered["process_reward"].to_numpy(dtype=float) * gamma**position,
        succeeded=_succeeded(ordered, success_threshold),
    )
    table = ordered.groupby(keys, sort=True).agg(
        process_return=("discounted", "sum"), outcome=("outcome", "first"), succeeded=("succeeded", "first")
    )
    return table.reset_index()


@dataclass(frozen=True)
class Diagnostics:
    """All three views of one batch, plus the per-trajectory table they were computed from."""

    trajectories: pd.DataFrame  # group_id, traj_id, process_return, outcome, succeeded
    rank_agreement: RankAgreement
    hacking: HackingReport
    disagreement: pd.DataFrame  # one row per step, see ``disagreement_table``
    disagreement_by_step: pd.DataFrame  # one row per step index, see ``disagreement_by_step``


def diagnose(
    steps: pd.DataFrame, *, gamma: float = 1.0, success_threshold: float = 1.0, quantile: float = 0.75
) -> Diagnostics:
    """Run every diagnostic on a per-step frame (``STEP_COLUMNS``, optional ``won``).

    >>> steps = pd.DataFrame({"group_id": 0, "traj_id": [1, 1, 2, 2], "step": [0, 1, 0, 1],
    ...                       "process_reward": [0.5, 0.5, 0.1, 0.0], "outcome": [1.0, 1.0, 0.0, 0.0]})
    >>> report = diagnose(steps)
    >>> report.rank_agreement.mean_tau, report.hacking.rate, int(report.disagreement.disagrees.sum())
    (1.0, 0.0, 1)
    """
    trajectories = trajectory_table(steps, gamma=gamma, success_threshold=success_threshold)
    table = disagreement_table(steps, success_threshold=success_threshold)
    return Diagnostics(
        trajectories=trajectories,
        rank_agreement=rank_agreement(
            trajectories["process_return"], trajectories["outcome"], trajectories["group_id"]
        ),
        hacking=hacking_rate(trajectories["process_return"], trajectories["succeeded"], quantile=quantile),
        disagreement=table,
        disagreement_by_step=disagreement_by_step(table),
    )
