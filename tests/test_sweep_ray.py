"""The sweep's Ray backend: notebook 04 on the smoke preset, cell by cell as the process pool runs it.

One local Ray of 2 CPUs serves the whole file (started once, like a cluster the sweep joins). The
metrics compared are those that a run repeats exactly: every logged row but its timings (``perf/``),
and every recorded result but the wall time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from processes import alive, descendants

import rspo_kit.experiments.sweep as sweep_module
from rspo_kit.experiments import run_sweep
from rspo_kit.records import read_results

pytestmark = pytest.mark.timeout(300)
needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install -e '.[cluster]')"
)

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "notebooks" / "04_training.ipynb"
# smoke runs on the chain testbed (its fastest env) of two iterations, a checkpoint after each: a cell
# can be killed between them
SMOKE = {"PRESET": "smoke", "ENV": "chain-4x2", "THREADS": 1, "INTERACTIVE": False, "ITERATIONS": 2}
GRID = {"variant": ["plain", "rspo"], "train.seed": [0, 1]}
KILLED = "variant=rspo__train.seed=0"


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pool_sweep(tmp_path_factory) -> Path:
    """The smoke grid on the local process pool: the reference every Ray run is compared with."""
    out = tmp_path_factory.mktemp("pool") / "sweep"
    outcomes = run_sweep(TRAINING, GRID, out, parameters=SMOKE, workers=2, log=None)
    assert [o.status for o in outcomes] == ["finished"] * 4, [o.error for o in outcomes]
    return out


def _repeatable(out: Path, cell: str) -> tuple[list[dict], dict]:
    """A cell's logged metrics without timings, and its recorded results without the wall time."""
    rows = [json.loads(line) for line in (out / cell / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]
    results = {k: v for k, v in read_results(out / f"{cell}.ipynb").items() if k != "seconds"}
    return rows, results


@needs_ray
def test_the_smoke_grid_on_ray_matches_the_process_pool_cell_by_cell(local_ray, pool_sweep, tmp_path):
    out = tmp_path / "sweep"
    said: list[str] = []
    outcomes = run_sweep(TRAINING, GRID, out, parameters=SMOKE, backend="ray", log=said.append)
    assert [o.status for o in outcomes] == ["finished"] * 4, [o.error for o in outcomes]
    for o in outcomes:
        rows, results = _repeatable(out, o.name)
        assert len(rows) == 3 and results["iterations"] == 2
        assert (rows, results) == _repeatable(pool_sweep, o.name), o.name
    manifest = json.loads((out / "sweep.json").read_text())
    here = local_ray.get_runtime_context().gcs_address  # the Ray this process joined
    assert (manifest["backend"], manifest["address"]) == ("ray", here)
    assert json.loads((pool_sweep / "sweep.json").read_text())["backend"] == "local"
    assert said[:2] == [
        f"sweep {out}: 4 cells, 0 finished before, 4 to run",
        f"on the Ray at {here}: 2 CPUs, 0 GPUs; each cell holds 1 CPUs, 0 GPUs and runs 1 torch threads",
    ]
    # run again: every cell is finished, nothing is queued on Ray
    again = run_sweep(TRAINING, GRID, out, parameters=SMOKE, backend="ray", log=None)
    assert [o.status for o in again] == ["skipped"] * 4


def _kernels_below(pid: int) -> list[tuple[int, int]]:
    """(kernel pid, its parent's pid) of the Jupyter kernels below ``pid``."""
    kernels = []
    for kid in descendants(pid):
        with contextlib.suppress(OSError):
            if b"ipykernel" in Path(f"/proc/{kid}/cmdline").read_bytes():
                parent = int(Path(f"/proc/{kid}/stat").read_text().split(")")[-1].split()[1])
                kernels.append((kid, parent))
    return kernels


@needs_ray
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_cell_whose_worker_is_killed_is_retried_and_ends_as_if_never_killed(
    local_ray, pool_sweep, tmp_path
):
    out = tmp_path / "sweep"
    grid = {"variant": ["rspo"], "train.seed": [0]}
    ran: list = []
    sweep = threading.Thread(
        target=lambda: ran.extend(run_sweep(TRAINING, grid, out, parameters=SMOKE, backend="ray", log=None))
    )
    sweep.start()
    try:
        deadline = time.monotonic() + 120
        while not (out / KILLED / "ckpt-00001").is_dir():  # iteration 1 is on disk, the run goes on
            assert sweep.is_alive() and time.monotonic() < deadline, "the cell did not reach iteration 1"
            time.sleep(0.05)
        ((kernel, worker),) = _kernels_below(os.getpid())  # the Ray worker runs the cell's kernel
        assert not (out / KILLED / "ckpt-00002").exists(), "the cell ended before it could be killed"
        os.kill(worker, signal.SIGKILL)
    finally:
        sweep.join(240)
    assert [(o.status, o.error) for o in ran] == [("finished", None)]
    executed = (out / f"{KILLED}.ipynb").read_text()
    assert "continuing the run in" in executed  # the retry resumed from the checkpoint
    assert _repeatable(out, KILLED) == _repeatable(pool_sweep, KILLED)
    assert not alive(kernel), "the killed worker's kernel outlived it"


PARAMETERS = """\
SEED = 0
RUN_DIR = ""
LOG = ""      # every execution appends its seed to this file
FAIL = -1     # the seed that fails
SLEEP = 0     # seconds the notebook waits before it records
"""

BODY = """\
import time
from pathlib import Path
from rspo_kit.records import record
with open(LOG, "a") as f:
    f.write(f"{SEED}\\n")
if SEED == FAIL:
    raise ValueError(f"seed {SEED} is a bad parameter")
Path(RUN_DIR).mkdir(parents=True, exist_ok=True)  # what the trainer's log looks like halfway
Path(RUN_DIR, "metrics.jsonl").write_text('{"iteration": 3, "rollout/cumulative_env_steps": 1234.0}\\n')
time.sleep(SLEEP)
record({"seed": SEED}, RUN_DIR)
"""


def _cells_notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(PARAMETERS), nbformat.v4.new_code_cell(BODY)]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "cells.ipynb")
    return folder / "cells.ipynb"


