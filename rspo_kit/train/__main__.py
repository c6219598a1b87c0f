"""Batch entry point: ``python -m rspo_kit.train --preset tiny --env alfworld --algo gigpo --swap``.

Dotted overrides follow as ``key=value`` pairs: ``algo.lr=3e-4 train.iterations=20``.
``--resume RUN_DIR`` continues a killed run from its latest checkpoint. ``--warmstart-from POLICY``
installs a saved warm start (e.g. ``results/warm_starts/alfworld_D/policy``) into the cache first, under
the key of this configuration, so that it and every later run of it start from those weights.
"""

from __future__ import annotations

import argparse
import json
import sys

from rspo_kit.train.config import PRESETS, VARIANTS, preset
from rspo_kit.train.setup import install_warmstart
from rspo_kit.train.trainer import train


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rspo_kit.train", description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--algo", default="gigpo", choices=("grpo", "ppo", "gigpo"))
    ap.add_argument(
        "--swap",
        nargs="?",
        const="rspo",
        default="plain",
        choices=sorted(VARIANTS),
        help="the variant: rspo (bare --swap), control, plain (default), process, mix",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", default=None, help="continue this run directory from its latest checkpoint")
    ap.add_argument(
        "--warmstart-from",
        default=None,
        metavar="POLICY",
        help="install this saved warm start into the cache under this configuration's key first "
        "(an error if the cache holds other weights there)",
    )
    ap.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. algo.lr=3e-4")
    args = ap.parse_args(argv)

    if args.resume:
        result = train(resume=args.resume)
    else:
        cfg = preset(args.preset, env=args.env, algo=args.algo, swap=args.swap, seed=args.seed)
        for item in args.overrides:
            key, sep, value = item.partition("=")
            if not sep:
                ap.error(f"override {item!r} must look like section.field=value")
            cfg.override(key, value)
        cfg.validate()
        if args.warmstart_from:
            try:
                done = install_warmstart(cfg, args.warmstart_from)
            except (FileNotFoundError, ValueError) as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            verb = "installed" if done["installed"] else "already held"
            print(f"warm start {done['weights_sha256'][:12]} {verb} at {done['folder']}", file=sys.stderr)
        result = train(cfg)
    final = {k: v for k, v in result.final.items() if k.startswith(("eval/", "rollout/cumulative"))}
    print(json.dumps({"run_dir": str(result.run_dir), **final}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
