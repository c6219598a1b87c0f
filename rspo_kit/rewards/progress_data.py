"""The progress model's data: episodes on train tasks, the table of their steps, and how a scorer does on it.

Where episodes come from (``collect_episodes``; each source is named in the data summary):

- ``warm_start``: the policy's own sampled episodes, ``group_size`` per task, as a run samples them
  (``policy.rollout.rollout``, temperature 1): the states an RL run starts from;
- ``noisy_expert``: the env's expert (``env.expert_action()``) with a per-episode probability p of
  taking its action, p ~ U(``p_range``), else a uniformly random admissible one. It widens the data
  beyond what the warm start does, with wins the warm start rarely reaches. Its steps are prompted
  exactly as the policy would prompt them (``build_prompt`` with the policy's tokenizer and prompt
  settings), so the encoder reads the same kind of text from both sources.

``StepData`` is one row per step: the frozen encoder's state h_t (S, D), which trajectory and step
index it belongs to, and per trajectory the outcome R ∈ [0, 1], success, task, group and source. It is
what the head is fitted on, and it is cached on disk so that refitting the head takes seconds.
``split_by_task`` keeps every episode of a task in one split. ``scorer_report`` measures any per-step
scorer on a split (the learned r̂_t, or the env's hand-written ``subgoal`` reward for comparison).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from rspo_kit.paths import atomic_write_text
from rspo_kit.rewards.diagnostics import disagreement_by_step, disagreement_table, rank_agreement
from rspo_kit.rewards.learned import BEHAVIOUR_P, DEFAULT_BEHAVIOUR_P, roc_auc
from rspo_kit.rewards.outcome import OutcomeMode, outcome_reward
from rspo_kit.rewards.process import has_process_reward, process_reward

Source = Literal["warm_start", "noisy_expert"]
SOURCES: tuple[str, ...] = ("warm_start", "noisy_expert")

# The policies whose episodes train an env's committed progress model, and the episode caps their
# protocols run under (rspo_kit.train.presets PRESETS: alfworld-40k, webshop-7k, chain-4k).
WARM_STARTS: dict[str, tuple[str, int | None]] = {
    "alfworld": ("data/warm_starts/alfworld_tiny_sft1536_cap30/policy", 30),
    "webshop": ("data/warm_starts/webshop_tiny_sft1284_cap15/policy", 15),
    "chain-4x2": ("data/warm_starts/chain4x2_tiny_sft1200_noise05/policy", None),
}
# The outcome each protocol trains on: WebShop's partial credit (score / 100), success elsewhere.
OUTCOME_MODE: dict[str, OutcomeMode] = {"webshop": "score"}


@dataclass(frozen=True)
class CollectSpec:
    """Which episodes to collect: ``episodes`` in all, ``noisy_expert_share`` of them from the noisy
    expert, the rest sampled from ``policy`` in groups of ``group_size`` on the first train tasks."""

    env: str
    policy: str
    episodes: int = 384
    noisy_expert_share: float = 0.0
    group_size: int = 8
    max_steps: int | None = None  # None: the env's own cap
    outcome_mode: OutcomeMode = "success"
    seed: int = 0
    p_range: tuple[float, float] | None = None  # noisy expert; None: learned.BEHAVIOUR_P of the env

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"CollectSpec.episodes = {self.episodes}: must be >= 1")
        if not 0.0 <= self.noisy_expert_share <= 1.0:
            raise ValueError(
                f"CollectSpec.noisy_expert_share = {self.noisy_expert_share}: must lie in [0, 1]"
            )
        if self.group_size < 1:
            raise ValueError(f"CollectSpec.group_size = {self.group_size}: must be >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"CollectSpec.max_steps = {self.max_steps}: must be None or >= 1")
        lo, hi = self.behaviour_p
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"CollectSpec.p_range = {self.p_range}: must satisfy 0 <= low <= high <= 1")

    @property
    def behaviour_p(self) -> tuple[float, float]:
        return self.p_range or BEHAVIOUR_P.get(self.env, DEFAULT_BEHAVIOUR_P)

    @property
    def n_noisy(self) -> int:
        return round(self.episodes * self.noisy_expert_share)

    @property
    def n_tasks(self) -> int:
        """Train tasks the warm start plays (its episodes: ``n_tasks · group_size``, about the rest)."""
        sampled = self.episodes - self.n_noisy
        return math.ceil(sampled / self.group_size) if sampled else 0

    @property
    def env_kwargs(self) -> dict:
        return {"max_steps": self.max_steps} if self.max_steps else {}


@dataclass
class Episode:
    """One collected episode: a ``policy.rollout.Trajectory`` and where it came from."""

    source: str
    traj: Any
    expert_p: float | None = None  # noisy expert: its probability of the expert's action


def collect_episodes(spec: CollectSpec, policy: Any, *, progress_bar: bool = True) -> list[Episode]:
    """The warm start's sampled episodes, then the noisy expert's; deterministic for a given ``spec``."""
    from rspo_kit.envs import list_tasks
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.rollout import RolloutConfig, rollout

    n_tasks = max(spec.n_tasks, 1 if spec.n_noisy else 0)
    tasks = list_tasks(spec.env, split="train", n=n_tasks)
    episodes: list[Episode] = []
    if spec.n_tasks:
        cfg = RolloutConfig(group_size=spec.group_size)
        with BatchRunner(spec.env, n_workers=0, env_kwargs=spec.env_kwargs) as runner:
            for chunk in range(0, len(tasks), 8):  # 8 tasks at a time: a run's batch, a bar per chunk
                trajs = rollout(
                    policy,
                    runner,
                    tasks[chunk : chunk + 8],
                    cfg,
                    iteration=chunk,
                    seed=spec.seed,
                    progress_bar=progress_bar,
                )
                episodes += [Episode("warm_start", t) for t in trajs]
    if spec.n_noisy:
        episodes += noisy_expert_episodes(spec, policy, tasks, progress_bar=progress_bar)
    return episodes


def noisy_expert_episodes(
    spec: CollectSpec, policy: Any, tasks: Sequence[Any], *, progress_bar: bool = True
) -> list[Episode]:
    """``spec.n_noisy`` episodes of the noisy expert, episode i on task i mod len(tasks), each with its
    own seeded RNG; steps are ``policy.rollout.Step`` records prompted as ``policy`` would prompt them."""
    from tqdm.auto import tqdm

    from rspo_kit.envs import make_env
    from rspo_kit.envs.base import reset_info
    from rspo_kit.policy.prompts import EpisodeContext, build_prompt
    from rspo_kit.policy.rollout import Step, Trajectory

    env = make_env(spec.env, **spec.env_kwargs)
    lo, hi = spec.behaviour_p
    out = []
    for i in tqdm(
        range(spec.n_noisy), desc=f"{spec.env} noisy expert", disable=not progress_bar, leave=False
    ):
        task = tasks[i % len(tasks)]
        rng = random.Random(spec.seed * 1_000_003 + i)
        p = rng.uniform(lo, hi)
        obs = env.reset(task)
        before = reset_info(env, obs)
        ctx = EpisodeContext(task.env, obs.instruction, obs.text, obs.admissible)
        traj = Trajectory(task.id, task.kind, f"{task.id}@noisy_expert", "noisy_expert")
        while True:
            prompt = build_prompt(ctx, policy.tokenizer, policy.prompt)
            expert = env.expert_action() if rng.random() < p else None
            action = expert or _random_action(ctx.admissible, ctx.instruction, rng)
            res = env.step(action)
            traj.steps.append(
                Step(
                    prompt_ids=prompt,
                    action_ids=policy.encode_action(action),
                    action=action,
                    logprob=0.0,  # not a sample of the policy: no behaviour log-prob
                    token_logprobs=[],
                    valid=res.valid,
                    anchor=before.get("anchor", ""),
                    progress_before=before.get("progress", {}),
                    progress_after=res.info.get("progress", {}),
                    info={k: v for k, v in res.info.items() if k not in ("progress", "anchor")},
                )
            )
            if res.done:
                traj.won, traj.score = res.won, res.score
                break
            ctx.advance(action, res.obs.text, res.obs.admissible)
            before = res.info
        out.append(Episode("noisy_expert", traj, p))
    if hasattr(env, "close"):
        env.close()
    return out


def _random_action(admissible: Sequence[str], instruction: str, rng: random.Random) -> str:
    """A uniformly random admissible action; WebShop's ``search[...]`` searches a random subset of the
    instruction's words (as ``learned.collect_behaviour`` does)."""
    action = rng.choice(list(admissible)) if admissible else "look"
    if action == "search[...]":
        words = instruction.split() or ["item"]
        action = f"search[{' '.join([w for w in words if rng.random() < 0.5] or [rng.choice(words)])}]"
    return action


