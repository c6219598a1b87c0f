"""The WebShop TextEnv: pages and actions of the original text mode over the catalogue and BM25 search.

Any string is a legal action. It is lower-cased and whitespace-collapsed; ``search[<query>]`` works
where the page has a search bar and ``click[<text>]`` on anything the page lists. Everything else is a
no-op with ``valid=False`` (same page, same observation). Only ``Buy Now`` ends an episode with its
reward; after ``max_steps`` steps (15, as in most WebShop agent papers) it ends with reward 0.
"""

from __future__ import annotations

from dataclasses import asdict

from rspo_kit.envs.base import EpisodeOverError, Observation, StepResult, Task, normalize_command
from rspo_kit.envs.webshop.catalogue import Catalogue, load_catalogue
from rspo_kit.envs.webshop.expert import Expert
from rspo_kit.envs.webshop.goals import Goal
from rspo_kit.envs.webshop.pages import SEP, PageView, ShopState, parse_action, render, transition
from rspo_kit.envs.webshop.reward import option_matches, query_coverage, score_purchase
from rspo_kit.envs.webshop.search import SearchEngine, engine_for


class WebShopEnv:
    """The TextEnv for WebShop. ``items_path``/``attrs_path`` select official-format catalogue files."""

    def __init__(
        self, max_steps: int = 15, items_path: str | None = None, attrs_path: str | None = None
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.catalogue: Catalogue = load_catalogue(items_path, attrs_path)
        self.engine: SearchEngine = engine_for(self.catalogue)
        self.task: Task | None = None
        self._done = True
        self.state = ShopState()

    # ------------------------------------------------------------------ protocol

    def reset(self, task: Task) -> Observation:
        goal = task.meta.get("goal")
        self.goal: Goal = (
            goal if isinstance(goal, Goal) else Goal.from_manifest(task.meta["goal"], self.catalogue)
        )
        self.task, self.steps, self._done, self.history = task, 0, False, []
        self.state, self.purchase = ShopState(), None
        self._view = self._render()
        self._items_seen: set[str] = set()  # sticky over the episode (progress)
        self._anchors_seen = {self.state.anchor()}
        self._type_seen = False
        self.visited_items: list[str] = []  # this search session's items; "Back to Search" clears it
        self.expert = Expert(self.goal.instruction)
        self.last_obs = self._observation()
        return self.last_obs

    def step(self, action: str) -> StepResult:
        if self._done:
            raise EpisodeOverError("the episode is over; call reset() before step()")
        command = normalize_command(action)
        parsed = parse_action(command)
        new = transition(self.state, self._view, parsed) if parsed else None
        valid = new is not None
        self.steps += 1
        self.history.append(command)
        reward, won = 0.0, False
        if new is not None:
            if new.kind == "done":
                self.purchase = score_purchase(self.catalogue[new.asin], self.goal, new.selected)
                reward, won = self.purchase.reward, self.purchase.reward == 1.0
            elif new.kind == "search":
                self.visited_items = []
            elif new.kind == "item" and new.asin != self.state.asin:
                self._enter_item(new.asin)
            self.state = new
            self._view = self._render()
            self._anchors_seen.add(new.anchor())
        timeout = self.state.kind != "done" and self.steps >= self.max_steps
        self._done = self.state.kind == "done" or timeout
        self.last_obs = self._observation()
        info = {
            **self.info,
            "steps": self.steps,
            "timeout": timeout,
            "command": command,
            "page": self.state.kind,
            "reward": reward,
            "reward_parts": asdict(self.purchase) if new is not None and new.kind == "done" else None,
        }
        return StepResult(self.last_obs, self._done, won, 100.0 * reward, valid, info)

    def admissible_actions(self) -> list[str]:
        return self._view.admissible() if self.task is not None and not self._done else []

    def expert_action(self) -> str | None:
        """Next action of the expert (see ``expert.py``), or None once the episode is over."""
        if self._done or self.task is None:
            return None
        return self.expert.act(self.state, self._view)

    # ------------------------------------------------------------------ state

    @property
    def done(self) -> bool:
        return self._done

    @property
    def view(self) -> PageView:
        return self._view

    @property
    def info(self) -> dict:
        """Progress and anchor of the current state (also right after reset)."""
        return {"progress": self._progress(), "anchor": self.state.anchor()}

    def _enter_item(self, asin: str) -> None:
        self._items_seen.add(asin)
        if asin not in self.visited_items:
            self.visited_items.append(asin)
        self._type_seen |= self.catalogue[asin].product_type == self.goal.product_type

    def _progress(self) -> dict[str, float | int]:
        """Numbers only; the keys are a contract with rspo_kit.rewards."""
        selected = self.state.selected
        # The reward of the product in view (its sub-pages included), and after Buy Now the reward of
        # the purchase, so that a potential built on it does not fall back to 0 on the final step.
        current = 0.0
        if self.state.kind == "done" and self.purchase is not None:
            current = self.purchase.reward
        elif self.state.kind in ("item", "sub"):
            current = score_purchase(self.catalogue[self.state.asin], self.goal, selected).reward
        return {
            "query_coverage": query_coverage(self.state.query, self.goal),
            "goal_type_viewed": int(self._type_seen),
            "items_viewed": len(self._items_seen),
            "pages_visited": len(self._anchors_seen),
            "current_reward": current,
            "options_matched": option_matches(selected, self.goal.goal_options),
            "options_total": len(self.goal.goal_options),
        }

    def _render(self) -> PageView:
        results = self.engine.search(self.state.query) if self.state.kind == "results" else ()
        return render(self.state, self.goal.instruction, self.catalogue, results, self._done_text())

    def _done_text(self) -> str:
        if self.purchase is None:
            return ""
        return SEP.join(["Your score (min 0.0, max 1.0)", f"{self.purchase.reward:.3f}"])

    def _observation(self) -> Observation:
        return Observation(self._view.text, tuple(self.admissible_actions()), self.goal.instruction)

    def close(self) -> None:
        """Nothing to release (the catalogue and the index are shared per process)."""
