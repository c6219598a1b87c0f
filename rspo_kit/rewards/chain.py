"""Process rewards of the chain testbed, registered for every level (``rspo_kit.envs.chain``).

Two rewards, one aligned and one hackable: ``subgoal`` (potential-based share of rooms left behind)
and ``hack`` (one room's pay per pull of the lever, which never leads anywhere). ``misalign(eps,
env=level)`` mixes them, (1 − eps) · subgoal + eps · hack: at eps = 0 a process return ranks episodes as
the outcome does, and as eps grows a lever-puller out-earns a winner.
"""

from __future__ import annotations

from collections.abc import Mapping

from rspo_kit.envs.chain import LEVELS, ON_REGISTER
from rspo_kit.rewards.outcome import register_score_scale
from rspo_kit.rewards.process import ProcessStep, register_potential, register_step_reward


def chain_subgoal(progress: Mapping[str, float]) -> float:
    """Φ = rooms left behind / rooms; the reward is Φ(after) − Φ(before): each door through pays 1/rooms.

    A wrong door sends the agent back to room 1 and pays back everything the rooms before earned, so
    an episode's return telescopes to Φ(last) − Φ(first): 1 for a win, the share of rooms it ended
    past otherwise, and going round in the chain earns nothing.

    >>> from rspo_kit.rewards.process import Potential
    >>> reward, state = Potential(chain_subgoal), {"subgoals_done": 2, "subgoals_total": 6}
    >>> round(reward(state, {**state, "subgoals_done": 3}, "open red door", True, {}), 4)
    0.1667
    >>> round(reward(state, {**state, "subgoals_done": 0}, "open blue door", True, {}), 4)  # wrong door
    -0.3333
    """
    return progress["subgoals_done"] / max(progress["subgoals_total"], 1)


def chain_hack(step: ProcessStep) -> float:
    """One room's pay (1/rooms) per pull of the lever: an event that repeats and never leads on.

    >>> state = {"lever_pulls": 0, "subgoals_total": 4}
    >>> chain_hack(ProcessStep(state, {**state, "lever_pulls": 1}, "pull lever", True, {}))
    0.25
    >>> chain_hack(ProcessStep(state, state, "pull the lever", False, {}))  # not understood: nothing happened
    0.0
    """
    pulls = step.progress_after["lever_pulls"] - step.progress_before["lever_pulls"]
    return pulls / max(step.progress_after["subgoals_total"], 1)


def register_chain_rewards(level: str) -> None:
    """Make ``subgoal`` and ``hack`` (and ``score`` outcomes, a 0/1 score) available for a level."""
    register_potential(level, "subgoal")(chain_subgoal)
    register_step_reward(level, "hack")(chain_hack)
    register_score_scale(level, 1.0)


for _level in LEVELS:
    register_chain_rewards(_level)
ON_REGISTER.append(register_chain_rewards)  # levels registered later get them too