# ------------------------------------------------------------------------------------ step table

TENSOR_FIELDS = ("states", "step_traj", "step_index", "subgoal", "outcome", "won")


@dataclass
class StepData:
    """One row per step (S), one entry per trajectory (N). Trajectory n's steps are the rows where
    ``step_traj == n``, in step order."""

    states: torch.Tensor  # (S, D) float32: the frozen encoder's last hidden state at the step's last token
    step_traj: torch.Tensor  # (S,) int64 trajectory index
    step_index: torch.Tensor  # (S,) int64 position of the step in its trajectory
    subgoal: torch.Tensor  # (S,) the env's hand-written ``subgoal`` reward of the step (NaN: none)
    outcome: torch.Tensor  # (N,) float32 R ∈ [0, 1]
    won: torch.Tensor  # (N,) bool
    task_id: list[str] = field(default_factory=list)
    group_id: list[str] = field(default_factory=list)
    source: list[str] = field(default_factory=list)

    @property
    def n_traj(self) -> int:
        return len(self.task_id)

    @classmethod
    def build(
        cls, episodes: Sequence[Episode], states: torch.Tensor, *, env: str, outcome_mode: OutcomeMode
    ) -> StepData:
        """The table of ``episodes``, whose steps in order (episode by episode) have ``states`` (S, D)."""
        steps = [(n, t, s) for n, e in enumerate(episodes) for t, s in enumerate(e.traj.steps)]
        if len(steps) != states.shape[0]:
            raise ValueError(f"{len(steps)} steps but {states.shape[0]} encoder states")
        subgoal = baseline_reward(env)
        return cls(
            states=states.float(),
            step_traj=torch.tensor([n for n, _, _ in steps], dtype=torch.long),
            step_index=torch.tensor([t for _, t, _ in steps], dtype=torch.long),
            subgoal=torch.tensor([_baseline(subgoal, s) for _, _, s in steps], dtype=torch.float32),
            outcome=torch.tensor(
                [outcome_reward(e.traj.won, e.traj.score, env=env, mode=outcome_mode) for e in episodes],
                dtype=torch.float32,
            ),
            won=torch.tensor([bool(e.traj.won) for e in episodes], dtype=torch.bool),
            task_id=[e.traj.task_id for e in episodes],
            group_id=[e.traj.group_id for e in episodes],
            source=[e.source for e in episodes],
        )

    def subset(self, trajs: Sequence[int]) -> StepData:
        """The trajectories ``trajs`` (indices), renumbered 0 … len(trajs) − 1 in that order."""
        index = torch.as_tensor(list(trajs), dtype=torch.long)
        new_id = torch.full((self.n_traj,), -1, dtype=torch.long)
        new_id[index] = torch.arange(len(index))
        rows = torch.nonzero(new_id[self.step_traj] >= 0).squeeze(-1)
        # a stable sort by new id keeps each trajectory's rows in step order, as they are stored
        order = torch.sort(new_id[self.step_traj[rows]], stable=True).indices
        rows = rows[order]
        pick = index.tolist()
        return StepData(
            self.states[rows],
            new_id[self.step_traj[rows]],
            self.step_index[rows],
            self.subgoal[rows],
            self.outcome[index],
            self.won[index],
            [self.task_id[i] for i in pick],
            [self.group_id[i] for i in pick],
            [self.source[i] for i in pick],
        )

    def summary(self) -> dict[str, Any]:
        """Counts, success and mean outcome, per source and in all."""

        def describe(rows: list[int]) -> dict[str, Any]:
            lengths = torch.bincount(self.step_traj, minlength=self.n_traj)[rows].float()
            return {
                "trajectories": len(rows),
                "tasks": len({self.task_id[i] for i in rows}),
                "steps": int(lengths.sum()),
                "mean_steps": round(float(lengths.mean()), 3) if rows else math.nan,
                "success_rate": round(float(self.won[rows].float().mean()), 4) if rows else math.nan,
                "mean_outcome": round(float(self.outcome[rows].mean()), 4) if rows else math.nan,
            }

        by_source = {
            s: describe([i for i, x in enumerate(self.source) if x == s]) for s in sorted(set(self.source))
        }
        return {"all": describe(list(range(self.n_traj))), "by_source": by_source}

    def save(self, folder: Path) -> Path:
        """``steps.safetensors`` (the tensors) and ``steps.json`` (ids, groups, sources), JSON last."""
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        tensors = {name: getattr(self, name).contiguous() for name in TENSOR_FIELDS}
        save_file(tensors, str(folder / "steps.safetensors"))
        meta = {"task_id": self.task_id, "group_id": self.group_id, "source": self.source}
        atomic_write_text(folder / "steps.json", json.dumps(meta))
        return folder

    @classmethod
    def load(cls, folder: Path) -> StepData:
        from safetensors.torch import load_file

        meta = json.loads((folder / "steps.json").read_text(encoding="utf-8"))
        return cls(**load_file(str(folder / "steps.safetensors")), **meta)


