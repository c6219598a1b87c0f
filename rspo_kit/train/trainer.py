"""The training loop: base algorithm X, optionally wrapped by RSPO's reward swap.

``Trainer.step`` runs one iteration k (1-based; row 0 of the metrics is the starting point's
evaluation), one metrics row each:

- under ``swap.mode`` rspo (and its control): one **loop** of the paper's Algorithm 1, whose recipe is
  ``rspo_kit.swap.loop.rspo_loop`` (B <- A, k dense X-steps of B, the collection relabelled with the
  outcome into the buffer, k outcome X-steps of A on fresh rollouts plus reward-sampled replays, the
  buffer reset); the trainer's side of it (rollouts on fresh train tasks, X's updates, B <- A, what
  they spend) is ``rspo_kit.train.loop_run.TrainerLoopRun``;
- otherwise one update: plain X on the actor's rollout under ``reward.train_on`` (the baselines), or
  the earlier group_mixing design (B re-synced and updated on A's batch, its rollout on A's tasks
  mixed into A's groups: ``rspo_kit.swap.derive_explorer``, ``rspo_kit.swap.reward_swap``).

Then metrics (``rollout/*``, ``explorer_rollout/*``, ``explorer/*``, ``adv/*``, ``loss/*``, ``is/*``,
``offpolicy/*``, ``value/*``, ``swap/*``, ``budget/*``, ``eval/*``, ``perf/*``), a per-turn table and the
periodic evaluation; ``run()`` adds an atomic checkpoint. ``budget/*`` counts what a run spent under
both accountings, per role: updates of A and of B, env steps of each; ``train.updates`` and
``train.max_env_steps`` end a run on either.

``train(cfg)`` checks the configuration (``rspo_kit.train.checks``), builds the starting policy (the
preset, or its SFT warm start: ``rspo_kit.train.setup.initial_policy``) and hands it to
``Trainer(cfg, policy)``; ``train(resume=run_dir)`` continues a run under the settings that
``rspo_kit.train.resume`` allows to change. The rest of a run lives beside it: its rewards
(``rspo_kit.train.rewards``), its side of the paper's loop (``rspo_kit.train.loop_run``), its metrics and
tables (``rspo_kit.train.metrics``) and its evaluations (``rspo_kit.train.evaluation``).

Events go to callbacks: any object with some of ``on_rollout_end``, ``on_swap``, ``on_update_end``,
``on_eval``, ``on_checkpoint`` (each receives an ``Event``). A callback's exception stops the run.

A non-finite loss, gradient norm, parameter, advantage or critic value (``rspo_kit.train.update``), or
a non-finite state at a checkpoint, stops the run with ``TrainingStopped``: the step is not taken,
the iteration's metrics row and checkpoint are not kept, and the message names the iteration and the
last good checkpoint, which ``--resume`` continues from.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import list_tasks
from rspo_kit.policy.adapters import ActorExplorer
from rspo_kit.policy.models import weights_digest
from rspo_kit.policy.rollout import Policy, RolloutConfig, Trajectory, rollout
from rspo_kit.records import MetricsLog, write_table
from rspo_kit.records.metrics import METRICS_FILE
from rspo_kit.records.start import write_start
from rspo_kit.rewards.progress_model import PROCESS_NAME as PROGRESS_MODEL
from rspo_kit.rewards.progress_model import use_run_progress_model
from rspo_kit.swap import ReplayBuffer, derive_explorer, reward_swap
from rspo_kit.swap.buffer import LoopBuffer, ReplayEntry
from rspo_kit.swap.loop import rspo_loop
from rspo_kit.timing import timer
from rspo_kit.train.checkpoint import (
    CheckpointError,
    checkpoints,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from rspo_kit.train.checks import checked
from rspo_kit.train.config import AlgoConfig, RunConfig, variant_of
from rspo_kit.train.evaluation import eval_metrics, evaluate_actor, final_evaluations
from rspo_kit.train.loop_run import TrainerLoopRun, loop_settings
from rspo_kit.train.metrics import as_explorer, iteration_table, loop_table, mean_metrics, rollout_metrics
from rspo_kit.train.resume import RESUMABLE_FIELDS, differences, restore_newest, stored_config
from rspo_kit.train.rewards import run_rewards

# trained_actor: a run's actor, read from here by notebooks (rspo_kit.train.setup builds it)
from rspo_kit.train.setup import initial_policy, policy_scoring, trained_actor, uses_lora  # noqa: F401
from rspo_kit.train.update import Learner, UpdateBatch, update

EVENTS = ("on_rollout_end", "on_swap", "on_update_end", "on_eval", "on_checkpoint")
# what a run has spent, counted per role: the paper's accounting (updates of A) and a user's (env steps);
# "env_steps_explorer" holds B's dense rollouts and its collection together
BUDGET_KEYS = ("actor_updates", "explorer_updates", "env_steps_actor", "env_steps_explorer")


class TrainingStopped(RuntimeError):
    """A run stopped by a non-finite value; the message names the iteration and the last good checkpoint."""


@dataclass
class Event:
    name: str
    iteration: int
    metrics: dict[str, float] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)  # trajectories, buffers, paths: see each event


@dataclass
class RunResult:
    metrics: pd.DataFrame  # one row per iteration (row 0: the starting point)
    run_dir: Path
    config: RunConfig

    @property
    def final(self) -> dict:
        """The last row that carries an evaluation."""
        rows = (
            self.metrics.dropna(subset=["eval/success"]) if "eval/success" in self.metrics else self.metrics
        )
        return rows.iloc[-1].to_dict() if len(rows) else {}


def _default_run_dir(cfg: RunConfig) -> Path:
    """``runs/<time>_<env>_<algo>_<variant>_s<seed>``, created here and this run's alone: a run of the
    same config started in the same second gets ``-2``, ``-3``, ... (``mkdir`` either creates a folder
    or fails, so two processes never share one)."""
    name = (
        f"{time.strftime('%Y%m%d-%H%M%S')}_{cfg.env.name}_{cfg.algo.name}_{variant_of(cfg)}_s{cfg.train.seed}"
    )
    for n in itertools.count(1):
        folder = Path("runs") / (name if n == 1 else f"{name}-{n}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


class Trainer:
    """One run's state; ``run()`` executes the remaining iterations. Prefer ``train(cfg)``, which builds
    the starting policy (the warm start) first.

    ``policy`` is the starting policy and becomes the actor: its model is trained in place, scoring
    candidates as ``cfg.policy.choice_score`` says. ``start_report`` says where it came from
    (``initial_policy``'s report); it goes to the run's ``start.json`` with the digest of the starting
    weights, once (a resumed run keeps its first record).
    """

    def __init__(
        self,
        cfg: RunConfig,
        policy: Policy,
        callbacks: Sequence[Any] = (),
        run_dir: str | Path | None = None,
        start_report: Mapping[str, Any] | None = None,
    ):
        self.cfg = checked(cfg)
        self.callbacks = list(callbacks)
        self.run_dir = Path(run_dir or cfg.train.run_dir or _default_run_dir(cfg))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.start_report = dict(start_report or {})
        if "weights_sha256" not in self.start_report:  # a warm start built now has it already
            self.start_report["weights_sha256"] = weights_digest(policy.model)
        write_start(self.run_dir, self.start_report)
        # the reference of the KL penalty: LoRA's base with the adapters off, else a frozen copy of the
        # starting policy, made only where the penalty reads it
        lora, kl = uses_lora(cfg, policy), cfg.algo.kl_coef > 0
        policy = replace(policy, **policy_scoring(cfg))
        self.pair = ActorExplorer(policy, lora=lora, rank=cfg.policy.lora_rank, reference=kl)
        self.learners = {role: self._build_learner(role) for role in ("actor", "explorer")}
        if cfg.reward.prm:  # a learned PRM from logged trajectories (python -m rspo_kit.rewards.learned)
            from rspo_kit.rewards.learned import LearnedPRM, register_learned

            register_learned(LearnedPRM.load(cfg.reward.prm), cfg.env.name)
        if cfg.reward.process == PROGRESS_MODEL:  # the paper's learned dense reward (§4.2.3)
            use_run_progress_model(cfg.env.name, cfg.reward.progress_model, policy)
        self.rewards = run_rewards(cfg)
        self.buffer = ReplayBuffer(cfg.swap.replay_capacity, cfg.swap.replay_filter)  # group_mixing's
        self.explorer_batch: list[Trajectory] = []  # group_mixing: D_B of the last iteration
        self.loop_buffer = LoopBuffer(cfg.swap.replay_capacity if cfg.swap.buffer == "fifo" else None)
        self.pool = list_tasks(cfg.env.name, split="train", n=cfg.env.train_tasks)
        self.log = MetricsLog(self.run_dir / METRICS_FILE)
        self.iteration = 0
        self.budget = dict.fromkeys(BUDGET_KEYS, 0)  # both accountings, per role (budget/*)

    # ----------------------------------------------------------------------------------- plumbing
    def _build_learner(self, role: str) -> Learner:
        a = self.cfg.algo
        lr = a.lr if role == "actor" else self.cfg.explorer_lr
        critic = a.name == "ppo"
        seed = self._seed("critic", role)
        return Learner.build(self.pair.policy(role), self.pair.parameters(role), lr, critic, a.value_lr, seed)

    def _emit(self, name: str, k: int, metrics: Mapping[str, float], **data: Any) -> None:
        event = Event(name, k, dict(metrics), data)
        for cb in self.callbacks:
            fn = getattr(cb, name, None)
            if fn is not None:
                fn(event)

    def _learner(self, role: str) -> Learner:
        learner = self.learners[role]
        learner.policy = self.pair.policy(role)  # LoRA: makes the role's adapter the active one
        return learner

    def _update(
        self, role: str, batch: UpdateBatch, algo: AlgoConfig, seed: int, temperature: float | None = None
    ) -> dict[str, float]:
        """One X-update of ``role`` on ``batch`` (``rspo_kit.train.update.update``), its log-probs at
        ``temperature`` (None: the role's own): the one its on-policy steps were sampled at, so that
        ratios compare like with like. Replayed steps keep the explorer's behaviour log-probs, at the
        explorer's temperature: the denominator of the actor's importance weight π_A/π_B."""
        reference = self.pair.reference if algo.kl_coef > 0 else None
        temperature = self._temperature(role) if temperature is None else temperature
        learner, offpolicy = self._learner(role), self.cfg.swap.offpolicy
        return update(
            learner, batch, algo, offpolicy, temperature=temperature, seed=seed, reference=reference
        )

    def _temperature(self, role: str) -> float:
        """The temperature ``role`` samples its rollouts at."""
        return self.cfg.policy.temperature if role == "actor" else self.cfg.explorer_temperature

    def _modules(self) -> dict[str, torch.nn.Module]:
        mods: dict[str, torch.nn.Module] = {"actor": self.pair._models["actor"]}
        if not self.pair.lora:
            mods["explorer"] = self.pair._models["explorer"]
        for role, learner in self.learners.items():
            if learner.value_head is not None:
                mods[f"value_{role}"] = learner.value_head
        return mods

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        opts = {}
        for role, learner in self.learners.items():
            opts[role] = learner.optimizer
            if learner.value_optimizer is not None:
                opts[f"value_{role}"] = learner.value_optimizer
        return opts

    def _seed(self, *parts: Any) -> int:
        return random.Random(":".join(map(str, (self.cfg.train.seed, *parts)))).getrandbits(31)

    # ------------------------------------------------------------------------------------ the recipe
    def step(self, runner: BatchRunner) -> dict[str, float]:
        """One iteration: a loop of the paper's Algorithm 1 (``swap.mode`` rspo, control), else one
        update of plain X or of the earlier group_mixing design; returns its metrics row."""
        k = self.iteration + 1
        row: dict[str, float] = {"iteration": k}
        with timer(row, "perf/iteration_s"):
            if self.cfg.swap.paper_loop:
                self._loop(runner, k, row)
            else:
                self._iteration(runner, k, row)
        self.iteration = k
        return row

    def _budget_row(self, row: dict) -> None:
        """The run's spending so far under both accountings, as ``budget/*``."""
        row |= {f"budget/{key}": float(v) for key, v in self.budget.items()}
        row["budget/env_steps"] = row["rollout/cumulative_env_steps"] = float(self.env_steps)

    def _loop(self, runner: BatchRunner, k: int, row: dict) -> None:
        """One loop of Algorithm 1 (``rspo_kit.swap.loop.rspo_loop``), its metrics, events and table."""
        run = TrainerLoopRun(self, runner, k)
        settings, rng = loop_settings(self.cfg), random.Random(self._seed("loop", k))
        record = rspo_loop(run, settings, self.rewards, self.loop_buffer, rng)
        row |= run.clock
        row |= rollout_metrics("rollout", run.trajs["actor"], self.rewards)
        row |= rollout_metrics(
            "explorer_rollout", run.trajs["explorer"] + run.trajs["collection"], self.rewards
        )
        row |= mean_metrics(record.actor_updates)
        row |= as_explorer(mean_metrics(record.explorer_updates))
        row |= record.metrics
        self._budget_row(row)
        data = {"record": record, "buffer": [e.traj for e in record.collection]}
        self._emit(
            "on_swap", k, {key: v for key, v in row.items() if key.startswith(("swap/", "explorer/"))}, **data
        )
        batches = run.batches["actor"]
        self._emit("on_update_end", k, row, batch=batches[-1], batches=batches, record=record)
        self._record(k, row, lambda: self._write_turns(k, loop_table(self.rewards, k, run.batches)))

    def _iteration(self, runner: BatchRunner, k: int, row: dict) -> None:
        """One update of plain X (on D_A under ``reward.train_on``) or of the earlier group_mixing design:
        1. D_A; 2. B <- A when due, X on process rewards; 3. D_B; 4. D_B admitted, groups mixed, outcome
        only; 5. X on the batch; 6. metrics, table, evaluation."""
        cfg = self.cfg
        tasks = random.Random(self._seed("tasks", k)).sample(self.pool, cfg.env.tasks_per_iteration)
        actor = self._rollout(runner, "actor", tasks, k, row)  # 1. D_A
        explorer: list[Trajectory] = []
        if cfg.swap.enabled:
            with timer(row, "perf/explorer_update_s"):
                row |= self._derive_explorer(k, actor)  # 2. B <- A when due, X on process rewards
            self.budget["explorer_updates"] += cfg.swap.explorer_updates
            explorer = self.explorer_batch = self._rollout(runner, "explorer", tasks, k, row)  # 3. D_B
            batch = self._swap(k, actor, explorer, row)  # 4. admit D_B, mix groups, outcome only
        else:  # the baselines: X on D_A under the configured signal (outcome, process or mix)
            batch = UpdateBatch(actor, self.rewards.batch_rewards(actor, cfg.reward.train_on))
        with timer(row, "perf/update_s"):
            row |= self._update("actor", batch, cfg.algo, self._seed("actor", k))  # 5. X on its batch
        self.budget["actor_updates"] += 1
        self.budget["env_steps_actor"] += sum(t.env_steps for t in actor)
        self.budget["env_steps_explorer"] += sum(t.env_steps for t in explorer)
        self._budget_row(row)
        self._emit("on_update_end", k, row, batch=batch)
        # 6. the turn table; evaluation
        self._record(k, row, lambda: self._write_turns(k, iteration_table(self.rewards, k, batch, explorer)))

    @property
    def env_steps(self) -> int:
        """Env steps spent so far, actor and explorer together."""
        return self.budget["env_steps_actor"] + self.budget["env_steps_explorer"]

    def _write_turns(self, k: int, frame: pd.DataFrame | None) -> None:
        """Iteration ``k``'s per-turn table (``rspo_kit.train.metrics``), where it has one."""
        if frame is not None:
            write_table(frame, self.run_dir / "turns" / f"iter_{k:05d}.parquet")

    def _rollout(self, runner, role: str, tasks, k: int, row: dict) -> list[Trajectory]:
        """Step 1 or 3: ``role``'s episodes on ``tasks``, their metrics, the ``on_rollout_end`` event.

        The rollout's wall time goes in ``row``, split into prompt building, model and env.
        """
        cfg = self.cfg
        actor = role == "actor"
        group_size = cfg.algo.group_size if actor else cfg.swap.explorer_group_size
        rcfg = RolloutConfig(
            group_size=group_size,
            temperature=self._temperature(role),
            max_new_tokens=cfg.policy.max_new_tokens,
            epsilon=0.0 if actor else cfg.swap.explorer_epsilon,
        )
        prefix = "rollout" if actor else "explorer_rollout"
        clock: dict[str, float] = {}
        with timer(row, f"perf/{prefix}_s"):
            policy = self._learner(role).policy
            seed = 2 * cfg.train.seed + (not actor)
            trajs = rollout(policy, runner, tasks, rcfg, iteration=k, seed=seed, source=role, timings=clock)
            row |= {f"perf/{prefix}_{part}_s": seconds for part, seconds in clock.items()}
        row |= rollout_metrics(prefix, trajs, self.rewards)
        self._emit("on_rollout_end", k, row if actor else {}, role=role, trajectories=trajs)
        return trajs

    def _derive_explorer(self, k: int, actor: list[Trajectory]) -> dict[str, float]:
        """Step 2 (``rspo_kit.swap.derive_explorer``) with X's update at the explorer's learning rate.

        B's batch is D_A right after a sync, else its own D_B: each is scored at the temperature it was
        sampled at (its role's), so the update starts on-policy (ratio 1) for the policy that sampled it.
        With ``swap.explorer_epsilon`` D_B's log-probs are the ε-mixture's it was sampled from, so its
        uniform choices enter B's update as off-policy steps (ratio π_B/mixture).
        """
        algo = replace(self.cfg.algo, lr=self.cfg.explorer_lr)

        def x_update(trajs: list[Trajectory], rewards: list[list[float]], u: int) -> dict[str, float]:
            sampled_by = trajs[0].source if trajs else "explorer"  # D_A ("actor") or D_B, never mixed
            seed, temperature = self._seed("explorer", k, u), self._temperature(sampled_by)
            return self._update("explorer", UpdateBatch(trajs, rewards), algo, seed, temperature)

        s, optimizer = self.cfg.swap, self.learners["explorer"].optimizer
        previous = self.explorer_batch  # D_B of the last iteration: on-policy for B between syncs
        m = derive_explorer(
            self.pair,
            optimizer,
            iteration=k,
            sync_every=s.sync_every,
            updates=s.explorer_updates,
            actor_batch=actor,
            own_batch=previous,
            rewards=self.rewards,
            x_update=x_update,
        )
        return as_explorer(m)

    def _swap(self, k: int, actor: list[Trajectory], explorer: list[Trajectory], row: dict) -> UpdateBatch:
        """Step 4 (``rspo_kit.swap.reward_swap``): the actor's batch, scored by outcome alone."""
        rng = random.Random(self._seed("replay", k))
        with timer(row, "perf/swap_s"):
            ratio, group_size = self.cfg.swap.replay_ratio, self.cfg.algo.group_size
            swap = reward_swap(
                actor, explorer, self.buffer, self.rewards, replay_ratio=ratio, group_size=group_size, rng=rng
            )
            row |= swap.metrics
        data = {"mixed": swap.trajs, "offpolicy": swap.offpolicy, "buffer": self.buffer.items()}
        self._emit("on_swap", k, swap.metrics, actor=actor, explorer=explorer, **data)
        return UpdateBatch(swap.trajs, swap.rewards, swap.offpolicy)

    def _record(self, k: int, row: dict, write_table: Callable[[], None]) -> None:
        """Step 6: the per-turn table (``write_table``); the evaluation every ``eval_every`` iterations and
        at the end (the final evaluations too once the last iteration ran or a budget is spent)."""
        t = self.cfg.train
        if t.tables:
            with timer(row, "perf/tables_s"):
                write_table()
        last = k == t.iterations or self.budget_spent
        if k % t.eval_every == 0 or last:
            with timer(row, "perf/eval_s"):
                row |= self.evaluate() | (self.final_evaluation() if last else {})
            evaluated = {
                key: v for key, v in row.items() if key.startswith(("eval/", "final/", "final_sampled/"))
            }
            self._emit("on_eval", k, evaluated)

    # -------------------------------------------------------------------------------- evaluation
    def evaluate(
        self, split: str | None = None, prefix: str = "eval", n: int | None = None, greedy: bool = True
    ) -> dict[str, float]:
        """Evaluation of the actor on ``n`` (default ``eval_n``) fixed tasks of ``split`` (default: the eval split).

        Greedy by default; ``greedy=False`` samples one episode per task (seeded by the run's seed).
        """
        res = evaluate_actor(self._actor_policy, self.cfg, split, n, greedy)
        return {} if res is None else eval_metrics(prefix, res)

    def final_evaluation(self, done: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The final evaluations of ``train.final_eval_split``'s splits, as ``final/<split>/*`` and
        ``final_sampled/<split>/*`` (``rspo_kit.train.evaluation.final_evaluations``); those that
        ``done`` (a metrics row) already holds on as many tasks are skipped."""
        return final_evaluations(self._actor_policy, self.cfg, self.run_dir, done)

    def _actor_policy(self) -> Policy:
        return self._learner("actor").policy

    def _complete_final_evaluation(self) -> None:
        """A finished run resumed with other final splits (or more tasks) evaluates what its last row lacks."""
        last = self.log.rows[-1]
        clock: dict[str, float] = {}
        with timer(clock, "perf/final_eval_added_s"):
            added = self.final_evaluation(done=last)
        if not added:
            return
        last |= added | clock
        self.log.rewrite()
        self.checkpoint()
        self._emit("on_eval", self.iteration, added)

    @property
    def budget_spent(self) -> bool:
        """An env-step budget (``train.max_env_steps``) or an update budget of A (``train.updates``) is spent."""
        t = self.cfg.train
        steps = t.max_env_steps is not None and self.env_steps >= t.max_env_steps
        return steps or (t.updates is not None and self.budget["actor_updates"] >= t.updates)

    @property
    def finished(self) -> bool:
        return self.iteration >= self.cfg.train.iterations or self.budget_spent

    # ------------------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> Path:
        entries = self.loop_buffer.entries  # empty at a loop's end unless D is kept (fifo, RSPO_H)
        state = {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "budget": self.budget,
            "loop_buffer": [
                {"outcome": e.outcome, "advantages": e.advantages, "group": e.group} for e in entries
            ],
            "rows": self.log.rows,
            "config": self.cfg.to_dict(),
        }
        trajs = {"replay": self.buffer.items(), "explorer_batch": self.explorer_batch}
        trajs["loop_buffer"] = [e.traj for e in entries]
        path = save_checkpoint(
            self.run_dir, self.iteration, self._modules(), self._optimizers(), state, trajs
        )
        self._emit("on_checkpoint", self.iteration, {}, path=path)
        return path

    def restore(self, folder: Path) -> None:
        state, trajs = load_checkpoint(
            folder, self._modules(), self._optimizers(), state_keys=("iteration", "env_steps", "rows")
        )
        self.iteration = state["iteration"]
        # a checkpoint written before the per-role counts holds the total alone
        self.budget = dict.fromkeys(BUDGET_KEYS, 0) | state.get(
            "budget", {"env_steps_actor": state["env_steps"]}
        )
        stored = state.get("loop_buffer", [])
        self.loop_buffer.entries = [
            ReplayEntry(t, e["outcome"], e["advantages"], e["group"])
            for t, e in zip(trajs.get("loop_buffer", []), stored, strict=True)
        ]
        self.log.rows = state["rows"]
        self.log.rewrite()
        self.buffer = ReplayBuffer.of(
            self.cfg.swap.replay_capacity, self.cfg.swap.replay_filter, trajs.get("replay", [])
        )
        self.explorer_batch = trajs.get("explorer_batch", [])

    def _stopped(self, k: int, err: FloatingPointError) -> TrainingStopped:
        """The one message of a run stopped by a non-finite value: the iteration, the last good
        checkpoint and how to continue from it. The iteration's row is dropped from the metrics."""
        if self.log.rows and self.log.rows[-1].get("iteration") == k:
            self.log.rows.pop()
            self.log.rewrite()
        last = latest_checkpoint(self.run_dir)
        if last is None:
            where = "no checkpoint was written yet: the run can only start again"
        else:
            where = (
                f"the last good checkpoint is {last} (python -m rspo_kit.train --resume {self.run_dir} "
                "continues from it, and being exact meets the same values again unless their cause was "
                "outside the run; a run with a lower algo.lr starts again)"
            )
        return TrainingStopped(
            f"training stopped at iteration {k}: {err}. No metrics row or checkpoint of iteration {k} "
            f"was kept; {where}"
        )

    # -------------------------------------------------------------------------------------- run
    def run(self) -> RunResult:
        cfg = self.cfg
        (self.run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        if self.iteration == 0 and not self.log.rows:
            self.log.rewrite()  # a fresh run: rows a killed run left in this folder are dropped
            start = {"iteration": 0, "rollout/cumulative_env_steps": 0.0, "budget/env_steps": 0.0}
            start |= {f"budget/{key}": 0.0 for key in BUDGET_KEYS}
            with timer(start, "perf/eval_s"):
                start |= self.evaluate()
            self.log.log(start)
            self._emit("on_eval", 0, {k: v for k, v in start.items() if k.startswith("eval/")})
            if cfg.train.iterations == 0:
                self.checkpoint()
        from tqdm.auto import tqdm

        bar = tqdm(
            total=cfg.train.iterations,
            initial=self.iteration,
            desc=f"{cfg.algo.name}/{variant_of(cfg)}",
            disable=not cfg.train.progress_bar,
        )
        with BatchRunner(cfg.env.name, n_workers=cfg.env.n_workers, env_kwargs=cfg.env.env_kwargs) as runner:
            while not self.finished:
                k = self.iteration + 1
                try:
                    row = self.step(runner)
                    self.log.log(row)
                    if self.iteration % cfg.train.checkpoint_every == 0 or self.finished:
                        self.checkpoint()  # refuses a non-finite state (FloatingPointError)
                except FloatingPointError as err:
                    raise self._stopped(k, err) from err
                bar.update(1)
                bar.set_postfix(success=f"{row.get('rollout/success', math.nan):.2f}")
            if self.log.rows:
                self._complete_final_evaluation()
        bar.close()
        return RunResult(self.log.frame(), self.run_dir, cfg)


def train(
    cfg: RunConfig | None = None, callbacks: Sequence[Any] = (), resume: str | Path | None = None
) -> RunResult:
    """Run a configuration to the end; ``resume=run_dir`` continues a run from its latest checkpoint.

    On resume the stored configuration is used; a ``cfg`` passed along may differ from it only in
    ``RESUMABLE_FIELDS``, whose values it sets: the iterations and the env-step budget (a finished
    run trains on to new ones), the evaluation (a finished run evaluates what its last row lacks and
    adds it there, without training again), threads, tables and the progress bar. Any other
    difference is a ValueError naming the fields. A damaged ``latest`` or newest checkpoint falls
    back to an older checkpoint with a warning; a folder without a loadable checkpoint is a
    ``CheckpointError`` naming it. ``resumable(cfg)`` says whether ``cfg`` can continue its run
    directory.
    """
    if resume is None:
        if cfg is None:
            raise ValueError("train() needs a RunConfig (or resume=<run_dir>)")
        return _start(cfg, callbacks).run()
    run_dir = Path(resume)
    stored = stored_config(run_dir)
    if cfg is not None:
        diff = differences(stored, cfg.validate())
        if diff:
            raise ValueError(
                f"{run_dir} resumes under its own settings; these cannot change on resume, as they change "
                f"what the run computes: {'; '.join(diff)} (only {', '.join(RESUMABLE_FIELDS)} may)"
            )
        for dotted in RESUMABLE_FIELDS:
            name = dotted.partition(".")[2]
            setattr(stored.train, name, getattr(cfg.train, name))
    stored.train.run_dir = str(run_dir)
    if not checkpoints(run_dir):  # before the starting policy is built (a warm start takes minutes)
        raise CheckpointError(
            run_dir,
            "holds no checkpoint to resume from (no latest, no ckpt-* folder); "
            "train it anew without resume, or delete it",
        )
    trainer = _start(stored, callbacks, run_dir)
    restore_newest(trainer)
    return trainer.run()


def _start(cfg: RunConfig, callbacks: Sequence[Any], run_dir: Path | None = None) -> Trainer:
    """The configuration checked, its starting policy built (the preset, or its SFT warm start, cached),
    and the Trainer that trains it. A resumed run builds it too: the reference of a KL penalty is a
    copy of it, and its checkpoint then replaces the weights that training changed."""
    policy, report = initial_policy(checked(cfg), progress_bar=cfg.train.progress_bar)
    return Trainer(cfg, policy, callbacks, run_dir, start_report=report)
