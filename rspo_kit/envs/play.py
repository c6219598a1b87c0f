"""Play whole episodes of a batch of tasks with a simple policy (expert, random) and tabulate success.

This is the environment-level evaluation used by ``make demo`` before any model exists, and the
reference numbers for the envs: the expert must solve every eval task; a random policy must not.

    python -m rspo_kit.envs.play --env alfworld --split eval --n 20 --policy expert
    python -m rspo_kit.envs.play --env-module mygame.py --env mygame --policy random

An unknown env or an env module that does not load is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rspo_kit.envs.base import Observation, Task
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import (
    ENV_MODULE_HELP,
    EnvModuleError,
    UnknownEnvError,
    list_tasks,
    load_env_modules,
)

Policy = Callable[[BatchRunner, dict[int, Observation]], dict[int, str]]


@dataclass
class Episode:
    task_id: str
    kind: str
    won: bool = False
    score: float = 0.0
    steps: int = 0
    invalid_steps: int = 0
    crashed: bool = False
    actions: list[str] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)


def expert_policy(runner: BatchRunner, obs: dict[int, Observation]) -> dict[int, str]:
    return {slot: action or "look" for slot, action in runner.expert(list(obs)).items()}


def random_policy(seed: int = 0) -> Policy:
    """Uniform over the admissible actions (a fixed seed per run)."""
    rng = random.Random(seed)

    def choose(runner: BatchRunner, obs: dict[int, Observation]) -> dict[int, str]:
        return {slot: rng.choice(o.admissible) if o.admissible else "look" for slot, o in obs.items()}

    return choose


def play(
    runner: BatchRunner, tasks: Sequence[Task], policy: Policy, progress_bar: bool = True
) -> list[Episode]:
    """Run one episode per task to the end; returns the episodes in task order."""
    from tqdm.auto import tqdm

    episodes = [Episode(t.id, t.kind) for t in tasks]
    first = runner.reset(tasks)
    live = {i: o for i, o in enumerate(first) if o is not None}
    for i, o in enumerate(first):
        if o is None:
            episodes[i].crashed = True
        else:
            episodes[i].feedback.append(o.text)
    bar = tqdm(total=len(tasks), desc="episodes", disable=not progress_bar, leave=False)
    bar.update(len(tasks) - len(live))
    while live:
        actions = policy(runner, live)
        results = runner.step(actions)
        for slot, res in results.items():
            ep = episodes[slot]
            ep.actions.append(actions[slot])
            ep.feedback.append(res.obs.text)
            ep.steps += 1
            ep.invalid_steps += not res.valid
            if res.done:
                ep.won, ep.score, ep.crashed = res.won, res.score, bool(res.info.get("crashed"))
                del live[slot]
                bar.update(1)
            else:
                live[slot] = res.obs
    bar.close()
    return episodes


def success_table(episodes: Sequence[Episode]) -> list[dict]:
    """One row per task kind plus ``all``: tasks, success rate, mean steps, invalid share."""
    kinds = sorted({e.kind for e in episodes})
    rows = []
    for kind in [*kinds, "all"]:
        eps = [e for e in episodes if kind in ("all", e.kind)]
        steps = sum(e.steps for e in eps)
        rows.append(
            {
                "kind": kind,
                "tasks": len(eps),
                "success": sum(e.won for e in eps) / len(eps),
                "mean_steps": steps / len(eps),
                "invalid_share": sum(e.invalid_steps for e in eps) / max(1, steps),
                "crashed": sum(e.crashed for e in eps),
            }
        )
    return rows


def format_table(rows: Sequence[dict]) -> str:
    lines = [f"{'task type':34s} {'tasks':>5s} {'success':>8s} {'steps':>6s} {'invalid':>8s} {'crashed':>7s}"]
    for r in rows:
        lines.append(
            f"{r['kind']:34s} {r['tasks']:5d} {100 * r['success']:7.1f}% {r['mean_steps']:6.1f}"
            f" {100 * r['invalid_share']:7.1f}% {r['crashed']:7d}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--env-module", action="append", default=[], metavar="MODULE", help=ENV_MODULE_HELP)
    ap.add_argument("--split", default="eval")
    ap.add_argument("--n", type=int, default=20, help="number of tasks (first n of the split)")
    ap.add_argument("--policy", choices=("expert", "random"), default="expert")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument(
        "--engine", default=None, help="ALFWorld engine: native (default, fast) or alfworld (real)"
    )
    ap.add_argument("--out", default="runs", help="directory for the results folder")
    args = ap.parse_args(argv)

    try:
        load_env_modules(args.env_module)
        tasks = list_tasks(args.env, split=args.split, n=args.n)
    except (EnvModuleError, UnknownEnvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    kwargs = {} if args.max_steps is None else {"max_steps": args.max_steps}
    if args.engine:
        kwargs["engine"] = args.engine
    policy = expert_policy if args.policy == "expert" else random_policy(args.seed)
    start = time.perf_counter()
    with BatchRunner(args.env, n_workers=args.workers, env_kwargs=kwargs) as runner:
        episodes = play(runner, tasks, policy)
    seconds = time.perf_counter() - start
    rows = success_table(episodes)

    out = Path(args.out) / f"{time.strftime('%Y%m%d-%H%M%S')}_{args.env}_{args.split}_{args.policy}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "episodes.jsonl").write_text("".join(json.dumps(asdict(e)) + "\n" for e in episodes))
    (out / "summary.json").write_text(
        json.dumps({"args": vars(args), "seconds": seconds, "table": rows}, indent=1)
    )
    engine = f", engine {args.engine}" if args.engine else ""
    title = f"{args.policy} policy on {args.env} {args.split}{engine} ({len(tasks)} tasks, {seconds:.1f}s)"
    print(f"\n{title}\n{format_table(rows)}\n\nresults: {out}/ (episodes.jsonl, summary.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
