"""A sweep's results as a Markdown table, e.g. for the README: ``python -m rspo_kit.experiments.report OUT``.

One row per group (the grid values without the seed), one column per metric: every seed's value in
seed order, then the mean and its 95% t-interval over the seeds, e.g. ``20.0 / 15.8 / 25.0 → 20.3
[8.9, 31.7]``. Success rates, scores, shares and rates are shown in percent (WebShop's scores are
points, 0-100, and shown as such). Cells that have not finished are left out and listed under the
table with where their runs stand, so a sweep still running can be reported as it stands.
``--statistics`` adds a second table of the same shape, read from each finished cell's
``metrics.jsonl``: how the run spent its budget and what the swap did (``run_statistics``) — what to
look at first when a variant loses — and a third of the same for the cells still running, as far as
they got (to tune on, e.g. the explorer's edge over the actor).
``--paired variant=rspo,plain`` adds the differences between two values of a grid key seed by seed
(cells that share a seed share their warm start and task draws, so the paired interval is the one
to read when two variants are close), e.g. RSPO − plain and RSPO − control; cells told apart by
several keys pair the same way (``--paired 'variant=control&swap.replay_ratio=0.0,variant=plain'``:
an ablation in a second folder − plain). Keys are config fields as ``load_sweep`` names them
(``config_key``: ``VARIANT=rspo,plain`` reads as ``variant=rspo,plain``). Where the cells
recorded their final evaluations' episodes (``final_episodes.parquet``), it adds the same
differences task by task (``task_paired_table``): each task's difference averaged over the seeds,
and a 95% interval over the tasks. That interval is about these trained runs on these tasks; the
seed-by-seed one is the one about the algorithm. ``--reference RUN_DIR`` compares every group with
one run the same way (``reference_table``), e.g. with the warm start (``sweep --reference-run``
evaluates it into ``OUT/warmstart_run``): did training move the runs past where they started?
Several folders are read as one sweep (``report OUT OUT2``): seeds or a new knob added later, in a
second folder with a later checkout (``pooled_sweep``); ``--curves PAGE`` draws their learning curves
together (``curves_page``). ``--by-kind`` splits every final evaluation in two by task kind: the kinds
the warm start's demonstrations left out (``policy.sft_exclude_kinds``, or the kinds named) and the
kinds they showed (``split_by_kind``): a table of each half's success seed by seed (``kind_table``),
the task-by-task tables per half, and, where the cells kept their turn tables (a live sweep folder), the
training rollouts' success per role and half (``rollout_kind_table``). The metrics
``repeats_third_share``, ``repeats_two_thirds_share`` and ``repeats_end_share`` are read from each
run's training log (``state_repeats``: the paper's Table 6) and pair by seed like the others.
``--lift-off METRIC THRESHOLD`` with ``--paired`` counts, for each pair, the seeds in which each side
ended above the threshold and tests the two rates exactly (``lift_off``): where runs either stall or
take off, a mean over seeds describes neither.

This module puts the report together and is its command line; its parts are modules of
``rspo_kit.experiments``: the tables and their units (``tables``), the paired differences
(``pairing``), several folders read as one sweep (``pooling``), the runs' statistics
(``training_statistics``), the state repeats of Table 6 (``state_repeats``), the lift-off counts
(``lift_off``) and the split by task kind (``by_kind``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.aggregation import summarize
from rspo_kit.experiments.by_kind import (
    EXCLUDE_FIELD,
    kind_metric,
    kind_names,
    kind_table,
    rollout_kind_table,
    rollout_markdown,
    split_by_kind,
    sweep_left_out_kinds,
)
from rspo_kit.experiments.cells import cell_progress
from rspo_kit.experiments.figures import CURVE_AXES, CURVE_X, curve_figure, write_figure_html
from rspo_kit.experiments.lift_off import lift_off_table
from rspo_kit.experiments.pairing import (
    Pair,
    pair_keys,
    paired_table,
    parse_pair,
    reference_table,
    task_paired_table,
)
from rspo_kit.experiments.pooling import cell_episodes, pooled_sweep, varying_keys
from rspo_kit.experiments.state_repeats import POINTS as REPEAT_POINTS
from rspo_kit.experiments.state_repeats import sweep_state_repeats
from rspo_kit.experiments.tables import cells_frame, markdown_table, value_text
from rspo_kit.experiments.training_statistics import running_statistics, statistics_columns, sweep_statistics
from rspo_kit.records import load_episodes, read_start

# what to report when no metrics are named: the protocols' test splits, else the last evaluation
DEFAULT_METRICS = ("final_eval_success", "final_eval_unseen_success")
FALLBACK_METRICS = ("final_success",)


def starting_policies(
    folders: Mapping[str, Path], cells: Sequence[str], reference: str | Path | None = None
) -> str:
    """One line naming the policies that ``cells`` (and the reference run) started from, by the first
    12 hex digits of their weights' digest (``start.json``); "" when none of them recorded one (runs
    that kept no ``start.json``). Cells that started from different policies pair across warm starts: their
    differences compare the warm starts as well as the variants, and the line says so."""
    by_digest: dict[str, list[str]] = {}
    for name in cells:
        start = read_start(folders[name]) or {}
        by_digest.setdefault(start.get("weights_sha256", "")[:12], []).append(name)
    ref = (read_start(reference) or {}).get("weights_sha256", "")[:12] if reference is not None else ""
    if set(by_digest) == {""} and not ref:
        return ""
    parts = [
        f"{len(names)} cells from {digest}" + (" (the reference's)" if digest == ref else "")
        for digest, names in sorted(by_digest.items(), key=lambda kv: -len(kv[1]))
        if digest
    ]
    if "" in by_digest:
        parts.append(f"{len(by_digest[''])} cells recorded none")
    if ref and ref not in by_digest:
        parts.append(f"the reference from {ref}")
    line = "Starting policies (weights digest, start.json): " + "; ".join(parts) + "."
    if len([d for d in by_digest if d]) > 1:
        line += " Cells that started from different policies compare warm starts as well as variants."
    return line


def default_metrics(table: pd.DataFrame) -> list[str]:
    """The metrics a report shows when none are asked for: the final test evaluations if recorded."""
    return [m for m in DEFAULT_METRICS if m in table] or [m for m in FALLBACK_METRICS if m in table]


def curves_page(
    out_dirs: Sequence[str | Path],
    path: str | Path,
    curve: str = "curve_success",
    metrics: Sequence[str] = (),
    x: str = CURVE_X,
) -> Path:
    """The learning curves of a sweep read from one folder or several (``pooled_sweep``) as a
    standalone page, as ``aggregate`` writes ``curves.html`` for one folder: ``curve`` against ``x``
    (env steps, or A's updates with ``curve_actor_updates``: ``CURVE_AXES``), a colour per group of
    the keys that vary, thin lines the seeds and a thick one their mean, and under the figure each
    group's mean and 95% interval over seeds of ``metrics`` (default: those the report shows). Pooled
    archives of several sweeps get one figure."""
    manifest, rows, _ = pooled_sweep(out_dirs)
    recorded = sorted(
        {k for r in rows for k, v in r.items() if k.startswith("curve_") and isinstance(v, list)}
    )
    recorded = [k for k in recorded if k not in CURVE_AXES]  # the x of the curves
    if not any(x in r for r in rows):
        raise ValueError(f"no finished cell recorded {x!r}, the x of the curves asked for")
    if curve not in recorded:
        raise ValueError(
            f"no finished cell recorded {curve!r}; recorded: {', '.join(recorded) or 'no curves'}"
        )
    by = varying_keys(manifest)
    table = cells_frame(rows, manifest["keys"])
    summary = summarize(table, [k for k in by if k in table], list(metrics) or default_metrics(table))
    names = ", ".join(Path(d).name for d in out_dirs)
    what = "env steps" if x == CURVE_X else "updates of A"
    return write_figure_html(
        curve_figure(rows, by, curve, x=x), Path(path), summary, title=f"{names}: {curve} vs {what}"
    )


def report(
    out_dirs: str | Path | Sequence[str | Path],
    metrics: Sequence[str] = (),
    statistics: bool = False,
    paired: Sequence[Pair] = (),
    reference: str | Path | None = None,
    by_kind: Sequence[str] | None = None,
    lift_off: tuple[str, float] | None = None,
) -> str:
    """The Markdown report of the sweep in ``out_dirs``, one folder or several read as one sweep
    (``pooled_sweep``; see the module docstring). ``reference``: a run folder with final episodes
    (e.g. ``OUT/warmstart_run`` of ``sweep --reference-run``) that every group is compared with task by
    task. ``by_kind``: the task kinds to split every final evaluation by (``split_by_kind``), or ``()``
    for the kinds the cells' warm start left out (``sweep_left_out_kinds``); None does not split.
    ``lift_off``: (metric, threshold): each pair's count of seeds that ended above it (``lift_off_table``)."""
    out_dirs = [out_dirs] if isinstance(out_dirs, (str, Path)) else list(out_dirs)
    manifest, rows, folders = pooled_sweep(out_dirs)
    start = load_episodes(reference) if reference is not None else None
    if by_kind is not None:
        left_out = tuple(by_kind) or sweep_left_out_kinds(out_dirs, manifest)
        start = split_by_kind(start, left_out) if start is not None else None
    total = len(manifest["cells"])
    finished = {r["cell"] for r in rows}
    unfinished = [
        f"- {name}: {cell_progress(folders[name]) or 'not started'}"
        for name in manifest["cells"]
        if name not in finished
    ]
    by = varying_keys(manifest)
    tables = []
    if rows:
        table = cells_frame(rows, manifest["keys"])
        metrics = list(metrics) or default_metrics(table)
        logged = [m for m in metrics if m in REPEAT_POINTS and m not in table]
        if logged:  # read from the runs' metrics.jsonl: the paper's Table 6
            repeats = sweep_state_repeats(out_dirs[0], (manifest, rows), folders).set_index("cell")
            for m in logged:
                table[m] = table["cell"].map(repeats[m])
        tables.append(markdown_table(table, [k for k in by if k in table], metrics))
        # the final episodes, read once for the task-by-task tables (of the final evaluations: not
        # where every metric asked for is read from the training log)
        task_pairs = paired and not all(m in REPEAT_POINTS for m in metrics)
        wanted = task_pairs or start is not None or by_kind is not None
        episodes = cell_episodes(folders, [r["cell"] for r in rows]) if wanted else {}
        lacking = len(rows) - len(episodes)
        caption = "the interval is over tasks, for these runs" + (
            f"; {lacking} finished cells recorded no episodes" if lacking else ""
        )
        if by_kind is not None:
            tables.append(_kind_section(table, episodes, left_out, [k for k in by if k in table], start))
            episodes = {cell: split_by_kind(e, left_out) for cell, e in episodes.items()}
            rollouts = rollout_kind_table(table, folders, left_out, [k for k in by if k in table])
            if len(rollouts):  # live sweep folders only: archives keep no turn tables
                tables.append(
                    "Training rollouts by task kind (the runs' turn tables, every iteration; subgoals_reached: "
                    "the mean over episodes of the largest share of subgoals done):\n\n"
                    + rollout_markdown(rollouts)
                )
        if paired:  # one table per set of paired keys, grouped by every other key that varies
            per_keys: dict[tuple[str, ...], list[Pair]] = {}
            for pair in paired:
                per_keys.setdefault(tuple(pair_keys(pair)), []).append(pair)

            def others(keys: tuple[str, ...]) -> list[str]:
                return [k for k in by if k in table and k not in keys]

            tables.append(
                "Paired by seed:\n\n"
                + "\n\n".join(
                    paired_table(table, pairs, others(keys), metrics) for keys, pairs in per_keys.items()
                )
            )
            if lift_off is not None:
                metric, threshold = lift_off
                tables.append(
                    "Lift-off, seed by seed:\n\n"
                    + "\n\n".join(
                        lift_off_table(table, pairs, others(keys), metric, threshold)
                        for keys, pairs in per_keys.items()
                    )
                )
            if episodes and task_pairs:
                tables.append(
                    f"Paired by seed and task (the final evaluations' episodes; {caption}):\n\n"
                    + "\n\n".join(
                        task_paired_table(table, episodes, pairs, others(keys))
                        for keys, pairs in per_keys.items()
                    )
                )
        if start is not None:
            tables.append(
                f"Against the reference run {reference}, task by task ({caption}):\n\n"
                + reference_table(table, episodes, start, [k for k in by if k in table])
            )
        if statistics:
            stats = sweep_statistics(out_dirs[0], (manifest, rows), folders)
            tables.append(markdown_table(stats, [k for k in by if k in stats], statistics_columns(stats)))
    running = running_statistics(folders, manifest, finished) if statistics else pd.DataFrame()
    if len(running):
        keys = [k for k in by if k in running] or ["cell"]
        tables.append(
            "Not finished, so far:\n\n" + markdown_table(running, keys, statistics_columns(running))
        )
    if rows:
        line = starting_policies(folders, [r["cell"] for r in rows], reference)
        tables += [line] if line else []
    where = ", ".join(map(str, out_dirs))
    note = (
        f"{len(rows)} of {total} cells finished ({where})"
        if rows
        else f"{where}: none of {total} cells has finished yet"
    )
    return "\n".join(["\n\n".join([*tables, note]), *unfinished])


def _kind_section(
    table: pd.DataFrame,
    episodes: Mapping[str, pd.DataFrame],
    left_out: Sequence[str],
    by: Sequence[str],
    start: pd.DataFrame | None,
) -> str:
    """``--by-kind``'s table: each half's success seed by seed, and the reference run's where there is one."""
    recorded = {k for e in episodes.values() for k in e["kind"]}
    if episodes and not recorded & set(left_out):
        raise ValueError(
            f"no final episode is of a kind left out ({', '.join(left_out)}); the episodes' kinds: "
            f"{', '.join(sorted(recorded))}"
        )
    split = kind_table(table, {c: split_by_kind(e, left_out) for c, e in episodes.items()}, by)
    head = (
        f"By task kind: the kinds the warm start left out ({', '.join(left_out)}) and the kinds it was shown"
    )
    if split.empty:
        return f"{head}: no finished cell recorded its final episodes."
    metrics = [c for c in split.columns if c.endswith("_success")]
    lines = [f"{head}:", "", markdown_table(split, by, metrics)]
    if start is not None:
        success = start.groupby("evaluation", sort=False)["won"].mean()
        shown = ", ".join(f"{kind_metric(e)} {value_text(v, 'percent')}" for e, v in success.items())
        lines += ["", f"The reference run: {shown}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.report",
        description="Print a sweep's results as a Markdown table: every seed, mean and 95% t-interval.",
    )
    ap.add_argument("out", nargs="+", help="the sweep's output folder; several are read as one sweep")
    ap.add_argument(
        "--metrics",
        nargs="+",
        default=(),
        help=f"recorded metrics to report (default: {', '.join(DEFAULT_METRICS)} if recorded, else "
        "final_success); repeats_third_share, repeats_two_thirds_share, repeats_end_share: the paper's Table 6",
    )
    ap.add_argument(
        "--statistics",
        action="store_true",
        help="also a table of how each run spent its budget and what the swap did (from its metrics.jsonl)",
    )
    ap.add_argument(
        "--paired",
        action="append",
        default=[],
        metavar="KEY=A,B",
        help="also A − B seed by seed for two values of a grid key, e.g. variant=rspo,plain, or for cells "
        "told apart by several keys, e.g. 'variant=control&swap.replay_ratio=0.0,variant=plain' (repeatable)",
    )
    ap.add_argument(
        "--lift-off",
        nargs=2,
        default=None,
        metavar=("METRIC", "THRESHOLD"),
        help="with --paired: in how many seeds each side's METRIC ended above THRESHOLD (a fraction, e.g. "
        "final_sampled_eval_success 0.4), with the exact sign test by seed and Fisher's exact test",
    )
    ap.add_argument(
        "--reference",
        default=None,
        metavar="RUN_DIR",
        help="also each group − this run (one with final_episodes.parquet, e.g. OUT/warmstart_run of "
        "`sweep --reference-run`), task by task",
    )
    ap.add_argument(
        "--by-kind",
        nargs="?",
        const="",
        default=None,
        metavar="KIND[,KIND]",
        help="split every final evaluation into the task kinds the warm start left out and the others: "
        f"their success seed by seed, and the task-by-task tables per half (kinds: the cells' {EXCLUDE_FIELD}, "
        "or those named)",
    )
    ap.add_argument(
        "--curves",
        default=None,
        metavar="HTML",
        help="also write the learning curves of every folder together to this page (plotly.js beside it)",
    )
    ap.add_argument(
        "--curve",
        default="curve_success",
        help="the recorded curve --curves draws (default: curve_success; WebShop: curve_score)",
    )
    ap.add_argument(
        "--curve-x",
        default=CURVE_X,
        choices=sorted(CURVE_AXES),
        help="the budget --curves draws against: env steps (curve_env_steps, default) or updates of A "
        "(curve_actor_updates, the paper's accounting)",
    )
    ap.add_argument(
        "--advantage-share",
        action="store_true",
        help="also where each finished cell's positive advantage goes, to steps of won or failed episodes "
        "(from its turn tables: a live sweep folder, not an archive)",
    )
    args = ap.parse_args(argv)
    try:
        pairs = [parse_pair(p) for p in args.paired]
        if args.curves:  # first, so that a curve no cell recorded fails before the report prints
            page = curves_page(args.out, args.curves, args.curve, args.metrics, args.curve_x)
            print(f"wrote {page}", file=sys.stderr)
        kinds = None if args.by_kind is None else kind_names(args.by_kind)
        lift_off = None
        if args.lift_off is not None:
            if not pairs:
                raise ValueError("--lift-off counts the two sides of a pair: give --paired too")
            lift_off = (args.lift_off[0], float(args.lift_off[1]))
        print(report(args.out, args.metrics, args.statistics, pairs, args.reference, kinds, lift_off))
        if args.advantage_share:
            from rspo_kit.experiments.advantage import advantage_share_report

            print("\n" + advantage_share_report(args.out))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
