"""What the notebooks show of an env, for any registered env: what it is, expert episodes scored by
every process reward, and the misalignment knob.

Notebooks 01-05 and the widgets call these instead of code picked by env name. All of
it works from the protocol alone (a ``Task``, the ``Observation``, the admissible actions, the
expert, ``info["progress"]``), so a user's env loaded with ``load_env_module`` gets the same tour as
the built-in ones. What an env adds beyond the protocol is registered by its name: ``ENV_NOTES``, a
paragraph on its world (the built-in envs'; any other env is described from what its protocol shows).

The knob is ``rspo_kit.rewards.misalign`` with its hackable term given rather than looked up as the
env's ``"hack"`` reward: a user names theirs, and an env without one has no knob (``reason`` says
why) instead of failing.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from rspo_kit.envs import Task, TextEnv, list_tasks, make_env
from rspo_kit.envs.base import reset_info, state_info
from rspo_kit.rewards import (
    PROCESS_REWARDS,
    ProcessReward,
    ProcessStep,
    diagnose,
    episode_steps,
    outcome_reward,
    process_reward,
    weighted,
)
from rspo_kit.rewards.process import GENERIC_REWARD, has_process_reward
from rspo_kit.rewards.signals import RewardModel

# Admissible entries that stand for free text rather than name an action (WebShop's ``search[...]``):
# a random action never picks one, the expert writes it out.
TEMPLATES = frozenset({"search[...]"})
ALIGNED_REWARD = "subgoal"  # the name an env gives its (reasonably) aligned process reward
HACK_REWARD = "hack"  # the name an env gives the term of its knob that pays without solving anything

ENV_NOTES = {
    "alfworld": (
        "ALFWorld: a household. The instruction names a goal (put some X on Y, heat, clean, cool, "
        "examine under a lamp); the admissible actions are listed by the env. subgoal pays "
        "1/subgoals_total per subgoal reached, so an expert's subgoal return is exactly 1; heuristic "
        "pays for new places and opening things; hack for pick-ups, put-downs and walking back to "
        "known places."
    ),
    "webshop": (
        "WebShop: a shop. The actions are search[query] and click[...]; the outcome is the original "
        "WebShop reward (type, attribute, option and price match, times 100 as the score). subgoal "
        "is potential-based over its progress signals (query coverage, viewing the right kind of "
        "product, matching options, the reward the current item would earn); hack pays for navigation."
    ),
}
# every level of the chain testbed shares one note
ENV_FAMILY_NOTES = {
    "chain-": (
        "The chain testbed: rooms in a row, the right door of each found by listening; a wrong door "
        "sends the agent back to room 1. subgoal is potential-based (each door through pays "
        "1/rooms, a fall back pays it back); hack pays one room's share per pull of the lever, which "
        "never leads anywhere."
    ),
}


def describe_env(name: str, split: str = "eval") -> str:
    """A paragraph on env ``name``: its note where one is registered, then what its protocol shows
    (tasks, first observation, actions, the expert's first move, the progress it counts)."""
    note = ENV_NOTES.get(name) or next((n for p, n in ENV_FAMILY_NOTES.items() if name.startswith(p)), "")
    tasks = list_tasks(name, split=split)
    if not tasks:
        return f"{note}\n{name} has no {split} tasks".strip()
    env = make_env(name)
    obs = env.reset(tasks[0])
    kinds = sorted({t.kind for t in tasks if t.kind})
    shown = ", ".join(repr(a) for a in obs.admissible[:6]) + (", ..." if len(obs.admissible) > 6 else "")
    lines = [
        f"{name}: {len(tasks)} {split} tasks"
        + (f" of {len(kinds)} kinds ({', '.join(kinds[:6])})" if kinds else ""),
        f"task {tasks[0].id}: {obs.instruction}",
        f"first observation: {obs.text[:300]}",
        f"{len(obs.admissible)} admissible actions: {shown}; the expert starts with {env.expert_action()!r}",
        f"progress counted: {reset_info(env, obs)['progress'] or 'nothing at reset'}",
    ]
    close = getattr(env, "close", None)
    if close is not None:
        close()
    return "\n".join([note, *lines] if note else lines)


def env_process_rewards(name: str) -> dict[str, ProcessReward]:
    """Every process reward env ``name`` has: those registered for it, then the generic ``progress``
    (the change of the sum of its progress numbers) unless it registers its own under that name.

    >>> list(env_process_rewards("chain-4x2"))
    ['subgoal', 'hack', 'progress']
    """
    process_reward(GENERIC_REWARD, env=name)  # registers a built-in env's rewards on first use
    own = dict(PROCESS_REWARDS.get(name, {}))
    return own | ({} if GENERIC_REWARD in own else {GENERIC_REWARD: process_reward(GENERIC_REWARD, env=name)})


def default_process_reward(name: str) -> str:
    """The process reward to train or compare on when none is named: the env's ``subgoal`` where it
    registers one, else the generic ``progress``."""
    return ALIGNED_REWARD if has_process_reward(ALIGNED_REWARD, env=name) else GENERIC_REWARD


def run_process_reward(
    name: str, process: str, misalign_eps: float = 0.0, hack: str = "hack"
) -> tuple[str, ProcessReward]:
    """The process reward a run on env ``name`` recorded in its turn tables, by name and as a callable:
    ``process`` with the env's knob at ``misalign_eps`` towards ``hack`` (``RewardModel.build``, as the trainer builds
    it), or, where the env has no ``process`` (a run that trained on the outcome alone), the generic
    ``progress`` that the trainer records instead."""
    if not has_process_reward(process, env=name):
        return GENERIC_REWARD, process_reward(GENERIC_REWARD, env=name)
    return process, RewardModel.build(name, process=process, misalign_eps=misalign_eps, hack=hack).process


# --------------------------------------------------------------------------------------- episodes
@dataclass
class Episode:
    steps: list[ProcessStep]  # (progress_before, progress_after, action, valid, info) per step
    observations: list[str]  # the env's reply to each step
    won: bool
    score: float


def play_episode(
    env: TextEnv,
    task: Task,
    *,
    p_detour: float = 0.0,
    rng: random.Random | None = None,
    max_steps: int = 30,
) -> Episode:
    """One episode of the env's expert that, with probability ``p_detour`` per step, takes a random
    admissible action instead (the expert replans after it); ``p_detour = 1`` is a random walker.

    Keeps what process rewards need: the progress before and after every step.
    """
    rng = rng or random.Random(0)
    obs = env.reset(task)
    start, actions, results = reset_info(env, obs)["progress"], [], []
    while len(actions) < max_steps and not (results and results[-1].done):
        options = [a for a in obs.admissible if a not in TEMPLATES] or ["look"]
        expert = env.expert_action() if rng.random() >= p_detour else None
        actions.append(expert or rng.choice(options))
        result = env.step(actions[-1])
        # a result without progress or anchor gets the protocol's defaults, as the batch runner gives them
        results.append(dataclasses.replace(result, info=state_info(result.info, result.obs)))
        obs = results[-1].obs
    if not results:
        return Episode([], [], False, 0.0)
    steps = episode_steps(start, actions, results)
    return Episode(steps, [r.obs.text for r in results], results[-1].won, results[-1].score)


def reward_table(episode: Episode, rewards: Mapping[str, ProcessReward]) -> pd.DataFrame:
    """One row per step: the action, whether it was valid, each process reward, the env's reply."""
    rows = [
        {
            "step": i,
            "action": s.action,
            "valid": s.valid,
            **{n: float(r(*s)) for n, r in rewards.items()},
            "observation": obs[:70],
        }
        for i, (s, obs) in enumerate(zip(episode.steps, episode.observations, strict=True))
    ]
    return pd.DataFrame(rows, columns=["step", "action", "valid", *rewards, "observation"])


@dataclass
class ExpertTour:
    """An env's first task of a split, played by its expert and scored by every process reward."""

    env: str
    task: Task
    instruction: str
    episode: Episode
    table: pd.DataFrame  # reward_table of the episode
    outcome: float  # R_o ("success" mode: works for any env)

    @property
    def returns(self) -> dict[str, float]:
        """Each process reward's return over the episode."""
        rewards = [c for c in self.table.columns if c not in ("step", "action", "valid", "observation")]
        return {name: float(self.table[name].sum()) for name in rewards}

    def results(self) -> dict[str, float]:
        """What a notebook records of the tour, keyed by env: ``<env>_expert_won``, ``_steps``,
        ``_score`` and ``<env>_<reward>_return`` per process reward."""
        episode = self.episode
        expert = {"won": float(episode.won), "steps": len(episode.steps), "score": float(episode.score)}
        return {f"{self.env}_expert_{key}": value for key, value in expert.items()} | {
            f"{self.env}_{name}_return": value for name, value in self.returns.items()
        }


def expert_tour(name: str, *, split: str = "eval", max_steps: int = 30, seed: int = 0) -> ExpertTour:
    """The expert's episode on env ``name``'s first ``split`` task, reward by reward."""
    env = make_env(name, max_steps=max_steps)
    task = list_tasks(name, split=split, n=1)[0]
    instruction = env.reset(task).instruction
    episode = play_episode(env, task, rng=random.Random(seed), max_steps=max_steps)
    n_invalid = sum(not s.valid for s in episode.steps)
    outcome = outcome_reward(episode.won, episode.score, n_invalid, env=name)
    return ExpertTour(
        name, task, instruction, episode, reward_table(episode, env_process_rewards(name)), outcome
    )


@dataclass(frozen=True)
class GroupEpisode:
    group_id: str  # the task
    traj_id: int  # index of its detour probability
    p_detour: float
    episode: Episode


def detour_groups(
    name: str, tasks: Sequence[Task], detours: Sequence[float], *, seed: int = 0, max_steps: int = 30
) -> list[GroupEpisode]:
    """A group per task: one episode per detour probability, from the pure expert to a random walker."""
    env, rng = make_env(name, max_steps=max_steps), random.Random(seed)
    return [
        GroupEpisode(task.id, i, p, play_episode(env, task, p_detour=p, rng=rng, max_steps=max_steps))
        for task in tasks
        for i, p in enumerate(detours)
    ]


# ------------------------------------------------------------------------------------ the knob
@dataclass(frozen=True)
class MisalignmentKnob:
    """misalign(eps) = (1 − eps) · base + eps · hack, for any env whose hackable term is known.

    Without one (``hack`` None) only eps = 0 exists and ``reason`` says why.
    """

    env: str
    base_name: str
    base: ProcessReward
    hack_name: str | None
    hack: ProcessReward | None
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.hack is not None

    def __call__(self, eps: float) -> ProcessReward:
        if not (0.0 <= eps <= 1.0):
            raise ValueError(f"eps must lie in [0, 1], got {eps!r}")
        if self.hack is None:
            if eps:
                raise ValueError(f"eps = {eps!r} needs a hackable term: {self.reason}")
            return weighted([(1.0, self.base)])
        return weighted([(1.0 - eps, self.base), (eps, self.hack)])


def misalignment_knob(
    name: str,
    *,
    base: str | ProcessReward | None = None,
    hack: str | ProcessReward | None = HACK_REWARD,
) -> MisalignmentKnob:
    """The knob of env ``name``: ``base`` (default: ``default_process_reward``) mixed with ``hack``, a
    process reward of the env by name or any callable of the same signature.

    A ``hack`` the env does not have gives a knob without one, whose ``reason`` names what the env has
    and how to add one; callers print it and skip what needs eps > 0.

    >>> knob = misalignment_knob("chain-4x2")
    >>> knob.base_name, knob.hack_name
    ('subgoal', 'hack')
    >>> before = {"subgoals_done": 1, "subgoals_total": 4, "lever_pulls": 0}
    >>> knob(0.5)(before, {**before, "lever_pulls": 1}, "pull lever", True, {})  # 0.5 * 0 + 0.5 * 1/4
    0.125
    >>> misalignment_knob("chain-4x2", hack="wander").reason[:58]
    "env 'chain-4x2' has no process reward 'wander' to serve as"
    """
    base = default_process_reward(name) if base is None else base
    base_name = base if isinstance(base, str) else getattr(base, "__name__", type(base).__name__)
    base_reward = process_reward(base, env=name) if isinstance(base, str) else base
    if hack is None:
        return MisalignmentKnob(name, base_name, base_reward, None, None, "no hackable term was given")
    if not isinstance(hack, str):
        return MisalignmentKnob(name, base_name, base_reward, getattr(hack, "__name__", "hack"), hack)
    if not has_process_reward(hack, env=name):
        has = sorted(env_process_rewards(name))
        reason = (
            f"env {name!r} has no process reward {hack!r} to serve as the hackable term (it has {has}); "
            f"name one of them, or register one with @register_process_reward({name!r}, {hack!r}) on a "
            "function (progress_before, progress_after, action, valid, info) -> float that pays for "
            "behaviour that never solves the task"
        )
        return MisalignmentKnob(name, base_name, base_reward, None, None, reason)
    return MisalignmentKnob(name, base_name, base_reward, hack, process_reward(hack, env=name))


def step_frame(groups: Sequence[GroupEpisode], reward: ProcessReward, env: str) -> pd.DataFrame:
    """The per-step table ``diagnose`` reads: group (task), trajectory, step, process reward, outcome."""
    return pd.DataFrame(
        [
            {
                "group_id": g.group_id,
                "traj_id": g.traj_id,
                "step": j,
                "process_reward": float(reward(*s)),
                "won": g.episode.won,
                "outcome": outcome_reward(g.episode.won, g.episode.score, 0, env=env),
            }
            for g in groups
            for j, s in enumerate(g.episode.steps)
        ],
        columns=["group_id", "traj_id", "step", "process_reward", "won", "outcome"],
    )


def knob_sweep(
    groups: Sequence[GroupEpisode], knob: MisalignmentKnob, eps_values: Sequence[float]
) -> pd.DataFrame:
    """Per eps: mean Kendall τ-b between process return and outcome within groups, the hacking rate
    (failures among the top quartile by process return) and the share of steps whose reward sign
    disagrees with the outcome. Empty (same columns) for a knob without a hackable term."""
    columns = ["eps", "kendall_tau", "hacking_rate", "step_disagreement"]
    if not knob.available:
        return pd.DataFrame(columns=columns)
    rows = []
    for eps in eps_values:
        report = diagnose(step_frame(groups, knob(eps), knob.env))
        rows.append(
            {
                "eps": eps,
                "kendall_tau": report.rank_agreement.mean_tau,
                "hacking_rate": report.hacking.rate,
                "step_disagreement": float(report.disagreement.disagrees.mean()),
            }
        )
    return pd.DataFrame(rows, columns=columns)
