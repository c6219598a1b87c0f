"""Train one run from the command line: a preset, an env, an algorithm, a variant and overrides.

``python -m rspo_kit.train --preset tiny --env alfworld --algo gigpo --swap rspo algo.lr=3e-4``:
dotted overrides follow as ``key=value`` pairs: ``algo.lr=3e-4 train.iterations=20``. ``--swap`` takes
a variant (bare ``--swap`` means rspo) and never takes an override as its value.
``--resume RUN_DIR`` continues a killed run from its latest checkpoint, under its own settings: overrides
after it may change only what does not change what the run computes (``train.iterations``,
``train.max_env_steps``, the evaluation, threads; ``rspo_kit.train.resume.RESUMABLE_FIELDS``), and
any other override or run flag is refused by name. ``--warmstart-from POLICY``
installs a saved warm start (e.g. ``data/warm_starts/alfworld_tiny_sft1536_cap30/policy``) into the
cache first, under the key of this configuration, so that it and every later run of it start from
those weights. ``--env-module M`` (repeatable) imports a module of one's own whose ``register_env``
calls define the env that ``--env`` names; the run's config keeps it (``env.module``), so a resumed
run and a notebook reading the run import it too.

Only the config is imported up front: torch, transformers and the trainer load when a run starts, so
``--help`` and a mistyped field answer at once. A bad config field or value is one line on stderr and
exit status 2; a run stopped by a non-finite value is one line naming the iteration and the last good
checkpoint, and exit status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import get_args

from rspo_kit.envs.registry import (
    ENV_MODULE_HELP,
    EnvModuleError,
    UnknownEnvError,
    load_env_module,
    load_env_modules,
    portable_env_module,
    require_env,
)
from rspo_kit.train.config import VARIANTS, Algo, RunConfig
from rspo_kit.train.presets import PRESETS, preset


class _SwapAction(argparse.Action):
    """``--swap [VARIANT]``: a bare ``--swap`` is rspo, and a ``key=value`` after it stays an override."""

    def __call__(self, parser, namespace, value, option_string=None):
        if value is not None and "=" in value:
            namespace.swap_overrides = [*getattr(namespace, "swap_overrides", []), value]
            value = None
        if value is None:
            value = "rspo"
        if value not in VARIANTS:
            parser.error(f"argument --swap: invalid choice: {value!r} (choose from {', '.join(VARIANTS)})")
        namespace.swap = value


def parser() -> argparse.ArgumentParser:
    sections = ", ".join(f.name for f in dataclasses.fields(RunConfig))
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.train",
        description=__doc__.splitlines()[0],
        epilog=f"overrides are section.field=value; sections: {sections}",
    )
    ap.add_argument("--preset", default="tiny", choices=list(PRESETS), help="named preset (default: tiny)")
    ap.add_argument("--env", default=None, help="a registered env (default: the preset's own, else alfworld)")
    ap.add_argument("--env-module", action="append", default=[], metavar="MODULE", help=ENV_MODULE_HELP)
    ap.add_argument("--algo", default="gigpo", choices=get_args(Algo), help="base algorithm (default: gigpo)")
    ap.add_argument(
        "--swap",
        nargs="?",
        action=_SwapAction,
        default="plain",
        metavar="{" + ",".join(VARIANTS) + "}",
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
    return ap


def config(args: argparse.Namespace) -> RunConfig:
    """The run's config: the preset, then every override in order; ValueError names what is wrong."""
    cfg = preset(args.preset, env=args.env, algo=args.algo, swap=args.swap, seed=args.seed)
    modules = [f"env.module={portable_env_module(','.join(args.env_module))}"] if args.env_module else []
    for item in [*modules, *getattr(args, "swap_overrides", []), *args.overrides]:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} must look like section.field=value")
        cfg.override(key, value)
    return cfg.validate()


# the flags that choose a run's configuration: a resumed run keeps its own
_RUN_FLAGS = {"preset": "--preset", "env": "--env", "algo": "--algo", "swap": "--swap", "seed": "--seed"}
_RUN_FLAGS |= {"warmstart_from": "--warmstart-from"}


def resumed_config(args: argparse.Namespace) -> RunConfig:
    """``--resume RUN_DIR``'s config: the stored one with the overrides that a resumed run may take;
    a ValueError names every flag and override it may not."""
    from rspo_kit.train.resume import RESUMABLE_FIELDS, stored_config

    defaults = parser()
    refused = [flag for dest, flag in _RUN_FLAGS.items() if getattr(args, dest) != defaults.get_default(dest)]
    cfg = stored_config(args.resume)
    for item in [*getattr(args, "swap_overrides", []), *args.overrides]:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} must look like section.field=value")
        cfg._field(key)  # an unknown field is named as such
        if key in RESUMABLE_FIELDS:
            cfg.override(key, value)
        else:
            refused.append(key)
    if refused:
        raise ValueError(
            f"{args.resume} resumes under its own settings: {', '.join(refused)} cannot change (they change "
            f"what the run computes); on resume only {', '.join(RESUMABLE_FIELDS)} may"
        )
    return cfg.validate()


def with_env(cfg: RunConfig) -> RunConfig:
    """``cfg`` once its env module is imported and its env is known: an unknown env fails here, in
    one line, before any warm start or rollout (``EnvModuleError`` or ``UnknownEnvError``)."""
    if getattr(cfg.env, "module", None):
        load_env_module(cfg.env.module)
    require_env(cfg.env.name)
    return cfg


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_intermixed_args(argv)
    try:
        load_env_modules(args.env_module)  # before --env names one of their envs
    except EnvModuleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.resume:
        try:
            cfg = with_env(resumed_config(args))
        except (ValueError, EnvModuleError, UnknownEnvError) as err:  # CheckpointError too: no run there
            print(f"error: {err}", file=sys.stderr)
            return 2
        from rspo_kit.train.checkpoint import CheckpointError
        from rspo_kit.train.trainer import TrainingStopped, train

        try:
            result = train(cfg, resume=args.resume)
        except CheckpointError as err:  # no checkpoint there loads
            print(f"error: {err}", file=sys.stderr)
            return 2
        except TrainingStopped as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    else:
        try:
            cfg = with_env(config(args))
        except (ValueError, EnvModuleError, UnknownEnvError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        from rspo_kit.train.setup import install_warmstart
        from rspo_kit.train.trainer import TrainingStopped, train

        if args.warmstart_from:
            try:
                done = install_warmstart(cfg, args.warmstart_from)
            except (FileNotFoundError, ValueError) as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            verb = "installed" if done["installed"] else "already held"
            print(f"warm start {done['weights_sha256'][:12]} {verb} at {done['folder']}", file=sys.stderr)
        try:
            result = train(cfg)
        except TrainingStopped as err:  # a non-finite value: one line, not a traceback
            print(f"error: {err}", file=sys.stderr)
            return 1
    final = {k: v for k, v in result.final.items() if k.startswith(("eval/", "rollout/cumulative"))}
    print(json.dumps({"run_dir": str(result.run_dir), **final}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
