"""A run's evaluations of its actor: the learning curve's on the eval split (``eval/*``) and the final
ones on the test splits (``final/<split>/*``, ``final_sampled/<split>/*``), as metrics.

``actor`` gives the actor's policy when an evaluation runs (with LoRA that makes its adapter the active
one); the evaluation itself is ``rspo_kit.policy.evaluate.evaluate`` on fixed tasks of a split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rspo_kit.envs.registry import list_tasks
from rspo_kit.policy.evaluate import EvalResult, evaluate
from rspo_kit.policy.rollout import Policy
from rspo_kit.records import write_episodes
from rspo_kit.train.config import RunConfig


def eval_metrics(prefix: str, res: EvalResult) -> dict[str, float]:
    """An evaluation as metrics under ``prefix`` (``eval``, ``final/eval_unseen``, ...)."""
    return {
        f"{prefix}/tasks": float(res.tasks),
        f"{prefix}/success": res.success,
        f"{prefix}/ci_low": res.ci_low,
        f"{prefix}/ci_high": res.ci_high,
        f"{prefix}/score": res.mean_score,
        f"{prefix}/invalid_share": res.invalid_share,
        f"{prefix}/episode_steps": res.mean_steps,
    }


def evaluate_actor(
    actor: Callable[[], Policy], cfg: RunConfig, split: str | None, n: int | None, greedy: bool
) -> EvalResult | None:
    """The actor on ``n`` (None: ``train.eval_n``) fixed tasks of ``split`` (None: the eval split),
    greedy or sampling one episode per task (seeded by the run's seed); None where ``n`` is 0."""
    n = cfg.train.eval_n if n is None else n
    if n == 0:
        return None
    return evaluate(
        actor(),
        cfg.env.name,
        split or cfg.train.eval_split,
        n,
        greedy=greedy,
        seed=cfg.train.seed,
        n_workers=cfg.env.n_workers,
        max_steps=cfg.env.max_steps,
        progress_bar=cfg.train.progress_bar,
        env_kwargs={"engine": cfg.env.engine} if cfg.env.engine else None,
    )


def final_evaluations(
    actor: Callable[[], Policy], cfg: RunConfig, run_dir: Path, done: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """Each of ``train.final_eval_split``'s splits on ``final_eval_n`` tasks, as ``final/<split>/*``
    (unless ``train.final_eval_greedy`` is False) and sampled, as ``final_sampled/<split>/*``, with
    ``train.final_eval_sampled``; every episode goes to ``run_dir``'s ``final_episodes.parquet``
    (``rspo_kit.records.episodes``).

    Evaluations that ``done`` (a metrics row) already holds on as many tasks are skipped.
    """
    t = cfg.train
    n = t.final_eval_n or t.eval_n
    done = done or {}
    row: dict[str, float] = {}
    for split in t.final_eval_splits:
        size = float(len(list_tasks(cfg.env.name, split, n=n)))
        for prefix, greedy in ((f"final/{split}", True), (f"final_sampled/{split}", False)):
            wanted = t.final_eval_greedy if greedy else t.final_eval_sampled
            if wanted and done.get(f"{prefix}/tasks") != size:
                res = evaluate_actor(actor, cfg, split, n, greedy)
                if res is not None:
                    write_episodes(run_dir, prefix, res.episodes)
                    row |= eval_metrics(prefix, res)
    return row