def baseline_reward(env: str) -> Any:
    """The env's hand-written ``subgoal`` reward (else the generic ``progress`` one), or None."""
    for name in ("subgoal", "progress"):
        if has_process_reward(name, env=env):
            return process_reward(name, env=env)
    return None


def _baseline(reward: Any, step: Any) -> float:
    if reward is None:
        return math.nan
    return float(reward(step.progress_before, step.progress_after, step.action, step.valid, step.info))


def split_by_task(
    data: StepData, *, valid_share: float, test_share: float, seed: int = 0
) -> dict[str, StepData]:
    """``train``, ``valid`` (early stopping) and ``test`` (the report's held-out numbers): a seeded shuffle
    of the task ids puts every episode of a task, of either source, in one split."""
    if not (valid_share > 0 and test_share >= 0 and valid_share + test_share < 1):
        raise ValueError(
            f"valid_share = {valid_share}, test_share = {test_share}: need 0 < valid, 0 <= test, sum < 1"
        )
    tasks = sorted(set(data.task_id))
    random.Random(seed).shuffle(tasks)
    n_valid, n_test = max(1, round(valid_share * len(tasks))), round(test_share * len(tasks))
    if n_valid + n_test >= len(tasks):
        raise ValueError(
            f"{len(tasks)} tasks are too few for a train, valid and test split; collect more episodes"
        )
    which = {t: "valid" for t in tasks[:n_valid]} | {t: "test" for t in tasks[n_valid : n_valid + n_test]}
    splits = {
        name: [i for i, t in enumerate(data.task_id) if which.get(t, "train") == name]
        for name in ("train", "valid", "test")
    }
    return {name: data.subset(rows) for name, rows in splits.items() if rows}


