"""``guarded``: every UI callback shows its exception in the notebook instead of losing it.

ipywidgets runs ``observe`` and ``on_click`` handlers outside any cell, so an exception raised there
goes to the kernel log, which JupyterLab does not show: the slider just stops doing anything. Each
widget owns an error area (an ``ipywidgets.Output``); a guarded handler writes its traceback there and
to the ``rspo_widgets`` logger (stderr in a headless run), then returns ``None``.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as W

log = logging.getLogger("rspo_widgets")

F = TypeVar("F", bound=Callable[..., Any])


def error_area() -> W.Output:
    """The Output a widget's guarded callbacks report into (empty until something fails)."""
    return W.Output(layout=W.Layout(border="0px"))


def show_error(area: W.Output, text: str) -> None:
    """Replace what ``area`` shows with ``text`` as a stderr stream (works without a running kernel).

    Only the latest error is kept: a slider dragged through a bad range would otherwise pile up one
    traceback per value.
    """
    area.outputs = ({"output_type": "stream", "name": "stderr", "text": text},)
    area.layout.border = "1px solid #d62728"


def clear_error(area: W.Output) -> None:
    area.outputs = ()
    area.layout.border = "0px"


def guarded(method: F) -> F:
    """Decorate a widget method used as a callback: on an exception, show the traceback in ``self.errors``.

    The owner must have an ``errors`` attribute made by ``error_area()``; ``self.last_error`` keeps the
    text for programmatic checks. A later call that succeeds leaves the last error on show until
    ``clear_error`` — an error that vanished on the next redraw would be easy to miss.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as err:
            text = f"{type(self).__name__}.{method.__name__} failed:\n{traceback.format_exc()}"
            self.last_error = text
            show_error(self.errors, text)
            log.error("%s.%s failed: %s", type(self).__name__, method.__name__, err)
            return None

    return wrapper  # type: ignore[return-value]
