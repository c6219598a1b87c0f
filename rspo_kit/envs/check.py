"""``check_env``: does an environment keep the TextEnv protocol? Like gymnasium's env checker.

Run it on a new env before training on it (``check_env("mygame")``). It plays, per task:

- the **expert** to the end, in two fresh envs: both transcripts must be equal (determinism: a
  rollout group compares trajectories of one task) and the episode must end won within the step cap;
- a **random walk** of ``n_random`` steps mixing admissible actions with arbitrary text (empty, very
  long, control and unicode oddities, near-misses): ``step`` must never raise on it, an empty
  action must be invalid, an invalid step must keep the anchor, an admissible one must be valid;

and checks the types on the way: ``reset`` gives an ``Observation``, ``step`` a ``StepResult`` with
an info dict, ``progress`` a dict of numbers, ``anchor`` hashable, ``admissible_actions()`` a
non-empty list of non-empty strings while the episode runs. Every failure is collected; one
``EnvCheckError`` lists them all, each with the task and step where it showed first.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rspo_kit.envs.base import Observation, StepResult, Task, TextEnv
from rspo_kit.envs.registry import list_tasks, make_env

DEFAULT_TASKS = 3  # the first train tasks of a registered env, when no tasks are given
STEP_CAP = 1000  # the expert's steps at most, for an env with no ``max_steps`` of its own
# text no action should mean: each of these must come back valid=False
EMPTY_ACTIONS = ("", " ", "\n\t ")
# arbitrary text every env must survive (valid or not, but no exception and a StepResult)
ODD_ACTIONS = (
    *EMPTY_ACTIONS,
    "x" * 10_000,
    "\x00",
    "\x1b[2J",
    "\u202egnirts desrever",
    "e\u0301\u0301\u0301",
    "🙂🙃",
    "ＡＢＣ",
    "None",
    "[]",
    "{}",
    "search[]",
    "click[",
    "go to",
    "\\",
    "'\"",
    "\r\n",
)
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 []{}()<>.,;:!?'\"-_/\\\t\n\u00e9\u4e2d\u0301\U0001f600"


@dataclass(frozen=True)
class CheckFailure:
    """One broken rule, where it showed first: ``step`` 0 is ``reset``."""

    check: str
    task: str
    step: int
    message: str
    repeats: int = 0  # how many more times the same check failed on the same task

    def __str__(self) -> str:
        more = f" (and {self.repeats} more steps)" if self.repeats else ""
        return f"[{self.check}] task {self.task}, step {self.step}: {self.message}{more}"


class EnvCheckError(AssertionError):
    """An env broke the protocol; ``failures`` lists every broken check."""

    def __init__(self, env: str, failures: Sequence[CheckFailure]) -> None:
        self.env, self.failures = env, list(failures)
        lines = "\n".join(f"- {f}" for f in self.failures)
        super().__init__(f"{env} fails {len(self.failures)} check(s) of the TextEnv protocol:\n{lines}")


@dataclass
class EnvCheckReport:
    """What ``check_env`` played: tasks, steps, and warnings (legal, but probably not meant)."""

    env: str
    tasks: int
    expert_steps: int
    random_steps: int
    warnings: list[str] = field(default_factory=list)


class _Failures:
    """Failures kept once per (check, task), counting the repeats."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], CheckFailure] = {}

    def add(self, check: str, task: str, step: int, message: str) -> None:
        key = (check, task)
        if key in self.first:
            old = self.first[key]
            self.first[key] = CheckFailure(old.check, old.task, old.step, old.message, old.repeats + 1)
        else:
            self.first[key] = CheckFailure(check, task, step, message)

    def __bool__(self) -> bool:
        return bool(self.first)

    def __iter__(self):
        return iter(self.first.values())


# ------------------------------------------------------------------------------------ type checks
Problem = tuple[str, str]  # (the check broken, what is wrong)


def _state_problems(info: Any, where: str) -> list[Problem]:
    """What is wrong with a state's info: not a dict, progress not numbers, anchor not hashable."""
    if not isinstance(info, Mapping):
        return [("info type", f"{where} is a {type(info).__name__}, not a dict")]
    problems = []
    progress = info.get("progress", {})
    if not isinstance(progress, Mapping):
        problems.append(("progress type", f"{where}: progress is a {type(progress).__name__}, not a dict"))
    elif bad := {k: v for k, v in progress.items() if not isinstance(v, numbers.Real)}:
        problems.append(("progress type", f"{where}: progress has values that are not numbers: {bad!r:.200}"))
    if not isinstance(info.get("anchor", ""), Hashable):
        anchor_type = type(info["anchor"]).__name__
        problems.append(("anchor type", f"{where}: anchor is a {anchor_type}, which is not hashable"))
    return problems