# ------------------------------------------------------------------------------------ the report


def trajectory_sums(step_rewards: torch.Tensor, step_traj: torch.Tensor, n_traj: int) -> torch.Tensor:
    """R̂_n = Σ_{t} r̂_{n,t} (paper Eq. 6): (S,) step rewards and (S,) trajectory ids -> (N,).

    >>> trajectory_sums(torch.tensor([0.5, 0.25, 1.0]), torch.tensor([0, 0, 2]), 3)
    tensor([0.7500, 0.0000, 1.0000])
    """
    return torch.zeros(n_traj, dtype=step_rewards.dtype, device=step_rewards.device).index_add(
        0, step_traj, step_rewards
    )


def scorer_report(
    step_rewards: torch.Tensor, data: StepData, *, constant: float, max_step_rows: int = 30
) -> dict[str, Any]:
    """How a per-step scorer (S,) agrees with the outcome on ``data``; trajectory return R̂ = Σ_t r_t.

    - ``mse``: mean (R̂ − R)², beside ``mse_constant``, that of predicting ``constant`` (the train
      split's mean outcome) for every trajectory: what the head must beat;
    - ``pearson``: correlation of R̂ with R; ``auc_success``: AUC of R̂ for success (NaN: one class);
    - ``kendall_tau``: mean within-group Kendall τ-b of R̂ against R (``rank_agreement``: groups whose
      outcome or R̂ is constant are left out, ``tau_groups`` counts the rest), the ordering a
      group-relative advantage acts on;
    - ``disagreement``: the share of steps rewarded (r_t > 0) in failed trajectories and unrewarded
      (r_t ≤ 0) in successful ones (``diagnostics.disagreement_table``, success = the env's win), in
      all and by step index (the first ``max_step_rows``).
    """
    r = step_rewards.detach().double().cpu()
    if torch.isnan(r).all():
        return {"available": False}
    pred = trajectory_sums(r, data.step_traj, data.n_traj).numpy()
    outcome, won = data.outcome.double().numpy(), data.won.numpy()
    steps = pd.DataFrame(
        {
            "group_id": np.asarray(data.group_id)[data.step_traj.numpy()],
            "traj_id": data.step_traj.numpy(),
            "step": data.step_index.numpy(),
            "process_reward": r.numpy(),
            "outcome": outcome[data.step_traj.numpy()],
            "won": won[data.step_traj.numpy()],
        }
    )
    table = disagreement_table(steps)
    by_step = disagreement_by_step(table).head(max_step_rows)
    agreement = rank_agreement(pred, outcome, data.group_id)
    return {
        "trajectories": data.n_traj,
        "steps": len(r),
        "mse": _round(np.mean((pred - outcome) ** 2)),
        "mse_constant": _round(np.mean((constant - outcome) ** 2)),
        "pearson": _round(np.corrcoef(pred, outcome)[0, 1])
        if pred.std() > 0 and outcome.std() > 0
        else math.nan,
        "auc_success": _round(roc_auc(pred, won)),
        "kendall_tau": _round(agreement.mean_tau),
        "tau_groups": agreement.n_groups - agreement.n_undefined,
        "mean_return_success": _round(pred[won].mean()) if won.any() else math.nan,
        "mean_return_failure": _round(pred[~won].mean()) if (~won).any() else math.nan,
        "disagreement": {
            "rate": _round(table["disagrees"].mean()),
            "rewarded_failure": _round((table["kind"] == "rewarded_failure").mean()),
            "unrewarded_success": _round((table["kind"] == "unrewarded_success").mean()),
            "by_step": [
                {"step": int(step), "steps": int(row.n_steps), "rate": _round(row.disagreement_rate)}
                for step, row in by_step.iterrows()
            ],
        },
    }


def _round(x: float) -> float:
    x = float(x)
    return round(x, 5) if math.isfinite(x) else math.nan
