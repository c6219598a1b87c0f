"""Records to tables: the pure functions behind every widget (no ipywidgets, no plotly here).

Widgets read records — trajectories from the trainer's events, per-turn tables, metrics rows — and
turn them into small DataFrames with these functions; ``_figures`` turns the DataFrames into plotly
figures. Both are tested without a notebook.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rspo_kit.envs import SPLITS, list_tasks, make_env
from rspo_kit.envs.base import reset_info
from rspo_kit.experiments.env_tour import HACK_REWARD, misalignment_knob
from rspo_kit.rewards import outcome_reward
from rspo_kit.rewards.process import ProcessReward, ProcessStep
from rspo_kit.rewards.signals import RewardModel
from rspo_kit.train.update import UpdateBatch, batch_advantages


# ------------------------------------------------------------------------------------- playground
def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "–" if value is None else str(value)


def progress_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What a step changed in the env's progress dict, e.g. ``'visited 0→1'`` (``'no change'`` if none).

    >>> progress_delta({"visited": 0, "held": 0}, {"visited": 1, "held": 0})
    'visited 0→1'
    >>> progress_delta({"visited": 1}, {"visited": 1})
    'no change'
    """
    keys = sorted(set(before) | set(after))
    changes = [
        f"{k} {_fmt(before.get(k))}→{_fmt(after.get(k))}" for k in keys if before.get(k) != after.get(k)
    ]
    return "; ".join(changes) or "no change"


