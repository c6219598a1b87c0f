"""Diagnostics: Kendall τ-b against a slow reference, hacking rate, disagreement tables, diagnose."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rspo_kit.rewards import (
    diagnose,
    disagreement_by_step,
    disagreement_table,
    hacking_rate,
    kendall_tau_b,
    rank_agreement,
    trajectory_table,
)


def slow_kendall_tau_b(x, y):
    """Textbook τ-b: (C − D) / √((n0 − n1)(n0 − n2)), ties counted from tie-group sizes."""
    n = len(x)
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            product = (x[i] - x[j]) * (y[i] - y[j])
            if product > 0:
                concordant += 1
            elif product < 0:
                discordant += 1
    n0 = n * (n - 1) / 2

    def tied_pairs(values):
        counts = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        return sum(t * (t - 1) / 2 for t in counts.values())

    denominator = (n0 - tied_pairs(x)) * (n0 - tied_pairs(y))
    return math.nan if denominator == 0 else (concordant - discordant) / math.sqrt(denominator)


# Small integer values so that ties are common, as they are with 0/1 outcomes.
samples = st.integers(0, 12).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-3, 3), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@given(samples)
def test_kendall_tau_b_matches_the_slow_reference(xy):
    x, y = xy
    fast, slow = kendall_tau_b(x, y), slow_kendall_tau_b(x, y)
    if math.isnan(slow):
        assert math.isnan(fast)
    else:
        assert fast == pytest.approx(slow, abs=1e-12)
        assert -1.0 - 1e-12 <= fast <= 1.0 + 1e-12


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=12, unique=True))
def test_kendall_tau_b_is_one_with_itself_and_minus_one_reversed(x):
    assert kendall_tau_b(x, x) == pytest.approx(1.0)
    assert kendall_tau_b(x, [-v for v in x]) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        ([], [], math.nan),
        ([1.0], [1.0], math.nan),
        ([1, 2, 3], [0, 0, 0], math.nan),  # an all-failed group: no outcome variance
        ([5, 5, 5], [0, 1, 0], math.nan),  # a constant process return
        ([1, 2, 3, 4], [0, 0, 1, 1], 4 / math.sqrt(6 * 4)),  # 4 of 6 pairs untied in y, all concordant
        ([1, 2, 3, 4], [1, 1, 0, 0], -4 / math.sqrt(6 * 4)),
        ([1, 1, 2, 2], [0, 0, 1, 1], 1.0),  # ties on both sides can still agree perfectly
    ],
)
def test_kendall_tau_b_table(x, y, expected):
    got = kendall_tau_b(x, y)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected)


def test_kendall_tau_b_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="equal length"):
        kendall_tau_b([1, 2], [1])


def test_rank_agreement_per_group_and_mean_skips_undefined_groups():
    report = rank_agreement(
        process_return=[0.9, 0.1, 0.5, 0.2, 0.3, 0.4, 0.8],
        outcome=[1, 0, 0, 0, 1, 0, 1],
        group_id=["agree", "agree", "flat", "flat", "reverse", "reverse", "single"],
    )
    assert report.per_group["agree"] == pytest.approx(1.0)
    assert report.per_group["reverse"] == pytest.approx(-1.0)
    assert math.isnan(report.per_group["flat"]) and math.isnan(report.per_group["single"])
    assert report.mean_tau == pytest.approx(0.0)
    assert (report.n_groups, report.n_undefined) == (4, 2)
    assert report.per_group.index.name == "group_id"


def test_rank_agreement_of_only_undefined_groups_is_nan():
    report = rank_agreement([0.1, 0.2], [0, 0], [7, 7])
    assert math.isnan(report.mean_tau) and report.n_undefined == 1


HACKING_CASES = [
    # process_return, succeeded, n_top, n_hacked, rate
    ([0.1, 0.2, 0.9, 1.0], [False, False, True, False], 1, 1, 1.0),
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [False] * 6 + [True, True], 2, 0, 0.0),
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [True] * 6 + [False, True], 2, 1, 0.5),
    ([0.5, 0.5, 0.5, 0.5], [True, False, False, False], 4, 3, 0.75),  # ties: everyone is on top
]


@pytest.mark.parametrize(("returns", "succeeded", "n_top", "n_hacked", "rate"), HACKING_CASES)
def test_hacking_rate_table(returns, succeeded, n_top, n_hacked, rate):
    report = hacking_rate(returns, succeeded)
    assert (report.n_top, report.n_hacked) == (n_top, n_hacked)
    assert report.rate == pytest.approx(rate)


def test_hacking_rate_of_an_empty_batch_is_nan_and_bad_quantile_fails():
    assert math.isnan(hacking_rate([], []).rate)
    with pytest.raises(ValueError, match="quantile"):
        hacking_rate([1.0], [True], quantile=75)


@given(st.lists(st.tuples(st.floats(-10, 10, allow_nan=False), st.booleans()), min_size=1, max_size=30))
def test_hacking_rate_is_a_share_of_a_non_empty_top(batch):
    returns, succeeded = zip(*batch, strict=True)
    report = hacking_rate(returns, succeeded)
    assert 1 <= report.n_top <= len(batch)
    assert 0.0 <= report.rate <= 1.0
    assert max(returns) >= report.threshold


def _steps_frame() -> pd.DataFrame:
    # group 0: traj 1 succeeds with positive process rewards, traj 2 fails while rewarded (hacked);
    # group 1: traj 3 succeeds with a zero step, traj 4 fails with no process reward.
    rows = [
        (0, 1, 0, 0.5, 1.0),
        (0, 1, 1, 0.5, 1.0),
        (0, 2, 0, 0.6, 0.0),
        (0, 2, 1, 0.6, 0.0),
        (1, 3, 1, 0.25, 1.0),
        (1, 3, 0, 0.0, 1.0),  # out of order on purpose: steps are sorted by index
        (1, 4, 0, -0.1, 0.0),
        (1, 4, 1, 0.0, 0.0),
    ]
    return pd.DataFrame(rows, columns=["group_id", "traj_id", "step", "process_reward", "outcome"])


def test_trajectory_table_sums_in_step_order_with_discount():
    table = trajectory_table(_steps_frame(), gamma=0.5).set_index("traj_id")
    assert table.loc[1, "process_return"] == pytest.approx(0.5 + 0.5 * 0.5)
    assert table.loc[3, "process_return"] == pytest.approx(0.0 + 0.5 * 0.25)  # step 0 first
    assert table["succeeded"].tolist() == [True, False, True, False]
    assert table["group_id"].tolist() == [0, 0, 1, 1]


def test_trajectory_table_prefers_a_won_column_and_names_missing_columns():
    steps = _steps_frame().assign(outcome=lambda f: f["outcome"] - 0.2, won=lambda f: f["outcome"] > 0.5)
    assert trajectory_table(steps)["succeeded"].tolist() == [True, False, True, False]
    assert not trajectory_table(steps.drop(columns="won"))["succeeded"].any()  # 0.8 < threshold 1.0
    with pytest.raises(KeyError, match="process_reward"):
        trajectory_table(steps.drop(columns="process_reward"))


def test_trajectory_ids_may_restart_in_every_group():
    steps = _steps_frame().assign(traj_id=lambda f: f["traj_id"] % 2)  # ids 1, 0 in both groups
    table = trajectory_table(steps)
    assert len(table) == 4
    assert table["process_return"].tolist() == pytest.approx([1.2, 1.0, -0.1, 0.25])


def test_disagreement_table_kinds_and_by_step_rates():
    steps = _steps_frame()
    table = disagreement_table(steps)
    kinds = table.set_index(["traj_id", "step"])["kind"]
    assert kinds[(1, 0)] == "agree"
    assert kinds[(2, 0)] == "rewarded_failure"
    assert kinds[(3, 0)] == "unrewarded_success"  # process 0 on a success
    assert kinds[(4, 0)] == "agree"
    assert table["disagrees"].sum() == 3
    assert set(table["process_sign"]) == {-1, 0, 1}

    by_step = disagreement_by_step(table)
    assert by_step.loc[0, "n_steps"] == 4
    assert by_step.loc[0, "rewarded_failure"] == pytest.approx(0.25)
    assert by_step.loc[0, "unrewarded_success"] == pytest.approx(0.25)
    assert by_step.loc[1, "disagreement_rate"] == pytest.approx(0.25)


def test_disagreement_by_step_when_every_step_agrees():
    steps = _steps_frame().query("traj_id == 1")
    by_step = disagreement_by_step(disagreement_table(steps))
    assert by_step["disagreement_rate"].tolist() == [0.0, 0.0]


def test_diagnose_matches_the_array_functions():
    steps = _steps_frame()
    report = diagnose(steps)
    trajectories = report.trajectories
    expected = rank_agreement(
        trajectories["process_return"], trajectories["outcome"], trajectories["group_id"]
    )
    assert report.rank_agreement.mean_tau == pytest.approx(expected.mean_tau)
    assert report.rank_agreement.per_group[0] == pytest.approx(-1.0)  # the hacked trajectory ranks first
    assert report.rank_agreement.per_group[1] == pytest.approx(1.0)
    assert report.hacking.n_top == 1 and report.hacking.rate == 1.0  # traj 2 has the top return, failed
    assert len(report.disagreement) == len(steps)
    assert list(report.disagreement_by_step.index) == [0, 1]


@given(st.integers(0, 2**32 - 1))
def test_diagnose_on_random_batches_stays_in_range(seed):
    rng = np.random.default_rng(seed)
    n_groups, group_size, horizon = 3, 4, 5
    rows = []
    for g in range(n_groups):
        for k in range(group_size):
            traj = g * group_size + k
            outcome = float(rng.random() < 0.4)
            rows += [(g, traj, t, float(rng.normal()), outcome) for t in range(horizon)]
    report = diagnose(
        pd.DataFrame(rows, columns=["group_id", "traj_id", "step", "process_reward", "outcome"])
    )
    taus = report.rank_agreement.per_group.dropna()
    assert ((taus >= -1 - 1e-12) & (taus <= 1 + 1e-12)).all()
    assert report.rank_agreement.n_groups == n_groups
    assert len(report.trajectories) == n_groups * group_size
    assert 0.0 <= report.hacking.rate <= 1.0
