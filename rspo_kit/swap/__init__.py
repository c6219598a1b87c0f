"""RSPO's reward swap: the paper's Algorithm 1 (``swap.mode`` rspo) and the earlier group_mixing design.

The paper's loop (``rspo_kit.swap.loop``; docs/training.md, "The paper's loop") is ``rspo_loop``, its
steps named calls in Algorithm 1's order:

- ``explorer_phase``: B <- A, then k X-updates of B on its own fresh rollouts scored by the dense reward;
- ``collect``: B's collection batch relabelled with the outcome (the swap) and stored in the
  ``LoopBuffer`` D with behaviour log-probs and off-policy advantages (``rspo_kit.swap.buffer``);
- ``actor_phase``: k X-updates of A on fresh on-policy tasks plus trajectories ``draw``-n from D
  (reward-based sampling by default), under the outcome alone;
- ``end_loop``: D <- ∅; ``loop_metrics``: what the loop did, as ``swap/*`` metrics.

``LoopSettings`` carries the loop's numbers and choices; the run that drives it (rollouts, updates,
B <- A) is a ``LoopRun``, implemented by ``rspo_kit.train.loop_run``. The off-policy objective (GePPO's
shifted clip, J = (1 − α)J_on + αJ_off) is math in ``rspo_kit.algos``.

The earlier design, ``swap.mode`` group_mixing, kept for the record of what ``results/`` measured:
``derive_explorer`` (B <- A every ``sync_every`` iterations, X-updates of B on the process reward),
``reward_swap`` (B's batch ``admit``-ted to a FIFO ``ReplayBuffer``, ``mixed_groups`` of A's groups and
replayed trajectories, scored by ``relabel_outcome``) and ``swap_metrics``.

Either way the swap is a change of reward signal (``EXPLORER_SIGNAL`` = process for B, ``ACTOR_SIGNAL``
= outcome for everything A learns from; see ``rspo_kit.rewards.signals``). The names below load on
first use, so that ``rspo_kit.swap.replay`` (whose ``ReplayFilter`` the config reads) stays light to
import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rspo_kit._lazy import lazy_exports, submodule_homes

if TYPE_CHECKING:
    from rspo_kit.swap.buffer import LoopBuffer, ReplayEntry, draw
    from rspo_kit.swap.explorer import derive_explorer, sync_explorer, syncs_at
    from rspo_kit.swap.loop import (
        LoopBatch,
        LoopRecord,
        LoopRun,
        LoopSettings,
        actor_phase,
        collect,
        end_loop,
        explorer_phase,
        loop_metrics,
        rspo_loop,
    )
    from rspo_kit.swap.relabel import ACTOR_SIGNAL, EXPLORER_SIGNAL, SwapResult, relabel_outcome, reward_swap
    from rspo_kit.swap.replay import FILTERS, ReplayBuffer, ReplayFilter, admit, group_outcomes, mixed_groups
    from rspo_kit.swap.stats import swap_metrics

__all__ = [
    "ACTOR_SIGNAL",
    "EXPLORER_SIGNAL",
    "FILTERS",
    "LoopBatch",
    "LoopBuffer",
    "LoopRecord",
    "LoopRun",
    "LoopSettings",
    "ReplayBuffer",
    "ReplayEntry",
    "ReplayFilter",
    "SwapResult",
    "actor_phase",
    "admit",
    "collect",
    "derive_explorer",
    "draw",
    "end_loop",
    "explorer_phase",
    "group_outcomes",
    "loop_metrics",
    "mixed_groups",
    "relabel_outcome",
    "reward_swap",
    "rspo_loop",
    "swap_metrics",
    "sync_explorer",
    "syncs_at",
]

_NAMES = {
    "buffer": ("LoopBuffer", "ReplayEntry", "draw"),
    "explorer": ("derive_explorer", "sync_explorer", "syncs_at"),
    "loop": (
        "LoopBatch",
        "LoopRecord",
        "LoopRun",
        "LoopSettings",
        "actor_phase",
        "collect",
        "end_loop",
        "explorer_phase",
        "loop_metrics",
        "rspo_loop",
    ),
    "relabel": ("ACTOR_SIGNAL", "EXPLORER_SIGNAL", "SwapResult", "relabel_outcome", "reward_swap"),
    "replay": ("FILTERS", "ReplayBuffer", "ReplayFilter", "admit", "group_outcomes", "mixed_groups"),
    "stats": ("swap_metrics",),
}
_HOME = submodule_homes(__name__, _NAMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOME)
