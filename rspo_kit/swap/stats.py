"""What the swap did in one iteration (RSPO step 6), as ``swap/*`` metrics."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from rspo_kit.rewards.diagnostics import hacking_rate, rank_agreement
from rspo_kit.swap.replay import group_outcomes


def _zero_variance(values: Sequence[float]) -> bool:
    return len(values) < 2 or max(values) - min(values) < 1e-12


def swap_metrics(
    actor: Sequence[Any],
    explorer: Sequence[Any],
    mixed: Sequence[Any],
    offpolicy: Sequence[bool],
    outcome: Callable[[Any], float],
    process_return: Callable[[Any], float],
    admitted: int,
    buffer_size: int,
) -> dict[str, float]:
    """``swap/*`` metrics: rescued groups, zero-variance shares, success rates, reward agreement.

    A group is *rescued* when the actor's own group had no outcome variance (no GRPO signal) and the
    mixed group has some: the replayed trajectories gave the actor something to learn from. Groups
    where every actor episode failed (``swap/all_failure_groups_before``) are the ones a replayed
    success can rescue; under a 0/1 outcome they are the zero-variance groups that did not all win.
    """
    before = group_outcomes(actor, outcome)
    after = group_outcomes(mixed, outcome)
    zero_before = [task for task, v in before.items() if _zero_variance(v)]
    all_failed = [task for task, won in group_outcomes(actor, lambda t: float(t.won)).items() if not any(won)]
    rescued = sum(not _zero_variance(after.get(task, [])) for task in zero_before)
    replayed = [t for t, off in zip(mixed, offpolicy, strict=True) if off]
    explorer_returns = [process_return(t) for t in explorer]
    explorer_outcomes = [outcome(t) for t in explorer]
    agreement = rank_agreement(explorer_returns, explorer_outcomes, [t.task_id for t in explorer])
    hacking = hacking_rate(explorer_returns, [t.won for t in explorer]) if explorer else None
    return {
        "swap/rescued_groups": float(rescued),
        "swap/zero_var_groups_before": len(zero_before) / max(1, len(before)),
        "swap/all_failure_groups_before": len(all_failed) / max(1, len(before)),
        "swap/zero_var_groups_after": sum(_zero_variance(v) for v in after.values()) / max(1, len(after)),
        "swap/replayed": float(len(replayed)),
        "swap/replay_success_rate": (sum(t.won for t in replayed) / len(replayed)) if replayed else math.nan,
        "swap/explorer_success": (sum(t.won for t in explorer) / len(explorer)) if explorer else math.nan,
        "swap/explorer_process_return": (sum(explorer_returns) / len(explorer_returns))
        if explorer
        else math.nan,
        "swap/admitted": float(admitted),
        "swap/buffer_size": float(buffer_size),
        "swap/process_outcome_tau": agreement.mean_tau,
        "swap/explorer_hacking_rate": hacking.rate if hacking else math.nan,
    }


# the paper's Table 6 counts "identical states visited within a fixed window" without giving the window:
# here the 8 steps before a step, in its own episode (a loop of go-to and back is caught, a return to a
# room many steps later is not)
REPEAT_WINDOW = 8


def repeated_states(trajs: Sequence[Any], window: int = REPEAT_WINDOW) -> int:
    """Steps taken in a state (``anchor``) that the same episode was in within its last ``window`` steps:
    a high count is an agent going in circles (the paper's Table 6: 1,167 for GRPO, 623 for RSPO).

    >>> from types import SimpleNamespace as NS
    >>> episode = NS(steps=[NS(anchor=a) for a in "abab" + "c"])
    >>> repeated_states([episode]), repeated_states([episode], window=1)
    (2, 0)
    """
    count = 0
    for t in trajs:
        anchors = [s.anchor for s in t.steps]
        count += sum(a in anchors[max(0, i - window) : i] for i, a in enumerate(anchors))
    return count
