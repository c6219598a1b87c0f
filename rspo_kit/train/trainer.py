"""The training loop: base algorithm X, optionally wrapped by RSPO's reward swap.

``Trainer.step`` runs one iteration k (1-based; row 0 of the metrics is the starting point's
evaluation), one metrics row each:

- under ``swap.mode`` rspo (and its control): one **loop** of the paper's Algorithm 1, whose recipe is
  ``rspo_kit.swap.loop.rspo_loop`` (B <- A, k dense X-steps of B, the collection relabelled with the
  outcome into the buffer, k outcome X-steps of A on fresh rollouts plus reward-sampled replays, the
  buffer reset); the trainer's side of it (rollouts on fresh train tasks, X's updates, B <- A, what
  they spend) is ``_LoopRun``;
- otherwise one update: plain X on the actor's rollout under ``reward.train_on`` (the baselines), or
  the earlier group_mixing design (B re-synced and updated on A's batch, its rollout on A's tasks
  mixed into A's groups: ``rspo_kit.swap.derive_explorer``, ``rspo_kit.swap.reward_swap``).

Then metrics (``rollout/*``, ``explorer_rollout/*``, ``explorer/*``, ``adv/*``, ``loss/*``, ``is/*``,
``offpolicy/*``, ``value/*``, ``swap/*``, ``budget/*``, ``eval/*``, ``perf/*``), a per-turn table and the
periodic evaluation; ``run()`` adds an atomic checkpoint. ``budget/*`` counts what a run spent under
both accountings, per role: updates of A and of B, env steps of each; ``train.updates`` and
``train.max_env_steps`` end a run on either.

``train(cfg)`` checks the configuration, builds the starting policy (the preset, or its SFT warm
start: ``rspo_kit.train.setup.initial_policy``) and hands it to ``Trainer(cfg, policy)``.

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
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import list_tasks, make_env, valid_start
from rspo_kit.policy.adapters import ActorExplorer
from rspo_kit.policy.evaluate import EvalResult, evaluate
from rspo_kit.policy.models import weights_digest
from rspo_kit.policy.rollout import Policy, RolloutConfig, Trajectory, rollout
from rspo_kit.records import MetricsLog, turn_table, write_episodes, write_table
from rspo_kit.records.files import read_record
from rspo_kit.records.metrics import METRICS_FILE
from rspo_kit.records.start import write_start
from rspo_kit.rewards.outcome import OutcomeConfig
from rspo_kit.rewards.process import GENERIC_REWARD, ProcessReward, ProgressPotential
from rspo_kit.rewards.progress_model import PROCESS_NAME as PROGRESS_MODEL
from rspo_kit.rewards.progress_model import (
    auto_process_reward,
    progress_model_folder,
    use_run_progress_model,
)
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.swap import ReplayBuffer, derive_explorer, reward_swap
from rspo_kit.swap.buffer import LoopBuffer, ReplayEntry
from rspo_kit.swap.loop import LoopBatch, LoopSettings, rspo_loop
from rspo_kit.swap.stats import repeated_states
from rspo_kit.timing import timer
from rspo_kit.train.checkpoint import (
    CheckpointError,
    checkpoints,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from rspo_kit.train.config import AlgoConfig, RunConfig, process_reward_use, variant_of
from rspo_kit.train.setup import initial_policy, load_run_env, preset_source
from rspo_kit.train.update import Learner, UpdateBatch, batch_advantages, update

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


def _check_valid_held_out(cfg: RunConfig) -> None:
    """Evaluating on ``valid`` is tuning on held-out train tasks: no train task the run learns from may be in it."""
    if "valid" not in (cfg.train.eval_split, *cfg.train.final_eval_splits):
        return
    start = valid_start(cfg.env.name)
    used = {"env.train_tasks": cfg.env.train_tasks}
    if cfg.policy.warmstart:
        used["policy.sft_demo_tasks"] = cfg.policy.sft_demo_tasks
    for name, n in used.items():
        if n > start:
            raise ValueError(
                f"{name}={n} overlaps the valid split (train tasks {start} onwards of {cfg.env.name}); "
                f"use at most {start} or evaluate on another split"
            )


def _check_splits(cfg: RunConfig) -> None:
    """Unknown evaluation splits fail here, not after hours of training."""
    for name, splits in (
        ("eval_split", [cfg.train.eval_split]),
        ("final_eval_split", cfg.train.final_eval_splits),
    ):
        for split in splits:
            try:
                tasks = list_tasks(cfg.env.name, split)
            except ValueError as err:
                raise ValueError(f"train.{name}: {err}") from None
            if not tasks:
                raise ValueError(f"train.{name}: {cfg.env.name} has no tasks in split {split!r}")


def _reward_model(cfg: RunConfig, process: str | None = None) -> RewardModel:
    """The run's rewards; ``process`` replaces ``reward.process`` and its misalignment knob."""
    r = cfg.reward
    outcome = OutcomeConfig(r.outcome_mode, r.invalid_penalty)
    if process is not None:
        return RewardModel.build(cfg.env.name, outcome, process, 0.0, r.mix_lambda)
    name = (
        auto_process_reward(cfg.env.name, cfg.swap.mode, r.misalign_eps) if r.process == "auto" else r.process
    )
    return RewardModel.build(cfg.env.name, outcome, name, r.misalign_eps, r.mix_lambda, r.hack)


