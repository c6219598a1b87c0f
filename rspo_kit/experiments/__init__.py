"""Batch runs of the notebooks: a grid of parameters, one papermill run per cell, an aggregate table.

``run_sweep`` executes a notebook over a grid (in parallel processes, resumable); ``aggregate``
collects the results each cell recorded (``rspo_kit.records.record``) into one table with 95%
intervals over seeds and a figure of the learning curves. CLI: ``python -m rspo_kit.experiments.sweep``.
``report`` prints a sweep (or several pooled) as Markdown tables; ``archive`` keeps a sweep's results,
final episodes and logs, without checkpoints, in a folder to commit that ``report`` reads like the sweep.
"""

__all__ = [
    "KERNEL_NAME",
    "Cell",
    "CellOutcome",
    "aggregate",
    "cell_name",
    "curve_figure",
    "ensure_kernel",
    "expand_grid",
    "mean_ci",
    "plan",
    "run_sweep",
    "summarize",
    "sweep_status",
    "write_figure_html",
]


def __getattr__(name: str):
    # imported on first use, so that `python -m rspo_kit.experiments.sweep` runs the module once
    if name in __all__:
        from rspo_kit.experiments import sweep

        return getattr(sweep, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