def _observation_problems(obs: Any, where: str) -> list[Problem]:
    if not isinstance(obs, Observation):
        return [("observation type", f"{where} is {obs!r:.120}, not an Observation")]
    problems = [
        ("observation type", f"{where}.{name} is not a str")
        for name in ("text", "instruction")
        if not isinstance(getattr(obs, name), str)
    ]
    if not isinstance(obs.admissible, tuple) or not all(isinstance(a, str) for a in obs.admissible):
        problems.append(
            ("observation type", f"{where}.admissible is {obs.admissible!r:.120}, not a tuple of str")
        )
    return problems


def _result_problems(result: Any) -> list[Problem]:
    """What is wrong with what ``step`` returned; empty for a well-formed ``StepResult``."""
    if not isinstance(result, StepResult):
        return [("step type", f"step returned {result!r:.120}, not a StepResult")]
    problems = _observation_problems(result.obs, "StepResult.obs")
    problems += [
        ("step type", f"StepResult.{name} is {getattr(result, name)!r:.40}, not a bool")
        for name in ("done", "won", "valid")
        if not isinstance(getattr(result, name), bool)
    ]
    if not isinstance(result.score, numbers.Real):
        problems.append(("step type", f"StepResult.score is {result.score!r:.60}, not a number"))
    return problems + _state_problems(result.info, "StepResult.info")


def _admissible_problems(actions: Any) -> list[Problem]:
    if not isinstance(actions, Sequence) or isinstance(actions, str):
        return [("admissible", f"admissible_actions() returned {actions!r:.120}, not a list of str")]
    if not actions:
        return [("admissible", "admissible_actions() is empty while the episode runs")]
    bad = [a for a in actions if not isinstance(a, str) or not a.strip()]
    return (
        [("admissible", f"admissible_actions() holds empty or non-str actions: {bad!r:.120}")] if bad else []
    )


