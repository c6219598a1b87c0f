"""RSPO's reward swap, as the named steps of DESIGN.md section 1 that the trainer calls in order:

- ``derive_explorer`` (step 2): B <- A every ``sync_every`` iterations, its optimizer moments
  cleared, then X-updates of B on the process reward (``rspo_kit.swap.explorer``);
- ``reward_swap`` (steps 4-5): D_B ``admit``-ted to the ``ReplayBuffer`` through its filter,
  ``mixed_groups`` of the actor's groups and replayed trajectories, the mixed batch scored by
  ``relabel_outcome`` (``rspo_kit.swap.relabel``, ``rspo_kit.swap.replay``);
- ``swap_metrics`` (step 6): what the swap did, as ``swap/*`` metrics (``rspo_kit.swap.stats``).

The swap is a change of reward signal (``EXPLORER_SIGNAL`` = process for B, ``ACTOR_SIGNAL`` =
outcome for everything A learns from; see ``rspo_kit.rewards.signals``). The loop that calls these
steps is ``rspo_kit.train.trainer.Trainer.step``. The names below load on first use, so that
``rspo_kit.swap.replay`` (whose ``ReplayFilter`` the config reads) stays light to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rspo_kit._lazy import lazy_exports

if TYPE_CHECKING:
    from rspo_kit.swap.explorer import derive_explorer, sync_explorer, syncs_at
    from rspo_kit.swap.relabel import ACTOR_SIGNAL, EXPLORER_SIGNAL, SwapResult, relabel_outcome, reward_swap
    from rspo_kit.swap.replay import FILTERS, ReplayBuffer, ReplayFilter, admit, group_outcomes, mixed_groups
    from rspo_kit.swap.stats import swap_metrics

_HOME = {name: "rspo_kit.swap.explorer" for name in ("derive_explorer", "sync_explorer", "syncs_at")}
_HOME |= {
    name: "rspo_kit.swap.relabel"
    for name in ("ACTOR_SIGNAL", "EXPLORER_SIGNAL", "SwapResult", "relabel_outcome", "reward_swap")
}
_HOME |= {
    name: "rspo_kit.swap.replay"
    for name in ("FILTERS", "ReplayBuffer", "ReplayFilter", "admit", "group_outcomes", "mixed_groups")
}
_HOME |= {"swap_metrics": "rspo_kit.swap.stats"}

__all__ = [
    "ACTOR_SIGNAL",
    "EXPLORER_SIGNAL",
    "FILTERS",
    "ReplayBuffer",
    "ReplayFilter",
    "SwapResult",
    "admit",
    "derive_explorer",
    "group_outcomes",
    "mixed_groups",
    "relabel_outcome",
    "reward_swap",
    "swap_metrics",
    "sync_explorer",
    "syncs_at",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
