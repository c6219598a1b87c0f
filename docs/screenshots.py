"""Screenshots of the notebook widgets as JupyterLab draws them, taken in headless Chromium.

    .venv/bin/python docs/screenshots.py            # or: make screenshots
    .venv/bin/python docs/screenshots.py --only swap_inspector --keep

What it does, all offline:

1. writes a notebook into a temporary folder: one set-up cell (a short RSPO-GiGPO smoke run on the
   two-digit ``lock`` env of ``tests/lock_env.py``, seconds on one CPU thread) and one cell per widget;
2. starts ``jupyter lab`` from this Python environment on a free local port (its own settings,
   workspace and runtime folders under the temporary folder; no news or update checks);
3. starts ``chromium-headless-shell`` (or ``chromium``) with the DevTools protocol on another free port
   and every host but 127.0.0.1 unresolvable, so nothing can come from a CDN: plotly.js and the widget
   JavaScript are served by the local JupyterLab (its lab extensions) and the kernel (anywidget's ESM);
4. opens the notebook, runs all cells on the live ``rspo-kit`` kernel (``make kernel``), waits until
   every widget has drawn its plotly figures, and saves each widget as a PNG in ``docs/img/``: cropped
   to what the widget draws, zoomed (1x-2x) to about 1400 px wide, and shrunk by ``pngquant`` when it
   is installed. It fails, saying why, when a cell raises or a widget draws no figure in the browser.

The Chromium session is driven through the DevTools protocol with ``websocket-client`` (a dependency
of ``jupyter_server``, so it is already in the environment). About 80 s on a shared 2-core CPU.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

import websocket  # websocket-client, installed with jupyter_server

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "img"
WIDTH = 1280  # browser viewport in CSS pixels: the output areas are about 1170 px wide
BASE_HEIGHT = 1000
TARGET_WIDTH = 1400  # PNG width aimed at: each widget is zoomed (1x-2x) to about this many pixels
# plotly's mode bar shows on hover only: hidden, as a page looks without the mouse over a figure
PAGE_CSS = ".js-plotly-plot .modebar-container { display: none !important; }"

# ------------------------------------------------------------------------------------- the notebook
SETUP = """
import os, sys
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from lock_env import register_lock
register_lock()

import rspo_widgets as rw
from rspo_kit.records import load_turns
from rspo_kit.train import Trainer, initial_policy, preset
from rspo_kit.train.update import batch_advantages
from rspo_widgets._data import swap_tables


class Recorder:
    def __init__(self):
        self.events = []

    def __getattr__(self, name):
        if name.startswith("on_"):
            return self.events.append
        raise AttributeError(name)

    def of(self, name):
        return [e for e in self.events if e.name == name]


# the smoke preset, a little wider: 4 tasks per iteration, groups of 4, every explorer trajectory
# admitted to the replay buffer (so that swaps and rescued groups show up within a few iterations)
cfg = preset(
    "smoke", env="dial", algo="gigpo", swap=True, seed={seed},
    env__tasks_per_iteration=4, algo__group_size=4, swap__explorer_group_size=4,
    swap__replay_filter="all", train__iterations={iterations},
)
cfg.train.run_dir = {run_dir!r}
cfg.train.threads = 1
rec = Recorder()
policy, _ = initial_policy(cfg, progress_bar=False)
trainer = Trainer(cfg, policy, callbacks=[rec])
trainer.run()


def failed_group_rescued(summary):
    all_failed = summary["actor_outcomes"].map(lambda s: all(float(x) == 0 for x in s.split()))
    return summary[summary["rescued"] & all_failed]


# the iteration to show: the first whose swap rescues an all-failed actor group with a replayed
# success, else the first with any rescued group, else the last
swaps = rec.of("on_swap")
swap, task = swaps[-1], None
for rescued in (failed_group_rescued, lambda s: s[s["rescued"]]):
    hits = [(e, rescued(swap_tables(e, cfg.algo, trainer.rewards).summary)) for e in swaps]
    hits = [(e, s) for e, s in hits if len(s)]
    if hits:
        swap, task = hits[0][0], hits[0][1]["task_id"].iloc[0]
        break