def run_rewards(cfg: RunConfig) -> RewardModel:
    """The rewards a run of ``cfg`` is scored with (``_reward_model``); a run that trains on the outcome alone (``process_reward_use`` None) in an env
    without ``reward.process`` gets the generic ``progress`` reward, which only its metrics read
    (``*/process_return``, ``swap/process_outcome_tau``, the turn table), with a warning saying so."""
    try:
        return _reward_model(cfg)
    except KeyError as err:
        if process_reward_use(cfg) is not None:
            raise
        missing = err.args[0].partition(";")[0]
    warnings.warn(
        f"{missing}: this run trains on the outcome alone, and its process metrics read the generic "
        f"{GENERIC_REWARD!r} reward",
        stacklevel=3,
    )
    return _reward_model(cfg, GENERIC_REWARD)


def _generic_terms(reward: ProcessReward) -> list[ProgressPotential]:
    """The generic ``progress`` rewards in ``reward`` (itself, or terms of a weighted sum)."""
    terms = [reward, *(term for _, term in getattr(reward, "terms", ()))]
    return [term for term in terms if isinstance(term, ProgressPotential)]


def _check_process_reward(cfg: RunConfig) -> None:
    """A run that trains on a process reward (RSPO's explorer, the process and mix baselines) finds it
    now, not after a warm start: a missing one is an error naming the env, the reward, what the env
    has and the line that adds one; the generic ``progress`` reward is checked against the progress
    of one expert step (an env whose progress holds no numbers would pay it 0 forever)."""
    use = process_reward_use(cfg)
    if cfg.reward.process == PROGRESS_MODEL:  # its weights are found now; they register at start
        progress_model_folder(cfg.env.name, cfg.reward.progress_model)
        return
    if use is None or cfg.reward.process == "learned":  # a learned PRM registers from its folder at start
        return
    try:
        reward = _reward_model(cfg).process
    except KeyError as err:
        knob = (
            f", or reward.hack = the env's hackable term (or reward.misalign_eps = 0) where it has no "
            f"{cfg.reward.hack!r}"
            if cfg.reward.misalign_eps
            else ""
        )
        raise ValueError(
            f"{use} train on the process reward, and {err.args[0]} (in a run config: "
            f"reward.process = {GENERIC_REWARD!r}{knob})"
        ) from None
    generic = _generic_terms(reward)
    if not generic:
        return
    env = make_env(cfg.env.name, **cfg.env.env_kwargs)
    obs = env.reset(list_tasks(cfg.env.name, "train", n=1)[0])
    step = env.step(env.expert_action() or (obs.admissible[0] if obs.admissible else "look"))
    progress = step.info.get("progress", {})
    for term in generic:
        try:
            term.check(progress)
        except ValueError as err:
            raise ValueError(f"env {cfg.env.name!r}: {err}; {use} need a process reward that pays") from None


