"""Learned process reward model (PRM): a success predictor Φ(progress) used as potential-based shaping.

``fit_prm`` trains a small MLP on logged trajectories with Monte-Carlo labels: every step's
``progress_after`` is one sample, labelled with whether its episode succeeded, so Φ(s) estimates
P(success | s) under the behaviour policy that logged the data. ``LearnedPRM.shaped`` turns Φ into
a process reward of the shared signature, r_p = γ·Φ(s') − Φ(s) (Ng et al., 1999), whose episode
return telescopes to γ-discounted Φ(last) − Φ(first); ``register_learned`` makes it available as
``process_reward("learned", env=...)`` and in ``combine``. ``roc_auc`` and ``evaluate_prm`` say how
well Φ predicts outcomes on held-out trajectories.

Φ reads only the progress mapping a process reward receives (the env's numeric subgoal state), never
the text, so it fits the ``ProcessReward`` signature and costs one tiny forward pass per step.

Run as a script, the module logs trajectories of a noisy expert (no LLM), fits a PRM on 75% of the
tasks and reports its AUC on the other 25%::

    python -m rspo_kit.rewards.learned --env alfworld --episodes 800 --out runs/prm_alfworld
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rspo_kit.paths import atomic_write_text
from rspo_kit.rewards.process import PotentialReward, register_process_reward

FORMAT = "rspo_kit.learned_prm/1"
WEIGHTS_FILE = "prm.safetensors"
META_FILE = "prm.json"


@dataclass(frozen=True)
class PRMConfig:
    """How ``fit_prm`` trains Φ.

    ``hidden`` = 0 gives logistic regression; ``pos_weight`` (None: off) multiplies the loss of
    successful samples, which trades Φ's calibration as a probability for balance on rare successes
    (AUC, a ranking measure, barely moves). ``gamma`` is the default discount of ``shaped``.
    """

    hidden: int = 32
    epochs: int = 300
    lr: float = 1e-2
    weight_decay: float = 1e-4
    gamma: float = 1.0
    seed: int = 0
    pos_weight: float | None = None

    def __post_init__(self) -> None:
        if self.hidden < 0:
            raise ValueError(f"PRMConfig.hidden must be >= 0 (0: logistic regression), got {self.hidden}")
        if self.epochs < 1:
            raise ValueError(f"PRMConfig.epochs must be >= 1, got {self.epochs}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"PRMConfig.lr must be a finite number > 0, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"PRMConfig.weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if not (0.0 <= self.gamma <= 1.0):
            raise ValueError(f"PRMConfig.gamma must lie in [0, 1], got {self.gamma}")
        if self.pos_weight is not None and not (math.isfinite(self.pos_weight) and self.pos_weight > 0):
            raise ValueError(
                f"PRMConfig.pos_weight must be None or a finite number > 0, got {self.pos_weight}"
            )


def _number(key: str, value: Any) -> float:
    """A progress value as a float: numbers as they are, booleans as 0/1."""
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"progress values must be numbers or booleans, got {key}={value!r}")


def _net(n_features: int, hidden: int) -> nn.Module:
    if hidden == 0:
        return nn.Sequential(nn.Linear(n_features, 1))
    return nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))


@dataclass(eq=False)
class LearnedPRM:
    """Φ(progress) = P(success | progress), a small MLP over the progress keys seen at fit time.

    ``keys`` fixes the feature order (sorted); a key missing from a progress mapping reads 0 and a key
    unknown at fit time is ignored, so the empty mapping (no step taken yet) is a valid input. Φ of
    it is an extrapolation, though (no logged state looks like it): give the first step the reset's
    progress (``env.info["progress"]``) as its before-state where the env reports one.
    ``scale`` divides each feature (its largest magnitude at fit time) so that counts and shares
    enter the net on one scale.
    """

    keys: tuple[str, ...]
    scale: torch.Tensor  # (F,)
    net: nn.Module
    config: PRMConfig = field(default_factory=PRMConfig)

    def __repr__(self) -> str:
        return f"LearnedPRM(keys={self.keys}, hidden={self.config.hidden})"

    def features(self, progresses: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """(N, F) normalised feature rows of N progress mappings."""
        rows = [[_number(k, p.get(k, 0)) for k in self.keys] for p in progresses]
        x = torch.tensor(rows, dtype=torch.float32).reshape(len(rows), len(self.keys))  # (N, F)
        return x / self.scale

    def logits(self, progresses: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """(N,) logits of Φ, with gradients."""
        return self.net(self.features(progresses)).squeeze(-1)

    def phi_batch(self, progresses: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        """(N,) Φ of each progress mapping, in [0, 1], without gradients."""
        with torch.no_grad():
            return torch.sigmoid(self.logits(progresses))

    def phi(self, progress: Mapping[str, Any]) -> float:
        """Φ of one progress mapping: the predicted probability that the episode succeeds."""
        return float(self.phi_batch([progress])[0])

    def shaped(self, gamma: float | None = None) -> ShapedPRM:
        """The process reward γ·Φ(after) − Φ(before) (γ: ``config.gamma`` unless given)."""
        return ShapedPRM(self, self.config.gamma if gamma is None else float(gamma))

    def save(self, folder: str | Path) -> Path:
        """Write ``prm.safetensors`` (weights, scale) and ``prm.json`` (keys, config); no pickle.

        Each file is written to a temporary name and moved into place, so a crash never leaves a
        half-written file; the JSON goes last.
        """
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {"scale": self.scale.detach().contiguous()}
        tensors |= {f"net.{k}": v.detach().contiguous() for k, v in self.net.state_dict().items()}
        tmp = folder / f".{WEIGHTS_FILE}.{os.getpid()}.tmp"
        save_file(tensors, str(tmp))
        os.replace(tmp, folder / WEIGHTS_FILE)
        meta = {"format": FORMAT, "keys": list(self.keys), "config": asdict(self.config)}
        atomic_write_text(folder / META_FILE, json.dumps(meta, indent=1))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> LearnedPRM:
        """The PRM that ``save`` wrote to ``folder``."""
        from safetensors.torch import load_file

        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder / META_FILE} is not a learned PRM of format {FORMAT!r}")
        tensors = load_file(str(folder / WEIGHTS_FILE))
        config = PRMConfig(**meta["config"])
        keys = tuple(meta["keys"])
        net = _net(len(keys), config.hidden)
        net.load_state_dict({k.removeprefix("net."): v for k, v in tensors.items() if k.startswith("net.")})
        net.eval()
        return cls(keys, tensors["scale"], net, config)


@dataclass(frozen=True, eq=False)
class ShapedPRM(PotentialReward):
    """Potential-based shaping with a learned potential: r_p = γ·Φ(after) − Φ(before).

    A process reward of the shared signature. Over an episode the rewards sum to
    Σ_t γ^t r_t = γ^T·Φ(s_T) − Φ(s_0): loops earn nothing, and with γ = 1 only the last state's
    predicted success minus the first's remains.

    >>> from types import SimpleNamespace as NS
    >>> def episode(done, won):
    ...     return NS(steps=[NS(progress_after={"done": d}) for d in done], won=won)
    >>> data = [episode([0, 1], True), episode([0, 0], False), episode([1, 1], True), episode([0], False)]
    >>> reward = fit_prm(data, PRMConfig(hidden=0, epochs=200, lr=0.1)).shaped()
    >>> reward({"done": 0}, {"done": 1}, "finish the task", True, {}) > 0   # a step towards success
    True
    >>> reward({"done": 1}, {"done": 1}, "look", True, {})                  # same state, γ = 1: nothing
    0.0
    """

    prm: LearnedPRM
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if not (0.0 <= self.gamma <= 1.0):
            raise ValueError(f"gamma must lie in [0, 1], got {self.gamma!r}")

    def potentials(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[float, float]:
        phi_before, phi_after = self.prm.phi_batch([before, after]).tolist()  # one batched pass for both
        return phi_before, phi_after


def _step_samples(trajectories: Iterable[Any]) -> tuple[list[Mapping[str, Any]], list[float]]:
    """Every step's ``progress_after`` with its episode's outcome (the Monte-Carlo label)."""
    progresses, labels = [], []
    for trajectory in trajectories:
        for step in trajectory.steps:
            progresses.append(step.progress_after)
            labels.append(float(bool(trajectory.won)))
    return progresses, labels


def fit_prm(trajectories: Iterable[Any], cfg: PRMConfig = PRMConfig()) -> LearnedPRM:
    """Train Φ with BCE on per-step samples; deterministic for a given ``cfg.seed``.

    ``trajectories``: anything with ``.steps`` (each with ``.progress_after``, a mapping of numbers)
    and ``.won`` — ``policy.rollout.Trajectory`` or the light records of this module's CLI. Full-batch
    AdamW for ``cfg.epochs`` iterations (a few seconds for ~10k samples on one CPU thread); the global
    RNG is left untouched.
    """
    progresses, labels = _step_samples(trajectories)
    if not progresses:
        raise ValueError("fit_prm needs at least one step")
    keys = tuple(sorted({k for p in progresses for k in p}))
    if not keys:
        raise ValueError("fit_prm found no progress keys: every progress mapping is empty")
    raw = torch.tensor([[_number(k, p.get(k, 0)) for k in keys] for p in progresses])  # (N, F)
    scale = raw.abs().amax(dim=0)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # constant-zero features stay 0
    y = torch.tensor(labels)  # (N,)
    pos_weight = None if cfg.pos_weight is None else torch.tensor(cfg.pos_weight)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        prm = LearnedPRM(keys, scale, _net(len(keys), cfg.hidden), cfg)
        x = raw / scale
        optimizer = torch.optim.AdamW(prm.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        prm.net.train()
        for _ in range(cfg.epochs):
            logits = prm.net(x).squeeze(-1)  # (N,)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    prm.net.eval()
    return prm


def roc_auc(scores: Sequence[float] | torch.Tensor, labels: Sequence[bool] | torch.Tensor) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative), ties ½.

    Rank-based (Mann–Whitney U): with tied scores given their average rank,
    AUC = (Σ_{i positive} rank_i − P(P+1)/2) / (P·N); O(n log n). NaN when either class is empty.

    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    >>> roc_auc([0.5, 0.5, 0.5], [1, 0, 1])
    0.5
    """
    s = torch.as_tensor(scores, dtype=torch.float64).flatten()
    y = torch.as_tensor(labels).flatten()
    if s.shape != y.shape:
        raise ValueError(f"{s.numel()} scores but {y.numel()} labels")
    if torch.isnan(s).any():
        raise ValueError("roc_auc got NaN scores")
    if not torch.isin(y.to(torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)).all():
        raise ValueError("labels must be 0/1 or booleans")
    y = y.bool()
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    _, inverse, counts = torch.unique(s, sorted=True, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).to(torch.float64)  # a tie group of c values holds ranks end-c+1 .. end
    average_rank = ends - (counts.to(torch.float64) - 1) / 2
    rank_sum = average_rank[inverse][y].sum().item()
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def evaluate_prm(
    prm: Any, trajectories: Sequence[Any], *, early_fraction: float = 0.5, early_steps: int = 5
) -> dict[str, float]:
    """How well Φ predicts outcomes on ``trajectories``: three AUCs, plus counts and success rate.

    ``prm``: anything with ``phi_batch(progresses) -> (N,)`` scores (a ``LearnedPRM`` or a hand-written
    potential for comparison).

    - ``step_auc``: Φ(progress_after) of every step against its episode's outcome. Late steps nearly
      reveal the outcome (the last state of a win shows the task done), so it flatters Φ.
    - ``early_auc``: one score per trajectory, Φ after step ⌈early_fraction·T⌉ of its T steps. Failed
      episodes often run to the step cap, so that step comes later in them than in wins: the episode
      length, which Φ never sees, leaks into which states are compared.
    - ``step_k_auc``: Φ after exactly ``early_steps`` = k steps, over the ``n_running_at_k``
      episodes still running then (more than k steps): what a potential faces at time k, with no
      knowledge of the future length. NaN when no episode runs that long or all share one outcome.
    """
    if not (0.0 < early_fraction <= 1.0):
        raise ValueError(f"early_fraction must lie in (0, 1], got {early_fraction!r}")
    if early_steps < 1:
        raise ValueError(f"early_steps must be >= 1, got {early_steps!r}")
    trajectories = [t for t in trajectories if len(t.steps) > 0]
    progresses, labels = _step_samples(trajectories)
    won = [float(bool(t.won)) for t in trajectories]
    early = [
        t.steps[max(0, math.ceil(early_fraction * len(t.steps)) - 1)].progress_after for t in trajectories
    ]
    running = [t for t in trajectories if len(t.steps) > early_steps]
    at_k = [t.steps[early_steps - 1].progress_after for t in running]

    def auc(states: list[Mapping[str, Any]], outcomes: list[float]) -> float:
        return roc_auc(prm.phi_batch(states), outcomes) if states else math.nan

    return {
        "step_auc": auc(progresses, labels),
        "early_auc": auc(early, won),
        "early_fraction": early_fraction,
        "step_k_auc": auc(at_k, [float(bool(t.won)) for t in running]),
        "step_k": early_steps,
        "n_running_at_k": len(running),
        "success_rate": sum(won) / len(won) if won else math.nan,
        "n_trajectories": len(trajectories),
        "n_steps": len(progresses),
    }