batch = next(e for e in rec.of("on_update_end") if e.iteration == swap.iteration).data["batch"]
advantages = batch_advantages(batch, cfg.algo)
group = next((t.group_id for t in batch.trajs if t.task_id == task), batch.trajs[0].group_id)
tokenizer = getattr(trainer.pair.policy("actor"), "tokenizer", None)
print(f"iteration {{swap.iteration}}, task {{task}}, group {{group}}")
"""

# name -> code of its cell; the last line displays the widget
WIDGETS: dict[str, str] = {
    "swap_inspector": """
        inspector = rw.SwapInspector(swap, cfg.algo, trainer.rewards)
        if task is not None:
            inspector.task.value = task
        rw.show(inspector)
    """,
    "training_dashboard": """
        rw.show(rw.TrainingDashboard.from_run(cfg.train.run_dir))
    """,
    "misalignment_view": """
        view = rw.MisalignmentView(load_turns(cfg.train.run_dir), env="dial", eps=0.3)
        rw.show(view)
    """,
    "trajectory_viewer": """
        # the viewer opens on its first group: put the chosen group first. (Choosing it with
        # viewer.group.value before the widget is displayed leaves trace properties undefined in
        # plotly's FigureWidget model, and plotly.js then fails to draw the figure.)
        steps = advantages.step.tolist()
        starts = [0]
        for t in batch.trajs:
            starts.append(starts[-1] + len(t.steps))
        order = sorted(range(len(batch.trajs)), key=lambda i: batch.trajs[i].group_id != group)
        viewer = rw.TrajectoryViewer(
            [batch.trajs[i] for i in order],
            tokenizer=tokenizer,
            advantages=[a for i in order for a in steps[starts[i] : starts[i + 1]]],
            process=trainer.rewards,
        )
        rw.show(viewer)
    """,
    "env_playground": """
        # ALFWorld (the real text engine): two expert steps, one free-text action the env rejects,
        # one more expert step; the episode is still running, so the action buttons are shown
        playground = rw.EnvPlayground(
            env="alfworld", split="eval", n_tasks=5, process=("subgoal", "heuristic", "hack")
        )
        for action in ("expert", "expert", "look under the sofa", "expert"):
            playground.act(playground.env.expert_action() if action == "expert" else action)
        rw.show(playground)
    """,
    "advantage_heatmap": """
        heatmap = rw.AdvantageHeatmap(batch, cfg.algo)
        heatmap.group.value = group
        rw.show(heatmap)
    """,
}


def notebook(tmp: Path, names: list[str], kernel: str, seed: int, iterations: int) -> dict:
    def cell(source: str, **metadata) -> dict:
        return {
            "id": metadata.get("screenshot", "setup").replace("_", "-"),
            "cell_type": "code",
            "execution_count": None,
            "metadata": metadata,
            "outputs": [],
            "source": textwrap.dedent(source).strip(),
        }

    setup = SETUP.format(
        tests=str(REPO / "tests"), seed=seed, iterations=iterations, run_dir=str(tmp / "run")
    )
    return {
        "cells": [cell(setup), *[cell(WIDGETS[n], screenshot=n) for n in names]],
        "metadata": {
            "kernelspec": {"name": kernel, "display_name": kernel, "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def kernel_name() -> str:
    """``rspo-kit`` when registered (``make kernel``), else this environment's ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    return "rspo-kit" if "rspo-kit" in KernelSpecManager().find_kernel_specs() else "python3"


# ------------------------------------------------------------------------------------ processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float, every: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception as exc:  # not up yet
            value, last = None, exc
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last!r})")


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def start_lab(tmp: Path, port: int, token: str, log) -> subprocess.Popen:
    settings = tmp / "lab-settings"
    # every cell rendered (no virtual scrolling), no news or update pop-ups
    write_json(
        settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
        {"windowingMode": "none"},
    )
    write_json(
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False},
    )
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "OMP_NUM_THREADS": "1",
    }
    env.setdefault("RSPO_KIT_CACHE", str(REPO / ".cache"))
    env.setdefault("ALFWORLD_DATA", str(Path(env["RSPO_KIT_CACHE"]) / "alfworld"))
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp}",
        "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    wait_for("jupyter lab", lambda: proc.poll() is None and urllib.request.urlopen(url, timeout=2), 120)
    return proc