def playground_row(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    action: str,
    valid: bool,
    rewards_by_name: Mapping[str, ProcessReward | float],
    *,
    info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One hand-played step: the action, ``valid``, the progress it changed and each process reward.

    ``rewards_by_name`` maps a component's name to a process reward (called on the step) or to a
    value already computed. Keys ``reward/<name>`` per component and ``reward/total`` (their sum).

    >>> row = playground_row({"digits": 0}, {"digits": 1}, "press 1", True,
    ...                      {"subgoal": lambda b, a, *_: 0.5 * (a["digits"] - b["digits"]), "bonus": 0.1})
    >>> row["progress"], row["reward/subgoal"], row["reward/total"]
    ('digits 0→1', 0.5, 0.6)
    """
    row: dict[str, Any] = {"action": action, "valid": bool(valid), "progress": progress_delta(before, after)}
    total = 0.0
    for name, reward in rewards_by_name.items():
        value = float(reward(before, after, action, valid, info or {})) if callable(reward) else float(reward)
        row[f"reward/{name}"] = value
        total += value
    row["reward/total"] = total
    return row


# ------------------------------------------------------------------------------------ trajectories
Scorer = ProcessReward | RewardModel | None
OUTCOME_FILTERS = ("all", "successful", "failed")
SOURCES = ("actor", "explorer", "replay")

STEP_FRAME_COLUMNS = (
    "traj",  # index of the trajectory in the list given
    "group_id",
    "task_id",
    "source",
    "won",
    "score",
    "outcome",  # R_o: the reward model's outcome return, or 1[won] without one
    "n_steps",
    "step",
    "action",
    "logprob",
    "prob",  # exp(logprob): choice mode, the softmax over candidates; free mode, the whole reply's
    "valid",
    "progress",  # what the step changed (``progress_delta``)
    "process_reward",  # NaN without a process reward
    "process_return_so_far",  # Σ_{k≤t} r_p
    "advantage",  # NaN without advantages
    "anchor",
)


def outcome_of(process: Scorer) -> Callable[[Any], float]:
    """R_o of a trajectory: the reward model's ``outcome_return`` if given one, else 1[won]."""
    if isinstance(process, RewardModel):
        return process.outcome_return
    return lambda traj: 1.0 if traj.won else 0.0


def _process_fn(process: Scorer) -> ProcessReward | None:
    return process.process if isinstance(process, RewardModel) else process


def flat_advantages(advantages: Any, n_steps: int) -> list[float] | None:
    """Advantages flat over all steps, in trajectory order: a list, a tensor, or anything with ``.step``."""
    if advantages is None:
        return None
    values = getattr(advantages, "step", advantages)
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(values) != n_steps:
        raise ValueError(f"advantages has {len(values)} entries but the trajectories have {n_steps} steps")
    return [float(v) for v in values]


def step_frame(trajs: Sequence[Any], *, process: Scorer = None, advantages: Any = None) -> pd.DataFrame:
    """One row per step of every trajectory (``STEP_FRAME_COLUMNS``), in trajectory then step order.

    ``process`` is a process reward callable or a ``RewardModel`` (which also gives R_o); ``advantages``
    is flat per step over ``trajs`` (e.g. ``batch_advantages(batch, cfg)``), as the trainer computes it.
    """
    reward, outcome = _process_fn(process), outcome_of(process)
    adv = flat_advantages(advantages, sum(len(t.steps) for t in trajs))
    rows, k = [], 0
    for i, t in enumerate(trajs):
        r_o, so_far = outcome(t), 0.0
        for j, s in enumerate(t.steps):
            r_p = math.nan
            if reward is not None:
                r_p = float(reward(s.progress_before, s.progress_after, s.action, s.valid, s.info))
                so_far += r_p
            rows.append(
                {
                    "traj": i,
                    "group_id": t.group_id,
                    "task_id": t.task_id,
                    "source": t.source,
                    "won": bool(t.won),
                    "score": float(t.score),
                    "outcome": r_o,
                    "n_steps": len(t.steps),
                    "step": j,
                    "action": s.action,
                    "logprob": float(s.logprob),
                    "prob": math.exp(float(s.logprob)),
                    "valid": bool(s.valid),
                    "progress": progress_delta(s.progress_before, s.progress_after),
                    "process_reward": r_p,
                    "process_return_so_far": so_far if reward is not None else math.nan,
                    "advantage": adv[k] if adv is not None else math.nan,
                    "anchor": s.anchor,
                }
            )
            k += 1
    return pd.DataFrame(rows, columns=list(STEP_FRAME_COLUMNS))


def filter_steps(
    frame: pd.DataFrame,
    *,
    outcome: str = "all",
    sources: Iterable[str] | None = None,
    invalid_only: bool = False,
) -> pd.DataFrame:
    """Keep trajectories by ``outcome`` (``OUTCOME_FILTERS``) and ``sources``; ``invalid_only`` keeps only
    the invalid steps (and so only trajectories that have one).

    >>> f = pd.DataFrame({"traj": [0, 0, 1], "won": [True, True, False], "source": ["actor", "actor", "replay"],
    ...                   "valid": [True, False, True]})
    >>> filter_steps(f, outcome="failed")["traj"].tolist(), filter_steps(f, invalid_only=True)["traj"].tolist()
    ([1], [0])
    """
    if outcome not in OUTCOME_FILTERS:
        raise ValueError(f"outcome filter must be one of {OUTCOME_FILTERS}, got {outcome!r}")
    keep = pd.Series(True, index=frame.index)
    if outcome != "all":
        keep &= frame["won"] == (outcome == "successful")
    if sources is not None:
        keep &= frame["source"].isin(list(sources))
    if invalid_only:
        keep &= ~frame["valid"].astype(bool)
    return frame[keep]


def token_probs(step: Any, tokenizer: Any = None) -> list[tuple[str, float]]:
    """Per generated token: its text and probability (free mode, or a WebShop query in choice mode).

    ``token_logprobs`` cover the last tokens of ``action_ids`` (the whole reply in free mode; the
    query after the ``search[`` candidate in choice mode). Without a tokenizer tokens read ``#id``.
    """
    lps = list(step.token_logprobs or [])
    if not lps:
        return []
    ids = list(step.action_ids)[-len(lps) :]
    texts = [tokenizer.decode([i]) if tokenizer is not None else f"#{i}" for i in ids]
    return [(text, math.exp(lp)) for text, lp in zip(texts, lps, strict=True)]


# ------------------------------------------------------------------------------------ misalignment
@dataclass(frozen=True)
class Episode:
    """One trajectory as the misalignment views need it: the steps a process reward reads, and R_o."""

    group_id: str
    role: str
    task_id: str
    outcome: float
    won: bool
    steps: tuple[ProcessStep, ...]


@functools.lru_cache(maxsize=8)
def _tasks_by_id(env: str) -> dict[str, Any]:
    tasks = {}
    for split in SPLITS:
        try:
            tasks.update({t.id: t for t in list_tasks(env, split=split)})
        except (KeyError, ValueError, FileNotFoundError):
            continue  # an env without this split
    return tasks


@functools.lru_cache(maxsize=8)
def _env_instance(env: str) -> Any:
    return make_env(env)


@functools.lru_cache(maxsize=4096)
def _reset_progress_json(env: str, task_id: str) -> str | None:
    task = _tasks_by_id(env).get(task_id)
    if task is None:
        return None
    instance = _env_instance(env)
    return json.dumps(reset_info(instance, instance.reset(task))["progress"])


def reset_progress(env: str, task_id: str, first_after: Mapping[str, Any]) -> dict[str, Any]:
    """The progress before a trajectory's first step, which per-turn tables do not record.

    Found by resetting the env at the task (cached per task). If the task is unknown, every counter of
    the first step's progress is set to 0 (keys ending in ``_total`` kept), with a warning: right for
    the built-in envs' counters except WebShop's ``pages_visited``, which starts at 1.
    """
    found = _reset_progress_json(env, task_id)
    if found is not None:
        return json.loads(found)
    warnings.warn(
        f"task {task_id!r} is not among {env!r}'s tasks: its first step's progress-before is assumed zero",
        stacklevel=2,
    )
    return {
        k: (v if k.endswith("_total") or not isinstance(v, int | float) else 0)
        for k, v in first_after.items()
    }


def _episodes_from_table(table: pd.DataFrame, env: str) -> list[Episode]:
    # traj_id restarts in every turn table (and the trainer's explorer rows restart it within one), so a
    # trajectory is keyed by iteration, role, group and traj_id together.
    keys = [c for c in ("iteration", "role", "group_id", "traj_id") if c in table.columns]
    out = []
    for _, rows in table.groupby(keys, sort=False):
        rows = rows.sort_values("step", kind="stable")
        afters = [json.loads(p) if isinstance(p, str) else dict(p) for p in rows["progress"]]
        first = rows.iloc[0]
        before = reset_progress(env, str(first["task_id"]), afters[0])
        steps = []
        for after, (_, row) in zip(afters, rows.iterrows(), strict=True):
            steps.append(ProcessStep(before, after, str(row["action"]), bool(row["valid"]), {}))
            before = after
        out.append(
            Episode(
                str(first["group_id"]),
                str(first.get("role", "actor")),
                str(first["task_id"]),
                float(first["outcome"]),
                bool(first["won"]),
                tuple(steps),
            )
        )
    return out


def episodes_of(trajectories: Any, env: str) -> list[Episode]:
    """Trajectories (``Trajectory`` objects), a per-turn table, or Episodes already, as Episodes.

    R_o: a table's ``outcome`` column (the run's outcome config); for trajectories 1[won] via
    ``outcome_reward`` in its default mode.
    """
    if isinstance(trajectories, pd.DataFrame):
        return _episodes_from_table(trajectories, env)
    out = []
    for t in trajectories:
        if isinstance(t, Episode):
            out.append(t)
            continue
        steps = tuple(
            ProcessStep(s.progress_before, s.progress_after, s.action, s.valid, s.info) for s in t.steps
        )
        r_o = outcome_reward(t.won, t.score, env=env)
        out.append(Episode(t.group_id, t.source, t.task_id, r_o, bool(t.won), steps))
    return out


RESCORE_COLUMNS = (
    "group_id",
    "traj_id",
    "role",
    "task_id",
    "step",
    "action",
    "valid",
    "process_reward",
    "outcome",
    "won",
)


def rescore(
    trajectories: Any,
    env: str,
    eps: float,
    *,
    base: str | ProcessReward | None = None,
    hack: str | ProcessReward | None = HACK_REWARD,
) -> pd.DataFrame:
    """Every step's process reward under the env's misalignment knob at ``eps``, as ``diagnose`` reads it.

    The knob is ``misalignment_knob(env, base=base, hack=hack)``: (1 − eps) · base + eps · hack, base
    by default the env's ``subgoal`` (else the generic ``progress``), hack a process reward of the env
    by name or a callable; an env without it has only eps = 0 (a larger eps is a ValueError naming why).
    ``trajectories``: ``Trajectory`` objects, a per-turn table, or ``episodes_of(...)`` (convert once and
    rescore many times: a slider does). One row per step (``RESCORE_COLUMNS``); ``traj_id`` numbers the
    trajectories in order, unique over the whole frame.
    """
    reward = misalignment_knob(env, base=base, hack=hack)(eps)
    rows = []
    for i, ep in enumerate(episodes_of(trajectories, env)):
        for j, s in enumerate(ep.steps):
            rows.append(
                {
                    "group_id": ep.group_id,
                    "traj_id": i,
                    "role": ep.role,
                    "task_id": ep.task_id,
                    "step": j,
                    "action": s.action,
                    "valid": s.valid,
                    "process_reward": float(reward(*s)),
                    "outcome": ep.outcome,
                    "won": ep.won,
                }
            )
    return pd.DataFrame(rows, columns=list(RESCORE_COLUMNS))


def hacked_trajectories(trajectories: pd.DataFrame, threshold: float) -> pd.Series:
    """Per row of ``Diagnostics.trajectories``: top process return (≥ the hacking threshold) yet failed."""
    return (trajectories["process_return"] >= threshold) & ~trajectories["succeeded"].astype(bool)


# ------------------------------------------------------------------------------------ advantages
ADVANTAGE_COLUMNS = (
    "traj",
    "group_id",
    "task_id",
    "source",
    "offpolicy",
    "won",
    "step",
    "action",
    "reward",
    "advantage",
    "anchor",
    "anchor_group",  # GiGPO's step group: the same anchor state within the same task group
    "anchor_group_size",
)


def advantage_frame(batch: UpdateBatch, algo_cfg: Any) -> pd.DataFrame:
    """One row per step of an update batch with the advantage X gives it.

    A batch that an update ran on with this same ``algo_cfg`` (an ``on_update_end`` event's) shows the
    advantages that update used, PPO's over its critic's values included; any other is recomputed with
    ``batch_advantages`` (PPO without a critic: returns-to-go).

    ``anchor_group`` is ``"<group_id> | <anchor>"``: GiGPO compares a step's return only with steps
    taken from the same state in the same task group (Feng et al. 2025, Eq. 6); its size 1 means the
    step advantage A^S is 0 and only the episode advantage A^E remains.
    """
    if batch.advantages is not None and batch.advantages_cfg == algo_cfg:
        adv = batch.advantages.tolist()
    else:
        adv = batch_advantages(batch, algo_cfg).step.tolist()
    rows, k = [], 0
    for i, (t, rewards) in enumerate(zip(batch.trajs, batch.rewards, strict=True)):
        for j, (s, r) in enumerate(zip(t.steps, rewards, strict=True)):
            rows.append(
                {
                    "traj": i,
                    "group_id": t.group_id,
                    "task_id": t.task_id,
                    "source": t.source,
                    "offpolicy": bool(batch.offpolicy[i]),
                    "won": bool(t.won),
                    "step": j,
                    "action": s.action,
                    "reward": float(r),
                    "advantage": float(adv[k]),
                    "anchor": s.anchor,
                    "anchor_group": f"{t.group_id} | {s.anchor}",
                }
            )
            k += 1
    frame = pd.DataFrame(rows, columns=[c for c in ADVANTAGE_COLUMNS if c != "anchor_group_size"])
    frame["anchor_group_size"] = frame.groupby("anchor_group")["step"].transform("size").astype(int)
    return frame


# ------------------------------------------------------------------------------------------- swap
def swap_data(event_or_dict: Any) -> tuple[dict[str, Any], int | None]:
    """The data of an ``on_swap`` Event (or that dict itself) and its iteration (None for a dict)."""
    if isinstance(event_or_dict, Mapping):
        return dict(event_or_dict), None
    return dict(event_or_dict.data), getattr(event_or_dict, "iteration", None)


def _zero_variance(values: Sequence[float]) -> bool:
    # the same rule as rspo_kit.swap.stats.swap_metrics: fewer than two samples or no spread
    return len(values) < 2 or max(values) - min(values) < 1e-12


def _outcome_text(values: Sequence[float]) -> str:
    return " ".join(_fmt(float(v)) for v in values) or "–"


@dataclass(frozen=True)
class SwapTables:
    """One iteration's swap as tables: every trajectory per panel, mixed-group steps, and per task."""

    iteration: int | None
    members: pd.DataFrame  # panel ∈ actor, explorer, buffer, mixed; one row per trajectory
    steps: pd.DataFrame  # ``advantage_frame`` of the mixed batch under outcome rewards
    summary: pd.DataFrame  # one row per task: outcomes before/after, rescued


PANELS = ("actor", "explorer", "buffer", "mixed")


def swap_tables(event_or_dict: Any, algo_cfg: Any, reward_model: RewardModel) -> SwapTables:
    """Everything group_mixing's swap did in one iteration, from its ``on_swap`` event (steps 1 and 3-5
    of that earlier design; a loop of the paper's RSPO is ``LoopInspector``'s).

    ``process_return`` is the label the explorer trained on (Σ r_p), ``outcome`` the label after the
    swap (R_o, all the actor ever sees). Mixed-group advantages come from ``batch_advantages`` on
    outcome rewards, as the actor's update computes them (PPO: without the critic's values).
    """
    data, iteration = swap_data(event_or_dict)
    if "actor" not in data and "record" in data:
        raise ValueError(
            "this on_swap event is a loop of the paper's RSPO (swap.mode rspo or control), which mixes no "
            "groups: LoopInspector draws it (its record); SwapInspector draws group_mixing's swap"
        )
    actor, explorer, buffer = data["actor"], data["explorer"], data.get("buffer", [])
    mixed = data["mixed"]
    offpolicy = list(data.get("offpolicy") or [t.source == "replay" for t in mixed])
    outcome = reward_model.outcome_return

    def process_return(t: Any) -> float:
        return float(sum(reward_model.process_steps(t)))

    batch = UpdateBatch(list(mixed), reward_model.batch_rewards(mixed, "outcome"), offpolicy)
    steps = advantage_frame(batch, algo_cfg)
    mean_adv = steps.groupby("traj")["advantage"].mean()
    replayed_steps = {id(t.steps) for t, off in zip(mixed, offpolicy, strict=True) if off}
    buffered = {id(t) for t in buffer}

    rows = []
    for panel, trajs in (("actor", actor), ("explorer", explorer), ("buffer", buffer), ("mixed", mixed)):
        member_of_task: dict[str, int] = {}
        for i, t in enumerate(trajs):
            m = member_of_task[t.task_id] = member_of_task.get(t.task_id, -1) + 1
            rows.append(
                {
                    "task_id": t.task_id,
                    "panel": panel,
                    "member": m,
                    "source": t.source,
                    "group_id": t.group_id,
                    "won": bool(t.won),
                    "n_steps": len(t.steps),
                    "process_return": process_return(t),
                    "outcome": outcome(t),
                    "advantage": float(mean_adv.get(i, math.nan)) if panel == "mixed" else math.nan,
                    "offpolicy": bool(offpolicy[i]) if panel == "mixed" else False,
                    "admitted": panel == "explorer" and id(t) in buffered,  # entered the replay buffer
                    "replayed": panel == "buffer"
                    and id(t.steps) in replayed_steps,  # drawn into a mixed group
                }
            )
    members = pd.DataFrame(rows)

    summary = []
    for task in dict.fromkeys(t.task_id for t in actor):
        of = members[members["task_id"] == task]
        before = of[of["panel"] == "actor"]["outcome"].tolist()
        after = of[of["panel"] == "mixed"]["outcome"].tolist()
        expl = of[of["panel"] == "explorer"]
        zero_before, zero_after = _zero_variance(before), _zero_variance(after)
        summary.append(
            {
                "task_id": task,
                "actor_outcomes": _outcome_text(before),
                "actor_zero_var": zero_before,
                "explorer_won": f"{int(expl['won'].sum())}/{len(expl)}",
                "admitted": int(expl["admitted"].sum()),
                "in_buffer": int((of["panel"] == "buffer").sum()),
                "replayed": int(of[of["panel"] == "mixed"]["offpolicy"].sum()),
                "mixed_outcomes": _outcome_text(after),
                "mixed_zero_var": zero_after,
                # the actor's own group gave no signal, the replayed trajectories gave it one
                "rescued": zero_before and not zero_after,
            }
        )
    return SwapTables(iteration, members, steps, pd.DataFrame(summary))


# -------------------------------------------------------------------------------------- dashboard
ENV_STEPS = "rollout/cumulative_env_steps"
X_AXES = {"iteration": "iteration", "env steps": ENV_STEPS}

# (panel title, metric columns): what the training dashboard draws, in this order
DASHBOARD_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("success", ("rollout/success", "explorer_rollout/success", "eval/success")),
    ("score", ("rollout/score", "explorer_rollout/score", "eval/score")),
    (
        "rewards (per trajectory)",
        (
            "rollout/outcome_return",
            "rollout/process_return",
            "explorer_rollout/outcome_return",
            "explorer_rollout/process_return",
        ),
    ),
    ("losses", ("loss/policy", "loss/value", "loss/entropy", "explorer/loss/policy")),
    (
        "approx KL and clipping",
        ("loss/approx_kl", "loss/clip_frac", "explorer/loss/approx_kl", "is/clipped_frac"),
    ),
    (
        "swap",
        (
            "swap/rescued_groups",
            "swap/zero_var_groups_before",
            "swap/zero_var_groups_after",
            "swap/replay_success_rate",
            "swap/process_outcome_tau",
        ),
    ),
)


def merge_metrics(rows: dict[int, dict[str, Any]], iteration: int, metrics: Mapping[str, Any]) -> None:
    """Fold an event's metrics into the row of its iteration (events of one iteration arrive apart)."""
    row = rows.setdefault(int(iteration), {"iteration": int(iteration)})
    row.update({k: v for k, v in metrics.items() if v is not None})
    if int(iteration) == 0:
        row.setdefault(ENV_STEPS, 0.0)  # the starting point has spent no env steps


def metric_series(frame: pd.DataFrame, column: str, x: str) -> tuple[list[float], list[float]]:
    """(x, y) of one metric with rows lacking either dropped (eval only runs every few iterations).

    >>> f = pd.DataFrame({"iteration": [0, 1, 2], "eval/success": [0.1, None, 0.3]})
    >>> metric_series(f, "eval/success", "iteration")
    ([0.0, 2.0], [0.1, 0.3])
    """
    if column not in frame or x not in frame:
        return [], []
    pair = frame[[x, column]].apply(pd.to_numeric, errors="coerce").dropna()
    return pair[x].astype(float).tolist(), pair[column].astype(float).tolist()