def register_learned(
    prm: LearnedPRM, env: str, name: str = "learned", gamma: float | None = None
) -> ShapedPRM:
    """Register ``prm.shaped(gamma)`` as ``process_reward(name, env=env)`` (and for ``combine``).

    Registering again under the same name replaces the earlier reward, as for every process reward.
    """
    reward = prm.shaped(gamma)
    register_process_reward(env, name)(reward)
    return reward


# ----------------------------------------------------------------------------- logged trajectories


@dataclass(frozen=True)
class LoggedStep:
    """One step of a logged trajectory: what ``fit_prm`` and the shaped reward read."""

    action: str
    valid: bool
    progress_before: Mapping[str, float]
    progress_after: Mapping[str, float]


@dataclass(frozen=True)
class LoggedTrajectory:
    task_id: str
    kind: str
    expert_p: float  # the behaviour policy's probability of following the expert this episode
    steps: tuple[LoggedStep, ...]
    won: bool
    score: float


# Behaviour spread of expert-following probability per env, chosen so that about half the episodes
# succeed. Measured on 100 train tasks: ALFWorld (50-step cap) wins 1%, 20%, 51%, 86%, 100% at
# p = 0, 0.1, 0.2, 0.3, 0.5 (the planner recovers from random detours); WebShop (15 steps) wins
# 0%, 2%, 12%, 43% at p = 0, 0.2, 0.3, 0.5.
BEHAVIOUR_P: dict[str, tuple[float, float]] = {"alfworld": (0.0, 0.5), "webshop": (0.2, 1.0)}
DEFAULT_BEHAVIOUR_P = (0.3, 1.0)


