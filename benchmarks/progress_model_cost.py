"""What the learned progress model (the paper's dense reward) costs: its forward pass per step, against
the rollout that produced the step, and what that adds to one loop of the paper's RSPO.

Per env: the committed weights (``data/progress_models/<env>/``, their encoder the env's warm start) and
that warm start as the policy. Each repeat rolls out ``--tasks`` x ``--group`` episodes (the explorer's
batch shape) and then scores every step of them in one batched pass (``ProgressModel.step_rewards``,
as ``RewardModel.batch_rewards`` does for B's batch). Reported: medians over repeats of seconds per
step for the rollout and for the scoring, their ratio, and the encoder's tokens per step.

What it adds to a loop: the dense reward scores B's k explorer rollouts and its collection (whose
dense return the loop's metrics report); A's k rollouts and the 2k updates never call it. With the
paper's shapes (k = 3, (1 - α)·B = 14 tasks and a collection of 28, N = 8) B's scored trajectories
are 3·14·8 + 28·8 = 560 of the loop's 896 rollouts; the added share of the loop's rollout time is
then ratio x 560/896 (updates come on top, so the share of the whole loop is smaller still).
Timings on a shared machine move; the ratio moves less. No timed assertion anywhere.

    .venv/bin/python benchmarks/progress_model_cost.py [--envs chain-4x2 webshop alfworld] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from rspo_kit.envs import list_tasks
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout
from rspo_kit.rewards.progress_data import WARM_STARTS
from rspo_kit.rewards.progress_model import ProgressModel, committed_progress_model

SCORED_SHARE = (3 * 14 * 8 + 28 * 8) / (3 * 14 * 8 + 28 * 8 + 3 * 14 * 8)  # B's rollouts in a paper loop


def measure(env: str, tasks: int, group: int, repeats: int) -> dict:
    folder = committed_progress_model(env)
    if folder is None:
        raise SystemExit(f"{env} has no committed progress model under data/progress_models/")
    policy_name, cap = WARM_STARTS[env]
    policy = Policy.load(policy_name, device="cpu")
    model = ProgressModel.load(folder, device="cpu")
    pool = list_tasks(env, split="train", n=tasks * (repeats + 1))
    rows = []
    with BatchRunner(env, n_workers=0, env_kwargs={"max_steps": cap} if cap else {}) as runner:
        rollout(policy, runner, pool[:2], RolloutConfig(group_size=2))  # warm-up
        model.step_rewards([])
        for r in range(repeats):
            batch = pool[(r + 1) * tasks : (r + 2) * tasks]
            start = time.perf_counter()
            trajs = rollout(policy, runner, batch, RolloutConfig(group_size=group), seed=r)
            rollout_s = time.perf_counter() - start
            steps = sum(len(t.steps) for t in trajs)
            start = time.perf_counter()
            model.step_rewards(trajs)
            score_s = time.perf_counter() - start
            tokens = sum(len(model.encoder.step_tokens(s)) for t in trajs for s in t.steps)
            rows.append((steps, rollout_s / steps, score_s / steps, score_s / rollout_s, tokens / steps))
    steps, rollout_per, score_per, ratio, tokens = (statistics.median(col) for col in zip(*rows, strict=True))
    return {
        "episodes": tasks * group,
        "steps_per_batch": steps,
        "encoder_tokens_per_step": round(tokens, 1),
        "rollout_ms_per_step": round(1e3 * rollout_per, 2),
        "progress_model_ms_per_step": round(1e3 * score_per, 2),
        "scoring_over_rollout": round(ratio, 3),
        "added_share_of_rspo_loop_rollouts": round(ratio * SCORED_SHARE, 3),
        "repeats": repeats,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=["chain-4x2", "webshop", "alfworld"])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    report = {"threads": args.threads, "envs": {}}
    for env in args.envs:
        report["envs"][env] = measure(env, args.tasks, args.group, args.repeats)
        print(env, json.dumps(report["envs"][env]), flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