def _checked(cfg: RunConfig) -> RunConfig:
    """``cfg`` validated for a run, before anything is built (a warm start takes minutes): the user's
    env module imported, its fields, its evaluation splits, that tuning on ``valid`` holds out the
    tasks the run learns from, and the process reward where the run trains on one; the process takes
    its torch threads."""
    cfg.validate()
    load_run_env(cfg)
    if cfg.reward.process == "auto":  # resolved once, so that config.json records the reward that ran
        cfg.reward.process = auto_process_reward(cfg.env.name, cfg.swap.mode, cfg.reward.misalign_eps)
    _check_valid_held_out(cfg)
    _check_splits(cfg)
    _check_process_reward(cfg)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    return cfg


def _uses_lora(cfg: RunConfig, base: Policy) -> bool:
    """LoRA adapters for pretrained models, full fine-tuning (and copies) for the tiny presets."""
    if cfg.policy.lora is not None:
        return cfg.policy.lora
    return sum(p.numel() for p in base.model.parameters()) > 50e6


def _eval_metrics(prefix: str, res: EvalResult) -> dict[str, float]:
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


def trained_actor(run_dir: str | Path) -> Policy:
    """The actor of a training run at its latest checkpoint, e.g. to evaluate it on more tasks.

    Read-only: nothing in ``run_dir`` changes (``python -m rspo_kit.evaluate --policy RUN_DIR``).
    """
    run_dir = Path(run_dir)
    folder = latest_checkpoint(run_dir)
    if folder is None or not (run_dir / "config.json").exists():
        raise FileNotFoundError(f"{run_dir} is not a training run with a checkpoint (config.json, latest)")
    cfg = read_record(run_dir / "config.json", RunConfig.from_dict)
    # the checkpoint holds every weight of the actor (the whole model; with LoRA the base too), so the
    # preset only gives the architecture and tokenizer (a user env's own, for a scratch preset): no warm
    # start to rebuild or install
    load_run_env(cfg)
    mode = None if cfg.policy.mode == "preset" else cfg.policy.mode
    source = preset_source(cfg, cfg.train.seed)
    base = replace(Policy.load(source, mode=mode, seed=cfg.train.seed), **_scoring(cfg))
    pair = ActorExplorer(base, lora=_uses_lora(cfg, base), rank=cfg.policy.lora_rank, reference=False)
    load_checkpoint(folder, {"actor": pair._models["actor"]}, {})
    return pair.policy("actor")


def _scoring(cfg: RunConfig) -> dict[str, Any]:
    """The run's settings of how its policies score candidates (``Policy`` fields): the config decides
    them, not the policy a run was handed, so that ``config.json`` says how the actor chose."""
    return {"choice_score": cfg.policy.choice_score}


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


def _rollout_metrics(prefix: str, trajs: Sequence[Trajectory], rewards: RewardModel) -> dict[str, float]:
    steps = sum(t.env_steps for t in trajs)
    n = max(1, len(trajs))
    process = [sum(rewards.process_steps(t)) for t in trajs]
    return {
        f"{prefix}/success": sum(t.won for t in trajs) / n,
        f"{prefix}/score": sum(t.score for t in trajs) / n,
        f"{prefix}/episode_steps": steps / n,
        f"{prefix}/invalid_share": sum(not s.valid for t in trajs for s in t.steps) / max(1, steps),
        f"{prefix}/env_steps": float(steps),
        f"{prefix}/crashed": float(sum(t.crashed for t in trajs)),
        f"{prefix}/process_return": sum(process) / n,
        f"{prefix}/outcome_return": sum(rewards.outcome_return(t) for t in trajs) / n,
        # the paper's Table 6: states visited again within a window of the episode's last steps
        f"{prefix}/repeated_states": float(repeated_states(trajs)),
        f"{prefix}/repeated_state_share": repeated_states(trajs) / max(1, steps),
    }


def _as_explorer(metrics: Mapping[str, float]) -> dict[str, float]:
    """The explorer's update metrics under its own names: ``explorer/loss/*``, ``perf/explorer_update_*``."""
    return {
        f"perf/explorer_{key[5:]}" if key.startswith("perf/") else f"explorer/{key}": v
        for key, v in metrics.items()
    }