@needs_ray
def test_a_failing_cell_fails_once_and_the_others_finish_with_progress_lines(local_ray, tmp_path):
    notebook, log, said = _cells_notebook(tmp_path), tmp_path / "executions.log", []
    fixed = {"LOG": str(log), "FAIL": 1, "SLEEP": 3}
    outcomes = run_sweep(
        notebook,
        {"SEED": [0, 1, 2]},
        tmp_path / "sweep",
        parameters=fixed,
        backend="ray",
        progress_s=1,
        log=said.append,
    )
    assert [o.status for o in outcomes] == ["finished", "failed", "finished"]
    assert outcomes[1].error.startswith("ValueError: seed 1 is a bad parameter")
    assert sorted(log.read_text().split()) == ["0", "1", "2"]  # the failing cell ran once: no retry
    assert "  SEED=0: iteration 3, 1,234 env steps" in said  # the local pool's progress lines
    assert "  SEED=1: FAILED ValueError: seed 1 is a bad parameter" in "\n".join(said)


@needs_ray
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_stopping_the_sweep_cancels_its_tasks_and_a_rerun_resumes(local_ray, tmp_path):
    notebook, log, out = _cells_notebook(tmp_path), tmp_path / "executions.log", tmp_path / "sweep"
    said = []

    def interrupt_once_running(line: str) -> None:  # Ctrl-C while both CPUs run a cell
        said.append(line)
        if line.startswith("  SEED=") and len(_kernels_below(os.getpid())) == 2:
            raise KeyboardInterrupt

    grid, fixed = {"SEED": [0, 1, 2]}, {"LOG": str(log), "SLEEP": 600}
    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            notebook, grid, out, parameters=fixed, backend="ray", progress_s=1, log=interrupt_once_running
        )
    assert said[-1].startswith("sweep stopped: its Ray tasks were cancelled")
    kernels = [kernel for kernel, _ in _kernels_below(os.getpid())]
    deadline = time.monotonic() + 30
    while any(alive(k) for k in kernels) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [k for k in kernels if alive(k)], "kernels outlived their cancelled tasks"
    time.sleep(2)
    # the queued cell never started; a running one may be cancelled before its first cell logs
    before = log.read_text().split() if log.exists() else []
    assert "2" not in before and set(before) <= {"0", "1"}, before
    outcomes = run_sweep(notebook, grid, out, parameters={"LOG": str(log)}, backend="ray", log=None)
    assert [o.status for o in outcomes] == ["finished"] * 3
    assert sorted(log.read_text().split()) == sorted([*before, "0", "1", "2"])


@needs_ray
def test_a_cell_no_node_can_hold_is_an_error_before_any_cell_starts(local_ray, tmp_path):
    notebook = _cells_notebook(tmp_path)
    with pytest.raises(ValueError, match=r"no node of the Ray at this machine has 1 CPUs and 1 GPUs"):
        run_sweep(notebook, {"SEED": [0]}, tmp_path / "sweep", backend="ray", gpus_per_cell=1, log=None)
    assert not (tmp_path / "sweep" / "SEED=0.ipynb").exists()


@needs_ray
def test_the_manifest_records_the_address_given_else_local_for_a_ray_the_sweep_starts(monkeypatch):
    import ray

    from rspo_kit.experiments.ray_backend import recorded_address

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert (recorded_address("10.0.0.1:6379"), recorded_address(None)) == ("10.0.0.1:6379", "local")


def test_the_ray_backend_without_ray_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    argv = [
        str(TRAINING),
        "--grid",
        '{"train.seed": [0]}',
        "--out",
        str(tmp_path / "out"),
        "--backend",
        "ray",
    ]
    assert sweep_module.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: the ray backend needs Ray, which is not installed: pip install -e '.[cluster]'"]
    assert not (tmp_path / "out").exists()  # nothing started, nothing written
    with pytest.raises(SystemExit):  # Ray's options belong to the Ray backend
        sweep_module.main([*argv[:-2], "--gpus-per-cell", "1"])
    assert "--gpus-per-cell go with --backend ray" in capsys.readouterr().err
