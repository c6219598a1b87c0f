"""rspo_widgets: the notebook UI of rspo_kit (ipywidgets + plotly FigureWidget).

Every widget reads records (trajectories, per-turn tables, metrics rows, trainer events), never
trainer internals; each has ``.widget`` (the container to display; displaying the object itself works
too), ``.figure``/``.figures`` (plotly figures updated in place) and ``static_html()`` for headless
notebook runs: ``show(w, interactive=INTERACTIVE)`` displays the widget or that HTML fallback.
"""

from rspo_widgets._base import WidgetBase, show, to_html
from rspo_widgets._data import playground_row, rescore
from rspo_widgets._guard import guarded
from rspo_widgets.advantage import AdvantageHeatmap
from rspo_widgets.dashboard import TrainingDashboard
from rspo_widgets.loop import LoopInspector
from rspo_widgets.misalignment import MisalignmentView, RewardTimeline
from rspo_widgets.playground import EnvPlayground
from rspo_widgets.swap import SwapInspector
from rspo_widgets.trajectory import TrajectoryViewer

__all__ = [
    "AdvantageHeatmap",
    "EnvPlayground",
    "LoopInspector",
    "MisalignmentView",
    "RewardTimeline",
    "SwapInspector",
    "TrainingDashboard",
    "TrajectoryViewer",
    "WidgetBase",
    "guarded",
    "playground_row",
    "rescore",
    "show",
    "to_html",
]
