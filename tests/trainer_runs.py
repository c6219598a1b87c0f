"""Real trainer runs at toy budgets for the tests, and what they read from a run: the last update's
batch and record, and the actor's gradient on a batch."""

from __future__ import annotations

import torch

from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train import RunConfig, Trainer, initial_policy
from rspo_kit.train.update import UpdateBatch, policy_gradient


def trained(cfg: RunConfig, callbacks=()) -> Trainer:
    """A Trainer built as ``train(cfg)`` builds it (the starting policy, then its trainer), run to its end."""
    policy, report = initial_policy(cfg, progress_bar=False)
    trainer = Trainer(cfg, policy, callbacks, start_report=report)
    trainer.run()
    return trainer


def trained_keeping_last_update(cfg: RunConfig) -> tuple[Trainer, dict]:
    """``trained(cfg)`` and the data of its last ``on_update_end`` event (``batch``, ``record``, ...)."""
    last: dict = {}

    class LastUpdate:
        def on_update_end(self, event):
            last.update(event.data)

    return trained(cfg, [LastUpdate()]), last


def assert_actor_gradient_is_the_same_under(
    trainer: Trainer, cfg: RunConfig, batch: UpdateBatch, rewards: RewardModel
) -> None:
    """The actor's gradient on ``batch`` is not zero, and is the same when ``rewards`` scores the batch's
    outcome anew: the swap's promise that A learns from the outcome alone, whatever process reward
    ``rewards`` holds. The stored advantages of replayed trajectories are kept as they are."""
    relabelled = UpdateBatch(
        batch.trajs, rewards.batch_rewards(batch.trajs, "outcome"), batch.offpolicy, batch.stored_advantages
    )
    actor = trainer._learner("actor")
    g = policy_gradient(actor, batch, cfg.algo, cfg.swap.offpolicy)
    g_relabelled = policy_gradient(actor, relabelled, cfg.algo, cfg.swap.offpolicy)
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(g, g_relabelled, strict=True))
    assert any(x is not None and x.abs().sum() > 0 for x in g)
