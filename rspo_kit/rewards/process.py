"""Process rewards r_p(s_t, a_t): the signature they share, their registry, and how to compose them.

A process reward is any callable ``(progress_before, progress_after, action, valid, info) -> float``
(``ProcessReward``): the env's progress dict before and after the step, the action string, whether
the env understood it, and the step's ``info``. Built-ins are registered per env and name
(``rspo_kit.rewards.alfworld``, ``rspo_kit.rewards.webshop``); ``combine``, ``weighted`` and
``misalign`` return callables of the same signature, so a trainer never knows which one it holds.

The env is named when a reward is built (``process_reward("subgoal", env="alfworld")``), not guessed
from the keys of the progress dict: a wrong guess would silently read zeros, a wrong name fails loudly.

Any env whose ``info["progress"]`` holds numbers also has the generic ``progress`` reward
(``ProgressPotential``): the change of their sum, or of one declared key (``"progress:digits"``).
An env's own registration under the same name wins.

A process reward that must read whole trajectories (the learned progress model, which encodes each
step's prompt and action with an LM) is a ``TrajectoryReward``: ``step_rewards(trajs)``, batched,
registered with ``register_trajectory_reward``. ``RewardModel.build`` finds it by name; where a
step-level callable is asked for, ``process_reward`` hands back ``NeedsTrajectory``, which says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar


class ProcessReward(Protocol):
    def __call__(
        self,
        progress_before: Mapping[str, float],
        progress_after: Mapping[str, float],
        action: str,
        valid: bool,
        info: Mapping[str, Any],
        /,
    ) -> float: ...


RewardT = TypeVar("RewardT", bound=Callable[..., float])

# env -> name -> reward. A later registration under the same names replaces the earlier one, so that
# re-running a notebook cell that defines a reward does not fail.
PROCESS_REWARDS: dict[str, dict[str, ProcessReward]] = {}


def register_process_reward(env: str, name: str) -> Callable[[RewardT], RewardT]:
    """Decorator: make ``fn`` available as ``process_reward(name, env=env)`` and in ``combine``."""

    def register(fn: RewardT) -> RewardT:
        PROCESS_REWARDS.setdefault(env, {})[name] = fn
        return fn

    return register


class ProcessStep(NamedTuple):
    """One step as a process reward sees it; a plain 5-tuple in the same order works too."""

    progress_before: Mapping[str, float]
    progress_after: Mapping[str, float]
    action: str
    valid: bool
    info: Mapping[str, Any]


class StepScored:
    """A process reward as an object: ``score`` reads one ``ProcessStep``, and calling it with the five
    arguments every process reward takes scores the step they make."""

    def score(self, step: ProcessStep) -> float:
        raise NotImplementedError

    def __call__(self, *step: Any) -> float:
        return self.score(ProcessStep(*step))  # the five arguments of ``ProcessReward``, in order


class PotentialReward(StepScored):
    """r_p = γ · Φ(progress_after) − Φ(progress_before) for a potential Φ of the progress dict.

    Potential-based shaping (Ng et al., 1999): with γ = 1 an episode's return telescopes to
    Φ(last) − Φ(first), so each bit of progress counts once, undoing pays back what doing earned, and
    going round in circles earns nothing; the reward needs no memory of the episode. Subclasses say what
    Φ is (``potential``); one that computes both potentials at once overrides ``potentials``.
    """

    gamma: float = 1.0

    def potential(self, progress: Mapping[str, Any]) -> float:
        raise NotImplementedError

    def potentials(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[float, float]:
        return self.potential(before), self.potential(after)

    def score(self, step: ProcessStep) -> float:
        phi_before, phi_after = self.potentials(step.progress_before, step.progress_after)
        return self.gamma * phi_after - phi_before


@dataclass(frozen=True)
class Potential(PotentialReward):
    """The potential-based process reward of ``phi`` (a function of the progress dict): what
    ``register_potential`` registers. A frozen dataclass of a module-level function, so that it
    pickles into worker processes and prints which Φ it is.

    >>> def rooms(progress):
    ...     return progress["rooms"] / 4
    >>> Potential(rooms)({"rooms": 1}, {"rooms": 2}, "open door", True, {})
    0.25
    """

    phi: Callable[[Mapping[str, Any]], float]

    def potential(self, progress: Mapping[str, Any]) -> float:
        return float(self.phi(progress))

    @property
    def __name__(self) -> str:  # the name of its Φ, as a plain function's reward is named
        return self.phi.__name__

    def __repr__(self) -> str:
        return f"Potential({self.phi.__name__})"


@dataclass(frozen=True)
class StepReward(StepScored):
    """A process reward written as a function of one ``ProcessStep``: what ``register_step_reward``
    registers, called with the five arguments every process reward takes."""

    fn: Callable[[ProcessStep], float]

    def score(self, step: ProcessStep) -> float:
        return float(self.fn(step))

    @property
    def __name__(self) -> str:
        return self.fn.__name__

    def __repr__(self) -> str:
        return f"StepReward({self.fn.__name__})"


PhiT = TypeVar("PhiT", bound=Callable[[Mapping[str, Any]], float])
StepFnT = TypeVar("StepFnT", bound=Callable[[ProcessStep], float])


def register_potential(env: str, name: str) -> Callable[[PhiT], PhiT]:
    """Decorator on a potential Φ(progress) -> float: register ``Potential(Φ)``, the shaped reward
    Φ(after) − Φ(before), as ``process_reward(name, env=env)``; the function itself stays Φ."""

    def register(phi: PhiT) -> PhiT:
        register_process_reward(env, name)(Potential(phi))
        return phi

    return register


def register_step_reward(env: str, name: str) -> Callable[[StepFnT], StepFnT]:
    """Decorator on a function of one ``ProcessStep``: register it (as ``StepReward``) as
    ``process_reward(name, env=env)``; the function itself stays as written."""

    def register(fn: StepFnT) -> StepFnT:
        register_process_reward(env, name)(StepReward(fn))
        return fn

    return register


@dataclass(frozen=True)
class ProgressPotential(PotentialReward):
    """Φ = the sum of the progress dict's numbers (or the value of ``key`` alone): the generic process
    reward of any env that counts its progress, potential-based (``PotentialReward``).

    Values that are not finite numbers are skipped by the sum; a declared ``key`` missing from a step's
    progress is an error naming the keys there, never a 0.

    >>> reward = ProgressPotential()
    >>> reward({"digits": 1, "doors": 0}, {"digits": 2, "doors": 1, "room": "hall"}, "open door", True, {})
    2.0
    >>> ProgressPotential("digits")({"digits": 1, "doors": 0}, {"digits": 2, "doors": 1}, "x", True, {})
    1.0
    """

    key: str | None = None

    def potential(self, progress: Mapping[str, Any]) -> float:
        if self.key is None:
            return sum(float(v) for v in progress.values() if _is_number(v))
        if self.key not in progress:
            raise KeyError(f"progress key {self.key!r} is not in info['progress'] (keys: {sorted(progress)})")
        return float(progress[self.key])

    def check(self, progress: Mapping[str, Any]) -> None:
        """A ValueError where ``progress`` (an env's ``info["progress"]``) gives this reward nothing to
        read: the declared key missing or not a number, or no number at all; it would pay 0 forever.

        >>> ProgressPotential().check({"room": "hall"})
        Traceback (most recent call last):
        ValueError: the generic 'progress' reward reads the numbers of info['progress'], and {'room': 'hall'} holds none
        """
        if self.key is not None and not _is_number(progress.get(self.key)):
            raise ValueError(
                f"the generic 'progress:{self.key}' reward reads info['progress'][{self.key!r}], "
                f"which is not a number in {dict(progress)!r}"
            )
        if self.key is None and not any(_is_number(v) for v in progress.values()):
            raise ValueError(
                f"the generic 'progress' reward reads the numbers of info['progress'], and {dict(progress)!r} "
                "holds none"
            )


class TrajectoryReward(Protocol):
    """A process reward over whole trajectories: r_p of every step of each, batched over all of them."""

    def step_rewards(self, trajs: Sequence[Any], /) -> list[list[float]]: ...


# env -> name -> trajectory reward; a later registration under the same names replaces the earlier one
TRAJECTORY_REWARDS: dict[str, dict[str, TrajectoryReward]] = {}


def register_trajectory_reward(env: str, name: str, reward: TrajectoryReward) -> TrajectoryReward:
    """Make ``reward`` the process reward ``name`` of ``env`` (``RewardModel.build(env, process=name)``)."""
    if not callable(getattr(reward, "step_rewards", None)):
        raise TypeError(f"a trajectory reward needs a step_rewards(trajs) method, got {reward!r}")
    TRAJECTORY_REWARDS.setdefault(env, {})[name] = reward
    return reward


def trajectory_reward(name: str, *, env: str) -> TrajectoryReward | None:
    """The trajectory reward registered as ``name`` for ``env``, else None."""
    return TRAJECTORY_REWARDS.get(env, {}).get(name)


@dataclass(frozen=True)
class NeedsTrajectory:
    """Stands where a step-level ``ProcessReward`` is asked for a trajectory reward: calling it is a
    TypeError that says how to score with it instead."""

    name: str
    env: str

    def __call__(self, *step: Any) -> float:
        raise TypeError(
            f"process reward {self.name!r} of {self.env!r} reads whole trajectories (each step's prompt and "
            "action), not (progress_before, progress_after, action, valid, info): score with "
            "RewardModel.process_steps(traj) or RewardModel.batch_rewards(trajs, 'process')"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


GENERIC_REWARD = "progress"  # ``"progress"`` or ``"progress:<key>"``: ProgressPotential, for any env


def _generic(name: str) -> ProgressPotential | None:
    """``ProgressPotential`` for ``"progress"`` / ``"progress:<key>"``, None for any other name."""
    base, colon, key = name.partition(":")
    if base != GENERIC_REWARD or (colon and not key):
        return None
    return ProgressPotential(key or None)


def has_process_reward(name: str, *, env: str) -> bool:
    """Whether ``process_reward(name, env=env)`` finds a reward (the env's own, or the generic one)."""
    try:
        process_reward(name, env=env)
    except KeyError:
        return False
    return True


def process_reward(name: str, *, env: str) -> ProcessReward:
    """The process reward registered as ``name`` for ``env``, else the generic ``progress`` reward for
    ``"progress"`` or ``"progress:<key>"``; a KeyError that names what the env has and how to add one.

    >>> process_reward("subgoal", env="alfworld")
    Potential(alfworld_subgoal)
    >>> process_reward("progress:digits", env="any-env")
    ProgressPotential(key='digits')
    """
    if env not in PROCESS_REWARDS:
        from rspo_kit.envs.registry import ensure_registered

        ensure_registered(env)  # a level made on first use registers its rewards as it registers
    by_name = PROCESS_REWARDS.get(env, {})
    if name in by_name:
        return by_name[name]
    if trajectory_reward(name, env=env) is not None:
        return NeedsTrajectory(name, env)
    generic = _generic(name)
    if generic is not None:
        return generic
    has = (
        f"it has {sorted(by_name)}"
        if by_name
        else (f"it has none (envs with process rewards: {sorted(PROCESS_REWARDS)})")
    )
    raise KeyError(
        f"no process reward {name!r} for env {env!r}; {has}. Register one with "
        f"@register_process_reward({env!r}, {name!r}) on a function (progress_before, progress_after, "
        f"action, valid, info) -> float, or use the generic {GENERIC_REWARD!r} (the change of the sum "
        f"of info['progress'] numbers; '{GENERIC_REWARD}:<key>' for one key)"
        + (
            "; the learned progress model registers with "
            "rspo_kit.rewards.progress_model.use_progress_model(ProgressModel.load(folder), env)"
            if name == "progress_model"
            else ""
        )
    )


@dataclass(frozen=True)
class WeightedReward(StepScored):
    """Σ_i w_i · r_i(step): a process reward built from weighted process rewards.

    A frozen dataclass rather than a closure so that it pickles into worker processes and prints
    its recipe.
    """

    terms: tuple[tuple[float, ProcessReward], ...]

    def score(self, step: ProcessStep) -> float:
        return sum((weight * reward(*step) for weight, reward in self.terms), 0.0)


def weighted(terms: Iterable[tuple[float, ProcessReward]]) -> WeightedReward:
    """Compose callables: ``weighted([(1.0, r1), (0.5, r2)])(*step) == r1(*step) + 0.5 * r2(*step)``."""
    terms = tuple((float(w), r) for w, r in terms)
    for weight, reward in terms:
        if not math.isfinite(weight):
            raise ValueError(f"weights must be finite, got {weight!r} for {reward!r}")
        if not callable(reward):
            raise TypeError(f"a process reward must be callable, got {reward!r}")
    return WeightedReward(terms)


def combine(weights: Mapping[str, float], *, env: str) -> WeightedReward:
    """Compose registered rewards by name, e.g. ``combine({"subgoal": 1.0, "heuristic": 0.5}, env="alfworld")``.

    >>> reward = combine({"subgoal": 1.0, "heuristic": 0.5}, env="alfworld")
    >>> before = {"subgoals_done": 0, "subgoals_total": 4, "visited": 1, "opened": 0, "holding_any": 0}
    >>> after = {**before, "subgoals_done": 1, "visited": 2}   # walked somewhere new and saw the target
    >>> reward(before, after, "go to countertop 1", True, {})   # 1.0 * 0.25 + 0.5 * 0.1
    0.3
    """
    return weighted((weight, process_reward(name, env=env)) for name, weight in weights.items())


def misalign(
    eps: float,
    *,
    env: str,
    base: str | ProcessReward = "subgoal",
    hack: str | ProcessReward = "hack",
) -> WeightedReward:
    """(1 − eps) · base + eps · hack: a knob from aligned (eps = 0, exactly ``base``) to hackable (eps = 1).

    ``hack`` is a reward for behaviour that never leads to success, by default the env's registered
    ``"hack"``: it pays, per event, what one subgoal pays (ALFWorld: picking up or putting down
    anything, walking back to a known place; WebShop: navigation clicks; the chain testbed: pulling
    the lever). So eps reads as the share of the reward a policy can collect by looping instead of
    solving the task. A user's env names its own hackable term (``hack="wander"``) or passes one.

    >>> reward = misalign(0.5, env="alfworld")
    >>> state = {"subgoals_done": 2, "subgoals_total": 4, "visited": 3, "holding_any": 1}
    >>> reward(state, {**state, "subgoals_done": 1, "holding_any": 0}, "move apple 1 to sinkbasin 1", True, {})
    0.0
    """
    if not (0.0 <= eps <= 1.0):
        raise ValueError(f"eps must lie in [0, 1], got {eps!r}")
    base_reward = process_reward(base, env=env) if isinstance(base, str) else base
    hack_reward = process_reward(hack, env=env) if isinstance(hack, str) else hack
    return weighted([(1.0 - eps, base_reward), (eps, hack_reward)])


def episode_steps(
    initial_progress: Mapping[str, float], actions: Sequence[str], results: Sequence[Any]
) -> list[ProcessStep]:
    """Pair each ``StepResult`` with the progress before it (the reset's, then the previous step's).

    ``results`` are ``StepResult``s (anything with ``.valid`` and ``.info["progress"]``).
    """
    if len(actions) != len(results):
        raise ValueError(f"{len(actions)} actions but {len(results)} results")
    steps, before = [], initial_progress
    for action, result in zip(actions, results, strict=True):
        after = result.info["progress"]
        steps.append(ProcessStep(before, after, action, result.valid, result.info))
        before = after
    return steps


def step_rewards(reward: ProcessReward, steps: Iterable[Sequence[Any]]) -> list[float]:
    """r_p of every step of one trajectory, in order."""
    return [float(reward(*step)) for step in steps]


def process_return(reward: ProcessReward, steps: Iterable[Sequence[Any]], *, gamma: float = 1.0) -> float:
    """Σ_t γ^t · r_p(step_t) over one trajectory (γ = 1: the plain sum).

    >>> reward = process_reward("subgoal", env="alfworld")
    >>> p = [{"subgoals_done": d, "subgoals_total": 4} for d in (0, 1, 2)]
    >>> steps = [(p[0], p[1], "go to countertop 1", True, {}), (p[1], p[2], "take apple 1 from countertop 1", True, {})]
    >>> process_return(reward, steps), process_return(reward, steps, gamma=0.5)
    (0.5, 0.375)
    """
    if not (0.0 <= gamma <= 1.0):
        raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
    total, discount = 0.0, 1.0
    for r in step_rewards(reward, steps):
        total += discount * r
        discount *= gamma
    return total
