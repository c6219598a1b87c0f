"""What the env test files check the same way on different envs and engines: one step's contract, a
split played by the expert."""

from __future__ import annotations

from rspo_kit.envs import StepResult, list_tasks
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.play import expert_policy, play, success_table


def step_checked(env, action: str) -> StepResult:
    """``env.step(action)``, checking what any step keeps on an env that answers "Nothing happens." to
    an action it does not understand (ALFWorld, the chain): one step is counted, the observation is
    text, and an invalid action leaves the anchor where it was."""
    before, steps = env.info, env.steps
    res = env.step(action)
    assert env.steps == steps + 1 and isinstance(res.obs.text, str)
    if not res.valid:
        assert res.obs.text == "Nothing happens." and res.info["anchor"] == before["anchor"]
    return res


def expert_play(env_name: str, split: str, n_workers: int, **env_kwargs) -> tuple[list, dict[str, dict]]:
    """The expert's episodes on every task of ``split`` through the batch runner, and their success
    table keyed by task kind (``"all"`` for the whole split)."""
    tasks = list_tasks(env_name, split=split)
    with BatchRunner(env_name, n_workers=n_workers, env_kwargs=env_kwargs) as runner:
        episodes = play(runner, tasks, expert_policy, progress_bar=False)
    return episodes, {row["kind"]: row for row in success_table(episodes)}