def _random_action(admissible: Sequence[str], instruction: str, rng: random.Random) -> str:
    """A uniformly random admissible action; WebShop's ``search[...]`` gets a random subset of the instruction."""
    action = rng.choice(list(admissible)) if admissible else "look"
    if action == "search[...]":
        words = instruction.split() or ["item"]
        query = [w for w in words if rng.random() < 0.5] or [rng.choice(words)]
        action = f"search[{' '.join(query)}]"
    return action


def noisy_expert_episode(env: Any, task: Any, p: float, rng: random.Random) -> LoggedTrajectory:
    """One episode of the behaviour policy: the expert's action with probability ``p``, else a random one."""
    obs = env.reset(task)
    before = dict(getattr(env, "info", {}).get("progress", {}))
    steps, result = [], None
    while result is None or not result.done:
        expert = env.expert_action() if rng.random() < p else None
        action = expert or _random_action(env.admissible_actions(), obs.instruction, rng)
        result = env.step(action)
        after = dict(result.info["progress"])
        steps.append(LoggedStep(action, result.valid, before, after))
        before = after
    return LoggedTrajectory(task.id, task.kind, p, tuple(steps), bool(result.won), float(result.score))


def collect_behaviour(
    env_name: str,
    episodes: int,
    *,
    p_range: tuple[float, float] | None = None,
    tasks: int | None = None,
    seed: int = 0,
    split: str = "train",
    progress_bar: bool = True,
) -> list[LoggedTrajectory]:
    """``episodes`` noisy-expert episodes on the first ``tasks`` tasks of ``split`` (default: one per episode).

    Episode i plays task i mod ``tasks`` with p ~ U(p_range) drawn from its own seeded RNG, so the data
    depend only on the arguments. Episode caps are the env's defaults (ALFWorld 50, WebShop 15).
    """
    from tqdm.auto import tqdm

    from rspo_kit.envs import list_tasks, make_env

    p_min, p_max = p_range or BEHAVIOUR_P.get(env_name, DEFAULT_BEHAVIOUR_P)
    if not (0.0 <= p_min <= p_max <= 1.0):
        raise ValueError(f"p_range must satisfy 0 <= p_min <= p_max <= 1, got {(p_min, p_max)}")
    task_list = list_tasks(env_name, split=split, n=tasks or episodes)
    env = make_env(env_name)
    logged = []
    for i in tqdm(range(episodes), desc=f"{env_name} behaviour episodes", disable=not progress_bar):
        rng = random.Random(seed * 1_000_003 + i)
        logged.append(
            noisy_expert_episode(env, task_list[i % len(task_list)], rng.uniform(p_min, p_max), rng)
        )
    if hasattr(env, "close"):
        env.close()
    return logged