def chromium_binary() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name) or (f"/usr/lib/chromium/{name}" if name.startswith("chromium") else None)
        if path and os.access(path, os.X_OK):
            return path
    raise SystemExit("no Chromium found: apt-get install chromium-headless-shell (make screenshots does)")


def start_chromium(tmp: Path, port: int, log) -> subprocess.Popen:
    binary = chromium_binary()
    cmd = [
        binary, f"--remote-debugging-port={port}", "--remote-allow-origins=*",
        f"--user-data-dir={tmp / 'chromium-profile'}", f"--window-size={WIDTH},{BASE_HEIGHT}",
        "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
        "--no-first-run", "--disable-extensions", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--mute-audio",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # offline: no CDN can answer
        "about:blank",
    ]  # fmt: skip
    if not Path(binary).name.endswith("headless-shell"):
        cmd.insert(1, "--headless=new")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    wait_for(
        "chromium",
        lambda: (
            proc.poll() is None and urllib.request.urlopen(f"http://127.0.0.1:{port}/json/version", timeout=2)
        ),
        60,
    )
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    """End a process started here, and its children (it leads its own session)."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


# ---------------------------------------------------------------------------- DevTools protocol
class Browser:
    """A page of Chromium, driven through the DevTools protocol."""

    def __init__(self, port: int):
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=120, suppress_origin=True, max_size=None
        )
        self.n = 0
        self.errors: list[str] = []  # the page's uncaught exceptions and console errors
        self.call("Runtime.enable")

    def call(self, method: str, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message.get("method"), message.get("params", {}))

    def _event(self, method: str | None, params: dict) -> None:
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(
                " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            )

    def js(self, expression: str, timeout: float = 60):
        """Evaluate ``expression`` (awaiting a promise) in the page; returns its JSON value."""
        result = self.call(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
            timeout=int(timeout * 1000),
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise RuntimeError(f"JavaScript error: {text}")
        return result["result"].get("value")

    def viewport(self, height: float, scale: float = 1.0) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=int(height),
            deviceScaleFactor=scale,
            mobile=False,
        )

    def close(self) -> None:
        self.ws.close()


# the page side: the notebook panel and its cells (JupyterLab exposes the app as window.jupyterapp)
JS_HELPERS = """
window.__shots = {
  panel() {
    const app = window.jupyterapp;
    for (const w of app.shell.widgets('main')) if (w.content && w.sessionContext) return w;
    return null;
  },
  cells() { return Array.from(this.panel().content.widgets); },
  target(name) { return this.cells().find(c => c.model.getMetadata('screenshot') === name); },
  widgetOutput(cell) {
    // the output that holds the widget (a cell may also print to stderr)
    const outs = Array.from(cell.node.querySelectorAll('.jp-OutputArea-output'));
    return outs.find(o => o.querySelector('.jupyter-widgets')) || null;
  },
  contentRect(out) {
    // the union of what is drawn (text, figures, controls, tables): the crop, without empty margins
    const boxes = [], range = document.createRange();
    const walker = document.createTreeWalker(out, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim() || n.parentElement.closest('svg')) continue;
      range.selectNodeContents(n);
      boxes.push(...range.getClientRects());
    }
    for (const el of out.querySelectorAll('.main-svg, button, select, input, textarea, table, canvas, img'))
      boxes.push(el.getBoundingClientRect());
    const o = out.getBoundingClientRect();
    const seen = boxes.filter(r => r.width > 0 && r.height > 0);
    const x0 = Math.max(o.left, Math.min(...seen.map(r => r.left)));
    const y0 = Math.max(o.top, Math.min(...seen.map(r => r.top)));
    const x1 = Math.min(o.right, Math.max(...seen.map(r => r.right)));
    const y1 = Math.min(o.bottom, Math.max(...seen.map(r => r.bottom)));
    return {x: x0, y: y0, width: x1 - x0, height: y1 - y0, left: o.left, top: o.top, bottom: o.bottom};
  },
  state() {
    const panel = this.panel();
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    const cells = this.cells().filter(c => c.model.type === 'code');
    const errors = [];
    for (const c of cells) for (const o of c.model.outputs.toJSON())
      if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue + '\\n' + (o.traceback || []).join('\\n'));
    const widgets = {};
    for (const c of this.cells()) {
      const name = c.model.getMetadata('screenshot');
      if (!name) continue;
      const out = this.widgetOutput(c);
      widgets[name] = {
        plots: out ? out.querySelectorAll('.js-plotly-plot .main-svg').length : 0,
        text: out ? out.innerText.length : 0,
        broken: out ? /Error displaying widget|Failed to load model/.test(out.innerText) : false,
      };
    }
    return {
      kernel: kernel ? kernel.status : null,
      done: cells.every(c => c.model.executionCount !== null && !(c.promptNode.textContent || '').includes('*')),
      errors, widgets,
    };
  },
};
true
"""


def open_notebook(browser: Browser, port: int, token: str, path: str) -> None:
    browser.call("Page.navigate", url=f"http://127.0.0.1:{port}/lab?reset&token={token}")
    wait_for(
        "JupyterLab to start in the browser",
        lambda: browser.js("!!(window.jupyterapp && window.jupyterapp.started) && document.readyState"),
        120,
    )
    browser.js("window.jupyterapp.started")
    browser.js(JS_HELPERS)
    browser.js(
        f"""(async () => {{
          const app = window.jupyterapp;
          app.shell.collapseLeft(); app.shell.collapseRight();
          const style = document.createElement('style');
          style.textContent = {json.dumps(PAGE_CSS)};
          document.head.appendChild(style);
          const panel = await app.commands.execute('docmanager:open', {{path: {json.dumps(path)}, factory: 'Notebook'}});
          await panel.context.ready; await panel.sessionContext.ready;
          app.shell.activateById(panel.id);
          return true;
        }})()"""
    )
    wait_for("the kernel", lambda: browser.js("window.__shots.state().kernel") == "idle", 180)


def run_all(browser: Browser, names: list[str], timeout: float) -> dict:
    browser.js("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    time.sleep(3)

    def finished():
        state = browser.js("window.__shots.state()")
        if state["errors"]:
            raise SystemExit("a notebook cell failed:\n" + "\n\n".join(state["errors"]))
        return state if state["done"] and state["kernel"] == "idle" else None

    wait_for("the notebook to run", finished, timeout, every=2)

    # then until every widget has drawn its figures and nothing changed for a few seconds
    previous, since = None, time.monotonic()

    def drawn():
        nonlocal previous, since
        widgets = browser.js("window.__shots.state()")["widgets"]
        broken = [n for n, w in widgets.items() if w["broken"]]
        if broken:
            raise SystemExit(f"widgets failed to render in the browser: {broken}")
        if widgets != previous:
            previous, since = widgets, time.monotonic()
            return None
        quiet = time.monotonic() - since
        missing = [n for n in names if widgets.get(n, {}).get("plots", 0) == 0]
        if quiet > 60 and missing:
            errors = "\n".join(browser.errors[-5:]) or "(none)"
            raise SystemExit(f"no figure drawn in the browser for {missing}; browser errors:\n{errors}")
        return widgets if quiet > 5 and not missing else None

    widgets = wait_for("the widgets to draw", drawn, timeout, every=3)
    time.sleep(2)  # plotly transitions
    return widgets


def capture(browser: Browser, name: str, path: Path) -> tuple[int, int]:
    """Save the widget of the cell tagged ``name`` as a PNG; returns its size in pixels."""
    rect_js = f"""(() => {{
      const s = window.__shots, cell = s.target({json.dumps(name)});
      cell.outputsScrolled = false;
      const out = s.widgetOutput(cell);
      out.scrollIntoView({{block: 'center'}});  // clear of the notebook's toolbar
      return s.contentRect(out);
    }})()"""
    rect = browser.js(rect_js)
    scale = round(min(2.0, max(1.0, TARGET_WIDTH / rect["width"])), 2)
    # a viewport tall enough for the whole widget below JupyterLab's bars (the panel scrolls, not the page)
    browser.viewport(max(BASE_HEIGHT, rect["bottom"] - rect["top"] + 400), scale)
    time.sleep(1.5)
    rect = browser.js(rect_js)
    time.sleep(0.5)
    pad = 8  # left into the (empty) prompt column; not above the output area: the cell's input is there
    x, y = max(0, rect["x"] - pad), max(rect["top"], rect["y"] - pad)
    width, height = rect["x"] + rect["width"] + pad - x, rect["y"] + rect["height"] + pad - y
    clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
    shot = browser.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=False)
    path.write_bytes(base64.b64decode(shot["data"]))
    browser.viewport(BASE_HEIGHT)
    return round(width * scale), round(height * scale)


def optimise(path: Path) -> None:
    """Shrink a PNG with pngquant (a 256-colour palette) when it is installed."""
    if shutil.which("pngquant"):
        subprocess.run(
            ["pngquant", "--force", "--skip-if-larger", "--quality=70-95", "--output", str(path), str(path)],
            check=False,
        )


# ---------------------------------------------------------------------------------------- main
def shoot(tmp: Path, names: list[str], out: Path, timeout: float, lab_log, chrome_log, started: float):
    """Start JupyterLab and Chromium, run the notebook, save the PNGs; stops both in any case."""
    token = uuid.uuid4().hex
    lab_port, cdp_port = free_port(), free_port()
    lab = chrome = browser = None
    try:
        lab = start_lab(tmp, lab_port, token, lab_log)
        chrome = start_chromium(tmp, cdp_port, chrome_log)
        browser = Browser(cdp_port)
        browser.viewport(BASE_HEIGHT)
        open_notebook(browser, lab_port, token, "shots.ipynb")
        print(f"running the notebook in JupyterLab ({time.monotonic() - started:.0f} s)", flush=True)
        widgets = run_all(browser, names, timeout)
        print(f"widgets drawn ({time.monotonic() - started:.0f} s): {widgets}", flush=True)
        for name in names:
            path = out / f"{name}.png"
            width, height = capture(browser, name, path)
            optimise(path)
            shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            print(f"{shown}: {width}x{height} px, {path.stat().st_size // 1024} KB", flush=True)
        external = browser.js(
            "performance.getEntriesByType('resource').map(e => e.name)"
            ".filter(u => !/^(https?:\\/\\/127\\.0\\.0\\.1[:/]|data:|blob:)/.test(u))"
        )
        if external:
            print(f"requests to other hosts (blocked): {external}", flush=True)
        if browser.errors:
            print("errors in the browser console:\n" + "\n".join(browser.errors), flush=True)
    finally:
        if browser is not None:
            browser.close()
        stop(chrome)
        if lab is not None and lab.poll() is None:
            try:  # shuts the kernel down too
                url = f"http://127.0.0.1:{lab_port}/api/shutdown?token={token}"
                urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10)
                lab.wait(20)
            except Exception:
                pass
        stop(lab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(WIDGETS), help="widgets to capture (default all)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs (default docs/img)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the smoke run")
    parser.add_argument("--iterations", type=int, default=6, help="iterations of the smoke run")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the notebook")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (notebook, logs)")
    args = parser.parse_args()
    names = args.only or list(WIDGETS)
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="rspo-screenshots-"))
    (tmp / "shots.ipynb").write_text(
        json.dumps(notebook(tmp, names, kernel_name(), args.seed, args.iterations), indent=1)
    )
    done = False
    try:
        with open(tmp / "jupyterlab.log", "w") as lab_log, open(tmp / "chromium.log", "w") as chrome_log:
            shoot(tmp, names, args.out, args.timeout, lab_log, chrome_log, started)
        done = True
    finally:
        if args.keep or not done:
            print(f"the notebook and the logs are in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