# --------------------------------------------------------------------------------------- episodes
class _Episode:
    """One env playing one task: each call checked, failures filed under the task and step, and a
    transcript of everything the env said (what two fresh envs must agree on)."""

    def __init__(self, env: TextEnv, task: Task, failures: _Failures) -> None:
        self.env, self.task, self.failures = env, task, failures
        self.step_no, self.done, self.won, self.broken = 0, False, False, False
        self.has_info = False  # the env has an ``info`` attribute after reset
        self.anchor: Hashable | None = None  # the env's own anchor of the state now; None: none given
        self.transcript: list[tuple] = []
        self.infos: list[Mapping[str, Any]] = []  # each step's info

    def fail(self, check: str, message: str) -> None:
        self.failures.add(check, self.task.id, self.step_no, message)

    def call(self, check: str, method: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        """``method(*args)``; an exception is a failure of ``check`` and ends the episode."""
        try:
            return True, method(*args)
        except Exception as err:
            shown = f"{args[0]!r:.60}" if args else ""
            self.fail(check, f"{method.__name__}({shown}) raised {type(err).__name__}: {err}"[:300])
            self.broken = True
            return False, None

    def reset(self) -> bool:
        """Start the task again; False if the env cannot (the failure is filed)."""
        self.step_no, self.done, self.won, self.broken = 0, False, False, False
        ok, obs = self.call("reset", self.env.reset, self.task)
        ok, info = self.call("info", _info_of, self.env) if ok else (False, None)
        problems = _observation_problems(obs, "reset's result") if ok else []
        if info is not None:
            problems += _state_problems(info, "env.info after reset")
        self.has_info = info is not None
        for check, problem in problems:
            self.fail(check, problem)
        if not ok or not isinstance(obs, Observation):
            self.broken = True
            return False
        self.anchor = _own_anchor(info)
        self.transcript = [("reset", obs.text, obs.admissible, obs.instruction, repr(info))]
        return self.admissible() is not None

    def admissible(self) -> list[str] | None:
        """``admissible_actions()`` of the running episode, checked; None where it failed."""
        ok, actions = self.call("admissible", self.env.admissible_actions)
        problems = _admissible_problems(actions) if ok else []
        for check, problem in problems:
            self.fail(check, problem)
        return None if not ok or problems else list(actions)

    def step(self, action: str, check: str) -> StepResult | None:
        """``step(action)``, checked; None where it raised or returned something malformed."""
        self.step_no += 1
        ok, result = self.call(check, self.env.step, action)
        problems = _result_problems(result) if ok else []
        for check, problem in problems:
            self.fail(check, problem)
        if not ok or problems:
            self.broken = True
            return None
        obs = result.obs
        said = (obs.text, obs.admissible, result.done, result.won, result.score, result.valid)
        self.transcript.append((action, *said, repr(result.info)))
        self.infos.append(result.info)
        self.done, self.won, self.anchor = result.done, result.won, _own_anchor(result.info)
        return result


def _info_of(env: TextEnv) -> Any:
    """The env's optional ``info`` attribute: progress and anchor of the state now (None: none)."""
    return getattr(env, "info", None)


def _own_anchor(info: Any) -> Hashable | None:
    return info.get("anchor") if isinstance(info, Mapping) else None


def _play_expert(env: TextEnv, task: Task, failures: _Failures, cap: int) -> _Episode:
    """The expert's episode to its end (or ``cap`` steps), checking that it wins."""
    ep = _Episode(env, task, failures)
    if not ep.reset():
        return ep
    while not ep.done and ep.step_no < cap:
        ok, action = ep.call("expert", env.expert_action)
        if not ok:
            return ep
        if not isinstance(action, str) or not action.strip():
            ep.fail("expert", f"expert_action() returned {action!r:.60} while the episode runs")
            return ep
        result = ep.step(action, "step")
        if result is None:
            return ep
        if not result.valid:
            ep.fail("expert", f"the expert's action {action!r:.80} came back valid=False")
        if not result.done and ep.admissible() is None:
            return ep
    if ep.done and not ep.won:
        ep.fail("expert wins", f"the expert's episode ended after {ep.step_no} steps without a win")
    elif not ep.done:
        ep.fail(
            "expert wins",
            f"the expert did not finish within {cap} steps (it loops, or nothing caps the episode)",
        )
    return ep


def _transcript_difference(first: list[tuple], second: list[tuple]) -> tuple[int, str] | None:
    """The first step where two transcripts of one task differ, and how; None if they agree."""
    for step, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return step, f"two fresh envs differ: {a!r:.150} vs {b!r:.150}"
    if len(first) != len(second):
        step = min(len(first), len(second))
        return (
            step,
            f"two fresh envs differ: one episode has {len(first) - 1} steps, the other {len(second) - 1}",
        )
    return None


# ------------------------------------------------------------------------------------ random walk
def _random_text(rng: random.Random) -> str:
    length = rng.choice([rng.randint(1, 40), rng.randint(200, 2000)])
    return "".join(rng.choice(_ALPHABET) for _ in range(length))


def _draw(rng: random.Random, admissible: Sequence[str], k: int) -> tuple[str, str]:
    """The ``k``-th action of a random walk and its kind: every third is one of ``ODD_ACTIONS`` (in
    turn), the others admissible actions, near-misses of them, or random text."""
    if k % 3 == 0:
        action = ODD_ACTIONS[(k // 3) % len(ODD_ACTIONS)]
        return action, "empty" if action in EMPTY_ACTIONS else "odd"
    roll, action = rng.random(), rng.choice(admissible)
    if roll < 0.5:
        return action, "admissible"
    if roll < 0.6:
        return f"  {action.upper()} ", "odd"
    if roll < 0.7:
        return f"{action} {_random_text(rng)}", "odd"
    return _random_text(rng), "odd"


def _random_walk(env: TextEnv, task: Task, failures: _Failures, rng: random.Random, n: int) -> int:
    """``n`` steps of mixed admissible and arbitrary actions (restarting the task when it ends);
    returns the steps taken."""
    ep = _Episode(env, task, failures)
    admissible = ep.admissible() if ep.reset() else None
    for k in range(n):
        if ep.done or ep.broken or admissible is None:
            admissible = ep.admissible() if ep.reset() else None
            if admissible is None:
                return k
        action, kind = _draw(rng, admissible, k)
        before = ep.anchor
        result = ep.step(action, "arbitrary input" if kind != "admissible" else "step")
        if result is None:
            continue
        if kind == "empty" and result.valid:
            ep.fail("invalid input", f"step({action!r}) came back valid=True")
        if kind == "admissible" and not result.valid:
            ep.fail("admissible", f"the admissible action {action!r:.80} came back valid=False")
        if not result.valid and not result.done and None not in (before, ep.anchor) and before != ep.anchor:
            ep.fail(
                "invalid input",
                f"the invalid step({action!r:.60}) changed the anchor {before!r} -> {ep.anchor!r}",
            )
        admissible = None if result.done else ep.admissible()
    return n


# ------------------------------------------------------------------------------------------ entry
def _factory(
    env_or_name: str | TextEnv | Callable[[], TextEnv], env_kwargs: Mapping[str, Any] | None
) -> tuple[str, Callable[[], TextEnv]]:
    """A label for messages and a function giving the env to play: a fresh one per call for a
    registered name or a factory, the same instance for an instance (then ``reset`` must reset)."""
    if isinstance(env_or_name, str):
        return env_or_name, lambda: make_env(env_or_name, **dict(env_kwargs or {}))
    if isinstance(env_or_name, TextEnv) and not isinstance(env_or_name, type):
        return type(env_or_name).__name__, lambda: env_or_name
    if callable(env_or_name):
        return getattr(env_or_name, "__name__", repr(env_or_name)), env_or_name
    raise TypeError(
        f"check_env takes an env name, a TextEnv or a function making one; got {env_or_name!r:.80}"
    )


def _tasks_of(name: str, failures: _Failures) -> list[Task]:
    """The first ``DEFAULT_TASKS`` train tasks of a registered env, checked."""
    try:
        tasks, again = list_tasks(name, "train", DEFAULT_TASKS), list_tasks(name, "train", DEFAULT_TASKS)
    except KeyError:
        raise
    except Exception as err:
        failures.add("tasks", "-", 0, f"list_tasks({name!r}, 'train') raised {type(err).__name__}: {err}")
        return []
    if not tasks:
        failures.add("tasks", "-", 0, f"list_tasks({name!r}, 'train') is empty")
    if tasks != again:
        failures.add("tasks", "-", 0, f"list_tasks({name!r}, 'train') differs between two calls")
    for task in tasks:
        if not isinstance(task, Task) or task.env != name:
            failures.add("tasks", getattr(task, "id", "-"), 0, f"{task!r:.100} is not a Task of env {name!r}")
    return [t for t in tasks if isinstance(t, Task)]


def _warnings(episodes: Sequence[_Episode]) -> list[str]:
    """Legal but probably not meant: no ``info`` after reset, no progress or anchor in any step."""
    infos = [info for ep in episodes for info in ep.infos]
    out = []
    if not all(ep.has_info for ep in episodes):
        out.append(
            "the env has no `info` attribute: each episode's first step has empty progress and the "
            "observation's text as its anchor"
        )
    if infos and not any(info.get("progress") for info in infos):
        out.append("no step reports info['progress']: process rewards have nothing to read")
    if infos and not any("anchor" in info for info in infos):
        out.append("no step reports info['anchor']: GiGPO's step groups fall back to observation texts")
    return out


def check_env(
    env_or_name: str | TextEnv | Callable[[], TextEnv],
    tasks: Sequence[Task] | None = None,
    *,
    seed: int = 0,
    n_random: int = 200,
    max_steps: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> EnvCheckReport:
    """Check that an env keeps the TextEnv protocol (see the module docstring); raises one
    ``EnvCheckError`` listing every failure, else returns what was played.

    ``env_or_name``: a registered name (``tasks`` default to its first three train tasks), a function
    making a fresh env, or an env instance. ``n_random``: random-walk steps per task. ``max_steps``:
    the expert's steps at most (default: the env's ``max_steps``, else 1000).

    >>> check_env("chain-4x2", n_random=30).tasks
    3
    """
    name, make = _factory(env_or_name, env_kwargs)
    failures = _Failures()
    if tasks is None:
        if not isinstance(env_or_name, str):
            raise ValueError("check_env needs tasks for an env that is not given by its registered name")
        tasks = _tasks_of(env_or_name, failures)
    rng = random.Random(seed)
    expert_eps, random_steps = [], 0
    for task in tasks:
        env = make()
        cap = max_steps or (env.max_steps if isinstance(getattr(env, "max_steps", None), int) else STEP_CAP)
        first = _play_expert(env, task, failures, cap)
        second = _play_expert(make(), task, _Failures(), cap)  # its own failures show as a difference
        difference = _transcript_difference(first.transcript, second.transcript)
        if difference is not None and not first.broken:
            failures.add("determinism", task.id, *difference)
        expert_eps.append(first)
        random_steps += _random_walk(make(), task, failures, rng, n_random)
    if failures:
        raise EnvCheckError(name, list(failures))
    steps = sum(ep.step_no for ep in expert_eps)
    return EnvCheckReport(name, len(tasks), steps, random_steps, _warnings(expert_eps))
