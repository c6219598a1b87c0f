"""Lift-off counts: in how many seeds a run left a stall, and whether two variants' rates differ.

Where a start rarely wins, runs split in two: most stay near zero, a few take off, and a mean over
seeds with its t-interval describes neither (a bimodal sample). The question is then a rate: in how
many seeds did the run end above a threshold? ``lift_off_table`` counts it for the two sides of a
pair, seed by seed, and tests the difference two ways: the exact sign test on the seeds where exactly
one side took off (McNemar's exact test: cells that share a seed share their warm start and task
draws, so the seeds are pairs), and Fisher's exact test on the two counts (unpaired, every seed of
each side). Both are two-sided and exact, for the handful of seeds a CPU study has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from rspo_kit.experiments.grid import SEED_KEY
from rspo_kit.experiments.pairing import Pair, paired_groups
from rspo_kit.experiments.tables import unit_of, value_label, value_text


def sign_test(only_a: int, only_b: int) -> float:
    """Two-sided exact p of ``only_a`` against ``only_b`` discordant pairs under a fair coin (McNemar's
    exact test): twice the smaller tail of Binomial(n, 1/2), at most 1.

    >>> sign_test(4, 1), sign_test(0, 0), round(sign_test(9, 1), 4)
    (0.375, 1.0, 0.0215)
    """
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def fisher_exact(a_yes: int, a_n: int, b_yes: int, b_n: int) -> float:
    """Two-sided Fisher exact p of ``a_yes`` of ``a_n`` against ``b_yes`` of ``b_n``: the probability,
    with the margins fixed, of every table no more likely than the one seen.

    >>> fisher_exact(2, 5, 1, 5), round(fisher_exact(6, 15, 1, 15), 4), fisher_exact(0, 3, 0, 3)
    (1.0, 0.0801, 1.0)
    """
    yes, n = a_yes + b_yes, a_n + b_n
    if not (0 <= a_yes <= a_n and 0 <= b_yes <= b_n):
        raise ValueError(f"counts must lie within their totals, got {a_yes}/{a_n} and {b_yes}/{b_n}")

    def probability(k: int) -> float:  # k of the successes on side a
        return math.comb(a_n, k) * math.comb(b_n, yes - k) / math.comb(n, yes)

    seen = probability(a_yes)
    ks = range(max(0, yes - b_n), min(yes, a_n) + 1)
    return min(1.0, sum(p for p in map(probability, ks) if p <= seen * (1 + 1e-9)))


def lift_off_table(
    table: pd.DataFrame, pairs: Sequence[Pair], by: Sequence[str], metric: str, threshold: float
) -> str:
    """For each pair and group of ``by``: the seeds where each side's ``metric`` ends above
    ``threshold`` (lifted off) out of its seeds, the seeds where only a or only b did, the exact sign
    test on those (paired by seed) and Fisher's exact test on the two counts (unpaired).

    >>> t = pd.DataFrame({"variant": ["rspo"] * 4 + ["plain"] * 4, "train.seed": [0, 1, 2, 3] * 2,
    ...     "final_success": [0.75, 0.8, 0.0, 0.5, 0.0, 0.0, 0.0, 0.6]})
    >>> print(lift_off_table(t, [("variant", "rspo", "plain")], [], "final_success", 0.4))
    | difference | lifted off (final_success > 40.0) | only a / only b | sign test p (paired) | Fisher p (unpaired) |
    |---|---|---|---|---|
    | variant=rspo − variant=plain | 3 of 4 (0, 1, 3) / 1 of 4 (3) | 2 / 0 | 0.5 | 0.486 |
    """
    if SEED_KEY not in table:
        raise ValueError(f"lift-off counts pair by seed and need the grid key {SEED_KEY!r}")
    if metric not in table:
        raise ValueError(f"no metric {metric!r} in the finished cells; they have {sorted(table.columns)}")
    shown = value_text(threshold, unit_of(metric, table[metric]))
    header = [*by, "difference", f"lifted off ({metric} > {shown})", "only a / only b"]
    header += ["sign test p (paired)", "Fisher p (unpaired)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, group, first, second in paired_groups(table, pairs, by):
        a, b = (side[metric].dropna() > threshold for side in (first, second))
        if not (len(a) and len(b)):
            continue
        both = sorted(set(a.index) & set(b.index))
        only_a = sum(bool(a[s] and not b[s]) for s in both)
        only_b = sum(bool(b[s] and not a[s]) for s in both)

        def count(lifted: pd.Series) -> str:
            seeds = ", ".join(str(s) for s in sorted(lifted.index) if lifted[s])
            return f"{int(lifted.sum())} of {len(lifted)}" + (f" ({seeds})" if seeds else "")

        row = [*map(value_label, group), label, f"{count(a)} / {count(b)}", f"{only_a} / {only_b}"]
        row += [
            f"{sign_test(only_a, only_b):.3g}",
            f"{fisher_exact(int(a.sum()), len(a), int(b.sum()), len(b)):.3g}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
