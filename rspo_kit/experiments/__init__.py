"""Batch runs of the notebooks: a grid of parameters, one papermill run per cell, an aggregate table.

``run_sweep`` executes a notebook over a grid (in parallel processes, resumable); ``aggregate``
collects the results each cell recorded (``rspo_kit.records.record``) into one table with 95%
intervals over seeds and a figure of the learning curves. CLI: ``python -m rspo_kit.experiments.sweep``.
``report`` prints a sweep (or several pooled) as Markdown tables; ``archive`` keeps a sweep's results,
final episodes and logs, without checkpoints, in a folder to commit that ``report`` reads like the sweep.

The modules, each with one job:

- a sweep: ``grid`` (its cells, their names, each cell's notebook parameters), ``cells`` (one cell run
  in one process), ``local_backend`` and ``ray_backend`` (where cells run), ``sweep`` (running a
  sweep, and its command line);
- its results: ``aggregation`` (the table of finished cells, ``summarize``), ``intervals`` (95%
  t-intervals), ``figures`` (learning curves, HTML pages), ``pooling`` (several folders read as one
  sweep), ``tables`` (Markdown tables), ``pairing`` (differences paired by seed, task or reference
  run), ``training_statistics`` (how each run spent its budget, what the swap did), ``by_kind``
  (success by task kind), ``advantage`` (where the advantage goes), ``report`` (all of these as one
  Markdown report, and its command line), ``paper_table`` (the paper's Table 1 beside ours),
  ``dense_hacking`` (its Figure 3: a policy on the dense reward alone), ``archive``, ``results``;
- the notebooks' helpers: ``env_tour``, ``step_by_hand``.

The code of this repository's own studies is in ``rspo_kit.studies``.
"""

# where each name of the package's API is defined
_MODULES = {
    "KERNEL_NAME": "cells",
    "Cell": "grid",
    "CellOutcome": "cells",
    "aggregate": "aggregation",
    "cell_name": "grid",
    "curve_figure": "figures",
    "ensure_kernel": "cells",
    "expand_grid": "grid",
    "mean_ci": "intervals",
    "plan": "grid",
    "run_sweep": "sweep",
    "summarize": "aggregation",
    "sweep_status": "sweep",
    "write_figure_html": "figures",
}
__all__ = sorted(_MODULES)


def __getattr__(name: str):
    # imported on first use, so that `python -m rspo_kit.experiments.sweep` runs the module once
    if name in _MODULES:
        import importlib

        return getattr(importlib.import_module(f"rspo_kit.experiments.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