def _mean_metrics(updates: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each key's mean over the loop's updates that report it (NaN-free where any did)."""
    out: dict[str, list[float]] = {}
    for m in updates:
        for key, v in m.items():
            out.setdefault(key, []).append(v)
    return {key: sum(v) / len(v) for key, v in out.items()}


class _LoopRun:
    """The trainer's side of one loop of Algorithm 1 (``rspo_kit.swap.loop.LoopRun``): B <- A, the
    rollouts on fresh train tasks, X's updates and advantages, and what they spent (``budget/*``)."""

    def __init__(self, trainer: Trainer, runner: BatchRunner, k: int):
        self.trainer, self.runner, self.k = trainer, runner, k
        self.trajs: dict[str, list[Trajectory]] = {"actor": [], "explorer": [], "collection": []}
        self.batches: dict[str, list[UpdateBatch]] = {"actor": [], "explorer": [], "collection": []}
        self.clock: dict[str, float] = {}

    def _timed(self, key: str, seconds: float) -> None:
        self.clock[key] = self.clock.get(key, 0.0) + seconds

    def sync_explorer(self) -> None:
        """B <- A: the actor's weights (and PPO's critic) into the explorer; B's optimizer moments
        cleared with ``swap.explorer_optimizer = "fresh"`` (Adam moments of last loop's B would pull it
        back), kept with ``carry``."""
        t = self.trainer
        fresh = t.cfg.swap.explorer_optimizer == "fresh"
        t.pair.sync_explorer()
        actor, explorer = t.learners["actor"], t.learners["explorer"]
        if fresh:
            explorer.optimizer.state.clear()
        if actor.value_head is not None:
            explorer.value_head.load_state_dict(actor.value_head.state_dict())
            if fresh:
                explorer.value_optimizer.state.clear()

    def rollout(self, role: str, n_tasks: int, step: int) -> list[Trajectory]:
        t, cfg = self.trainer, self.trainer.cfg
        policy_role = "actor" if role == "actor" else "explorer"
        rcfg = RolloutConfig(
            group_size=cfg.algo.group_size,
            temperature=t._temperature(policy_role),
            max_new_tokens=cfg.policy.max_new_tokens,
            epsilon=0.0 if role == "actor" else cfg.swap.explorer_epsilon,
        )
        tasks = random.Random(t._seed("tasks", self.k, step)).sample(t.pool, n_tasks)
        index = (self.k - 1) * (2 * cfg.swap.loop_steps + 1) + step + 1  # each rollout its groups and seed
        seed = 2 * cfg.train.seed + (role != "actor")
        start = time.perf_counter()
        policy = t._learner(policy_role).policy
        clock: dict[str, float] = {}  # the rollout's prompt, model and env seconds
        trajs = rollout(
            policy, self.runner, tasks, rcfg, iteration=index, seed=seed, source=role, timings=clock
        )
        self._timed(f"perf/{role}_rollout_s", time.perf_counter() - start)
        for part, seconds in clock.items():
            self._timed(f"perf/{role}_rollout_{part}_s", seconds)
        self.trajs[role] += trajs
        t.budget["env_steps_actor" if role == "actor" else "env_steps_explorer"] += sum(
            x.env_steps for x in trajs
        )
        t._emit("on_rollout_end", self.k, {}, role=role, trajectories=trajs)
        return trajs

    def update(self, role: str, batch: LoopBatch) -> Mapping[str, float]:
        t, cfg = self.trainer, self.trainer.cfg
        ub = UpdateBatch(batch.trajs, batch.rewards, batch.offpolicy, batch.stored_advantages)
        algo = cfg.algo if role == "actor" else replace(cfg.algo, lr=cfg.explorer_lr)
        start = time.perf_counter()
        metrics = t._update(role, ub, algo, t._seed(role, self.k, len(self.batches[role])))
        self._timed(f"perf/{role}_update_s", time.perf_counter() - start)
        t.budget[f"{role}_updates"] += 1
        self.batches[role].append(ub)
        return metrics

    def advantages(
        self, trajs: Sequence[Trajectory], rewards: Sequence[Sequence[float]]
    ) -> list[list[float]] | None:
        cfg = self.trainer.cfg
        batch = UpdateBatch(list(trajs), [list(r) for r in rewards])
        if cfg.algo.name == "ppo":  # GAE from the critic of the policy being updated, at update time
            if trajs and trajs[0].source == "collection":
                self.batches["collection"].append(batch)
            return None
        flat = batch_advantages(batch, cfg.algo).step
        batch.advantages = flat
        if trajs and trajs[0].source == "collection":  # RSPO_H stores A's own rollouts, tabled already
            self.batches["collection"].append(batch)
        out, i = [], 0
        for traj in trajs:
            out.append(flat[i : i + len(traj.steps)].tolist())
            i += len(traj.steps)
        return out


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
        self.cfg = _checked(cfg)
        self.callbacks = list(callbacks)
        self.run_dir = Path(run_dir or cfg.train.run_dir or _default_run_dir(cfg))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.start_report = dict(start_report or {})
        if "weights_sha256" not in self.start_report:  # a warm start built now has it already
            self.start_report["weights_sha256"] = weights_digest(policy.model)
        write_start(self.run_dir, self.start_report)
        # the reference of the KL penalty: LoRA's base with the adapters off, else a frozen copy of the
        # starting policy, made only where the penalty reads it
        lora, kl = _uses_lora(cfg, policy), cfg.algo.kl_coef > 0
        policy = replace(policy, **_scoring(cfg))
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
        return update(self._learner(role), batch, algo, self.cfg.swap, temperature, seed, reference)

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
        run = _LoopRun(self, runner, k)
        record = rspo_loop(
            run, self.loop_settings, self.rewards, self.loop_buffer, random.Random(self._seed("loop", k))
        )
        row |= run.clock
        row |= _rollout_metrics("rollout", run.trajs["actor"], self.rewards)
        row |= _rollout_metrics(
            "explorer_rollout", run.trajs["explorer"] + run.trajs["collection"], self.rewards
        )
        row |= _mean_metrics(record.actor_updates)
        row |= _as_explorer(_mean_metrics(record.explorer_updates))
        row |= record.metrics
        self._budget_row(row)
        data = {"record": record, "buffer": [e.traj for e in record.collection]}
        self._emit(
            "on_swap", k, {key: v for key, v in row.items() if key.startswith(("swap/", "explorer/"))}, **data
        )
        batches = run.batches["actor"]
        self._emit("on_update_end", k, row, batch=batches[-1], batches=batches, record=record)
        self._record(k, row, lambda: self._loop_table(k, run.batches))

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
        self._record(k, row, lambda: self._write_table(k, batch, explorer))  # 6. the turn table; evaluation

    @property
    def loop_settings(self) -> LoopSettings:
        """The paper's loop as the run's config sets it."""
        cfg, s = self.cfg, self.cfg.swap
        return LoopSettings(
            steps=s.loop_steps,
            on_policy_tasks=cfg.on_policy_tasks,
            replayed=cfg.replayed_per_update,
            collect_tasks=cfg.collect_tasks,
            explorer_steps=s.mode == "rspo",
            explorer_reward=s.explorer_reward,
            dense_noise=cfg.reward.dense_noise,
            replay_source=s.replay_source,
            offpolicy_advantage=s.offpolicy_advantage,
            sampling=s.sampling,
            draw_unit=s.draw_unit,
            tie_order=s.tie_order,
            draw_replacement=s.draw_replacement,
            buffer=s.buffer,
        )

    @property
    def env_steps(self) -> int:
        """Env steps spent so far, actor and explorer together."""
        return self.budget["env_steps_actor"] + self.budget["env_steps_explorer"]

    def _loop_table(self, k: int, batches: Mapping[str, list[UpdateBatch]]) -> None:
        """The loop's per-turn table: A's k batches (role actor or replay), B's k dense batches
        (explorer) and its collection (collection), each with the rewards and advantages it carried."""
        frames, first = [], 0
        for role in ("actor", "explorer", "collection"):
            for batch in batches[role]:
                proc = self.rewards.batch_rewards(batch.trajs, "process")
                adv = batch.advantages.tolist() if batch.advantages is not None else None
                outcomes = [self.rewards.outcome_return(t) for t in batch.trajs]
                frames.append(turn_table(batch.trajs, k, proc, batch.rewards, adv, outcomes, first_id=first))
                first += len(batch.trajs)
        if frames:
            write_table(
                pd.concat(frames, ignore_index=True), self.run_dir / "turns" / f"iter_{k:05d}.parquet"
            )

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
        row |= _rollout_metrics(prefix, trajs, self.rewards)
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
            self.pair, optimizer, k, s.sync_every, s.explorer_updates, actor, previous, self.rewards, x_update
        )
        return _as_explorer(m)

    def _swap(self, k: int, actor: list[Trajectory], explorer: list[Trajectory], row: dict) -> UpdateBatch:
        """Step 4 (``rspo_kit.swap.reward_swap``): the actor's batch, scored by outcome alone."""
        rng = random.Random(self._seed("replay", k))
        with timer(row, "perf/swap_s"):
            ratio, group_size = self.cfg.swap.replay_ratio, self.cfg.algo.group_size
            swap = reward_swap(actor, explorer, self.buffer, self.rewards, ratio, group_size, rng)
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
        res = self._evaluation(split, n, greedy)
        return {} if res is None else _eval_metrics(prefix, res)

    def _evaluation(self, split: str | None, n: int | None, greedy: bool) -> EvalResult | None:
        cfg = self.cfg
        n = cfg.train.eval_n if n is None else n
        if n == 0:
            return None
        return evaluate(
            self._learner("actor").policy,
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

    def final_evaluation(self, done: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Each of ``train.final_eval_split``'s splits on ``final_eval_n`` tasks, as ``final/<split>/*``
        (unless ``train.final_eval_greedy`` is False) and sampled, as ``final_sampled/<split>/*``, with
        ``train.final_eval_sampled``; every episode goes to the run's ``final_episodes.parquet``
        (``rspo_kit.records.episodes``).

        Evaluations that ``done`` (a metrics row) already holds on as many tasks are skipped.
        """
        t = self.cfg.train
        n = t.final_eval_n or t.eval_n
        done = done or {}
        row: dict[str, float] = {}
        for split in t.final_eval_splits:
            size = float(len(list_tasks(self.cfg.env.name, split, n=n)))
            for prefix, greedy in ((f"final/{split}", True), (f"final_sampled/{split}", False)):
                wanted = t.final_eval_greedy if greedy else t.final_eval_sampled
                if wanted and done.get(f"{prefix}/tasks") != size:
                    res = self._evaluation(split, n, greedy)
                    if res is not None:
                        write_episodes(self.run_dir, prefix, res.episodes)
                        row |= _eval_metrics(prefix, res)
        return row

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

    def _write_table(self, k: int, batch: UpdateBatch, explorer) -> None:
        # the advantages the update used (PPO's: over its critic's values at the time); the explorer's
        # fresh rollout has none yet (it trains on it next iteration)
        mixed, rewards = batch.trajs, batch.rewards
        adv = batch.advantages.tolist() if batch.advantages is not None else None
        outcome = self.rewards.outcome_return
        frames = [
            turn_table(
                mixed,
                k,
                self.rewards.batch_rewards(mixed, "process"),
                rewards,
                adv,
                [outcome(t) for t in mixed],
            )
        ]
        if explorer:
            proc = self.rewards.batch_rewards(explorer, "process")
            outcomes = [outcome(t) for t in explorer]
            frames.append(turn_table(explorer, k, proc, proc, None, outcomes, first_id=len(mixed)))
        write_table(pd.concat(frames, ignore_index=True), self.run_dir / "turns" / f"iter_{k:05d}.parquet")

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

    def restore_newest(self) -> Path:
        """Restore the newest checkpoint that loads: the one ``latest`` names, else an older one, with a
        warning that names what could not be loaded. ``CheckpointError`` naming the run folder when
        none loads: a resumed run never silently starts over."""
        first = latest_checkpoint(self.run_dir)
        if first is None:
            raise CheckpointError(
                self.run_dir,
                "holds no checkpoint to resume from (no latest, no ckpt-* folder); "
                "train it anew without resume, or delete it",
            )
        number = int(first.name[5:].partition(".")[0])
        older = [c for c in checkpoints(self.run_dir) if int(c.name[5:].partition(".")[0]) < number]
        failures: list[str] = []
        for folder in [first, *older]:
            try:
                self.restore(folder)
            except CheckpointError as err:
                failures.append(str(err))
                continue
            if failures:
                warnings.warn(f"{'; '.join(failures)}: resuming from {folder} instead", stacklevel=2)
            return folder
        raise CheckpointError(self.run_dir, f"holds no loadable checkpoint: {'; '.join(failures)}")

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


# fields that change how long a run trains, how it executes and what it evaluates, not what it learns:
# a run may resume under other values (a finished run then adds the final evaluations it lacks). Not
# eval_split: one run's eval/* curve is on one split
RESUMABLE_FIELDS = tuple(
    f"train.{name}"
    for name in (
        "iterations",
        "updates",
        "max_env_steps",
        "eval_every",
        "eval_n",
        "final_eval_split",
        "final_eval_n",
        "final_eval_sampled",
        "final_eval_greedy",
        "checkpoint_every",
        "tables",
        "threads",
        "progress_bar",
        "run_dir",
    )
)


def _what_it_computes(cfg: RunConfig) -> dict:
    d = cfg.to_dict()
    if d["reward"]["process"] == "auto":  # the reward that runs: _checked resolves it, config.json keeps it
        d["reward"]["process"] = auto_process_reward(cfg.env.name, cfg.swap.mode, cfg.reward.misalign_eps)
    d["train"] = {k: v for k, v in d["train"].items() if f"train.{k}" not in RESUMABLE_FIELDS}
    d["swap"]["explorer_lr"] = cfg.explorer_lr  # an explicit value equal to the default's is the same run
    d["swap"]["explorer_temperature"] = cfg.explorer_temperature  # likewise
    d["policy"].pop("warmstart_from")  # where the warm start came from: installing it checks its weights
    if not cfg.policy.warmstart:  # the SFT settings of a warm start the run does not do
        d["policy"] = {k: v for k, v in d["policy"].items() if not k.startswith("sft_")}
    return d


def resumable(cfg: RunConfig) -> Path | None:
    """``cfg.train.run_dir`` if it holds a checkpoint of this same run, else None: ``train(cfg, resume=...)``.

    So a notebook or a sweep cell that was killed continues from its last iteration when it runs
    again. A checkpoint of a different configuration there raises instead of being mixed with this
    run (only iterations, threads, the progress bar and the final evaluation may differ: a finished
    run resumed with other final splits, more tasks or sampled evaluation adds what it lacks; the
    SFT settings count only for a run that warm-starts itself).
    """
    if not cfg.train.run_dir:
        return None
    run_dir = Path(cfg.train.run_dir)
    if not checkpoints(run_dir) or not (run_dir / "config.json").exists():
        return None
    diff = _differences(stored_config(run_dir), cfg)
    if diff:
        raise ValueError(
            f"{run_dir} holds a checkpointed run of another configuration ({'; '.join(diff)}); "
            "delete that folder or choose another run_dir"
        )
    return run_dir


def _differences(stored: RunConfig, cfg: RunConfig) -> list[str]:
    """What ``cfg`` would compute differently from the ``stored`` run, field by field."""
    ours, theirs = _what_it_computes(cfg), _what_it_computes(stored)
    return [
        f"{section}.{k}: {theirs[section].get(k)!r} there, {v!r} here"
        for section, fields in ours.items()
        for k, v in fields.items()
        if theirs[section].get(k) != v
    ]


def stored_config(run_dir: str | Path) -> RunConfig:
    """The configuration a run folder was trained under (its ``config.json``), or an error naming it."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(run_dir, "is not a training run: it has no config.json")
    return read_record(path, RunConfig.from_dict)


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
        diff = _differences(stored, cfg.validate())
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
    trainer.restore_newest()
    return trainer.run()


def _start(cfg: RunConfig, callbacks: Sequence[Any], run_dir: Path | None = None) -> Trainer:
    """The configuration checked, its starting policy built (the preset, or its SFT warm start, cached),
    and the Trainer that trains it. A resumed run builds it too: the reference of a KL penalty is a
    copy of it, and its checkpoint then replaces the weights that training changed."""
    policy, report = initial_policy(_checked(cfg), progress_bar=cfg.train.progress_bar)
    return Trainer(cfg, policy, callbacks, run_dir, start_report=report)
