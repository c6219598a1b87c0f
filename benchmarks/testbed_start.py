"""How the chain testbed's starting policy explores: success and action entropy of the warm start per level.

    python benchmarks/testbed_start.py --updates 0 20 40 80 --levels chain-4x2 chain-6x3 chain-8x4
    python benchmarks/testbed_start.py --updates 1200 --noise 0.5 --levels chain-4x2 chain-4x2-cap10 chain-4x2-cap8
    python benchmarks/testbed_start.py --updates 1200 --noise 0.5 --own-level --levels chain-6x3 chain-8x4

For each SFT update count and level: the ``chain-4k`` protocol's warm start with that many updates (built once and cached under
the run's own key, so runs of that configuration start from the very policy measured here), then on
``--n`` eval tasks the greedy success, the sampled success (one episode per task, temperature 1) and
the mean entropy (nats) of the softmax over the candidates on the sampled episodes' steps, beside
log(number of candidates), the entropy of a uniform choice. ``--updates 0`` is the untrained preset;
``--noise`` sets ``policy.sft_label_noise`` (the share of demonstration labels made random; default 0);
the demonstrations come from ``chain-4k``'s ``policy.sft_env`` (chain-4x2), or with ``--own-level``
from each level itself. ``chain-4k``'s own start is ``--updates 1200 --noise 0.5``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from contextlib import contextmanager

import torch

import rspo_kit.policy.rollout as rollout_module
from rspo_kit.policy.evaluate import evaluate
from rspo_kit.train.presets import preset
from rspo_kit.train.setup import initial_policy


@contextmanager
def entropy_probe():
    """Record each scored step's (entropy over its candidates, number of candidates) while inside."""
    seen: list[tuple[float, int]] = []
    score = rollout_module.candidate_logprobs

    def probe(*args, **kwargs):
        out = score(*args, **kwargs)
        for lp in out:
            logp = lp.float().log_softmax(-1)
            seen.append((float(-(logp.exp() * logp).sum()), len(lp)))
        return out

    rollout_module.candidate_logprobs = probe
    try:
        yield seen
    finally:
        rollout_module.candidate_logprobs = score


def measure(level: str, updates: int, n: int, noise: float = 0.0, own_level: bool = False) -> dict:
    cfg = preset("chain-4k", algo="grpo").override("env.name", level)
    cfg.override("policy.sft_label_noise", noise)
    cfg.policy.warmstart_from = None  # build this recipe here, not install the committed start
    if own_level:
        cfg.policy.sft_env = None
    if updates:
        cfg.override("policy.sft_updates", updates)
    else:
        cfg.override("policy.warmstart", False)
    start = time.perf_counter()
    policy, _ = initial_policy(cfg.validate(), progress_bar=False)
    built = time.perf_counter() - start
    kw = {"n_workers": 0, "progress_bar": False}
    greedy = evaluate(policy, level, "eval", n, greedy=True, **kw)
    with entropy_probe() as seen:
        sampled = evaluate(policy, level, "eval", n, greedy=False, seed=0, **kw)
    return {
        "level": level,
        "sft_updates": updates,
        "label_noise": cfg.policy.sft_label_noise,
        "demonstrations_from": cfg.policy.sft_env or level,
        "greedy": greedy.success,
        "sampled": sampled.success,
        "entropy": sum(e for e, _ in seen) / max(1, len(seen)),
        "uniform_entropy": sum(math.log(k) for _, k in seen) / max(1, len(seen)),
        "steps": len(seen),
        "warm_start_s": round(built, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", nargs="+", default=["chain-4x2", "chain-6x3", "chain-8x4"])
    ap.add_argument("--updates", nargs="+", type=int, default=[40])
    ap.add_argument("--noise", nargs="+", type=float, default=[0.0], help="policy.sft_label_noise")
    ap.add_argument("--own-level", action="store_true", help="demonstrations from each level itself")
    ap.add_argument("--n", type=int, default=120, help="eval tasks")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print("| level | SFT updates | label noise | greedy | sampled | entropy (nats) | uniform | steps |")
    print("|---|---|---|---|---|---|---|---|")
    for updates, noise in [(u, x) for u in args.updates for x in args.noise]:
        for level in args.levels:
            r = measure(level, updates, args.n, noise, args.own_level)
            print(
                f"| {level} | {updates} | {r['label_noise']} | {100 * r['greedy']:.1f}% "
                f"| {100 * r['sampled']:.1f}% "
                f"| {r['entropy']:.2f} | {r['uniform_entropy']:.2f} | {r['steps']} |",
                flush=True,
            )
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