def split_by_task(
    trajectories: Sequence[LoggedTrajectory], held_out: float = 0.25, seed: int = 0
) -> tuple[list[LoggedTrajectory], list[LoggedTrajectory]]:
    """(train, held-out): a seeded shuffle of the task ids puts ``held_out`` of the tasks aside."""
    if not (0.0 < held_out < 1.0):
        raise ValueError(f"held_out must lie in (0, 1), got {held_out!r}")
    task_ids = sorted({t.task_id for t in trajectories})
    random.Random(seed).shuffle(task_ids)
    test_ids = set(task_ids[: round(held_out * len(task_ids))])
    train = [t for t in trajectories if t.task_id not in test_ids]
    test = [t for t in trajectories if t.task_id in test_ids]
    return train, test


@dataclass(frozen=True)
class SubgoalPotential:
    """The env's hand-written potential as a baseline scorer: Φ_subgoal(s) = subgoal(0, s).

    Both built-in ``subgoal`` rewards are potential-based with Φ(all zeros) = 0, so the reward of a
    step from the all-zero state reads the potential itself.
    """

    env: str

    def phi_batch(self, progresses: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        from rspo_kit.rewards.process import process_reward

        reward: Callable[..., float] = process_reward("subgoal", env=self.env)
        return torch.tensor([reward(dict.fromkeys(p, 0), p, "", True, {}) for p in progresses])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="alfworld")
    parser.add_argument("--episodes", type=int, default=800)
    parser.add_argument(
        "--tasks", type=int, default=None, help="distinct train tasks (default: one per episode)"
    )
    parser.add_argument("--p-min", type=float, default=None, help="behaviour: lowest P(expert action)")
    parser.add_argument("--p-max", type=float, default=None, help="behaviour: highest P(expert action)")
    parser.add_argument("--held-out", type=float, default=0.25, help="share of tasks held out")
    parser.add_argument("--early-fraction", type=float, default=0.5)
    parser.add_argument("--early-steps", type=int, default=5, help="k of step_k_auc")
    parser.add_argument("--hidden", type=int, default=PRMConfig.hidden)
    parser.add_argument("--epochs", type=int, default=PRMConfig.epochs)
    parser.add_argument("--seed", type=int, default=0)
    # The net is tiny: one thread is as fast as many and leaves the cores to a trainer.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    default_p = BEHAVIOUR_P.get(args.env, DEFAULT_BEHAVIOUR_P)
    p_range = (
        default_p[0] if args.p_min is None else args.p_min,
        default_p[1] if args.p_max is None else args.p_max,
    )
    start = time.perf_counter()
    logged = collect_behaviour(args.env, args.episodes, p_range=p_range, tasks=args.tasks, seed=args.seed)
    collect_s = time.perf_counter() - start
    train, test = split_by_task(logged, args.held_out, args.seed)
    cfg = PRMConfig(hidden=args.hidden, epochs=args.epochs, seed=args.seed)
    start = time.perf_counter()
    prm = fit_prm(train, cfg)
    fit_s = time.perf_counter() - start
    at = {"early_fraction": args.early_fraction, "early_steps": args.early_steps}
    report = {
        "env": args.env,
        "episodes": args.episodes,
        "behaviour": {
            "p_range": list(p_range),
            "success_rate": sum(t.won for t in logged) / len(logged),
            "mean_steps": sum(len(t.steps) for t in logged) / len(logged),
            # context, not a PRM score: how well the hidden per-episode p itself predicts the outcome
            "held_out_p_auc": roc_auc([t.expert_p for t in test], [t.won for t in test]),
        },
        "keys": list(prm.keys),
        "config": asdict(cfg),
        "train": evaluate_prm(prm, train, **at),
        "held_out": evaluate_prm(prm, test, **at),
        "held_out_subgoal_baseline": evaluate_prm(SubgoalPotential(args.env), test, **at),
        "seconds": {"collect": round(collect_s, 2), "fit": round(fit_s, 2)},
    }
    if args.out is not None:
        prm.save(args.out / "prm")
        atomic_write_text(args.out / "report.json", json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
