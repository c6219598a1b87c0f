"""Step many environments at once, in worker processes, without ever hanging the batch.

``BatchRunner`` owns ``n_workers`` processes; slot ``i`` of a batch lives in worker ``i % n_workers``.
Every call sends each worker one message with all of its slots and waits for one reply, so the
real ALFWorld engine (tens of ms per step) runs on all cores. A worker that dies, or does not answer
within ``timeout_s``, is killed and restarted; the episodes it held end as failures
(``done=True, won=False, info["crashed"]=True``) and the rest of the batch carries on. An exception
raised inside one env ends only that env's episode, the same way.

``n_workers=0`` runs everything in this process (same API; handy in tests and for fast engines).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rspo_kit.envs.base import Observation, StepResult, Task, TextEnv
from rspo_kit.envs.registry import _entry

_CRASH_TEXT = "The environment crashed; the episode ends as a failure."


def crashed_result(error: str) -> StepResult:
    return StepResult(
        Observation(_CRASH_TEXT, (), ""), True, False, 0.0, False, {"crashed": True, "error": error}
    )


class _Slots:
    """The envs of one worker, keyed by slot. Runs in the worker (or in-process for n_workers=0)."""

    def __init__(self, make: Callable[..., TextEnv], kwargs: Mapping[str, Any]) -> None:
        self.make, self.kwargs = make, dict(kwargs)
        self.envs: dict[int, TextEnv] = {}

    def _env(self, slot: int) -> TextEnv:
        if slot not in self.envs:
            self.envs[slot] = self.make(**self.kwargs)
        return self.envs[slot]

    def handle(self, op: str, items: list) -> list:
        out = []
        for item in items:
            slot = item[0]
            try:
                env = self._env(slot)
                if op == "reset":
                    obs = env.reset(item[1])
                    out.append((slot, True, (obs, dict(getattr(env, "info", {})))))
                elif op == "step":
                    out.append((slot, True, env.step(item[1])))
                elif op == "expert":
                    out.append((slot, True, env.expert_action()))
                else:
                    raise ValueError(f"unknown op {op!r}")
            except Exception:
                self.envs.pop(slot, None)  # a broken env is rebuilt at its next reset
                out.append((slot, False, traceback.format_exc(limit=4)))
        return out


def _worker_main(conn, make, kwargs) -> None:
    slots = _Slots(make, kwargs)
    while True:
        try:
            op, items = conn.recv()
        except EOFError:
            return
        if op == "close":
            return
        conn.send(slots.handle(op, items))


class BatchRunner:
    """Many envs of one kind, stepped together. See the module docstring."""

    def __init__(
        self,
        env: str,
        n_workers: int = 2,
        env_kwargs: Mapping[str, Any] | None = None,
        timeout_s: float = 300.0,
        start_method: str | None = None,
    ) -> None:
        if n_workers < 0:
            raise ValueError(f"n_workers must be >= 0, got {n_workers}")
        self.make = _entry(env).make
        self.env_kwargs = dict(env_kwargs or {})
        self.n_workers, self.timeout_s = n_workers, timeout_s
        # fork keeps envs registered in a notebook visible to the workers; spawn elsewhere.
        method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self._ctx = mp.get_context(method)
        self._local = _Slots(self.make, self.env_kwargs) if n_workers == 0 else None
        self._workers: list = [None] * n_workers
        self._dead: set[int] = set()
        self._max_slot = -1
        self.reset_info: dict[int, dict] = {}
        self.restarts = 0

    # ------------------------------------------------------------------ workers

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self.make, self.env_kwargs), daemon=True)
        proc.start()
        child.close()
        self._workers[w] = (proc, parent)

    def _kill(self, w: int) -> None:
        proc, conn = self._workers[w]
        proc.kill()
        proc.join(timeout=5)
        conn.close()
        self._workers[w] = None
        self.restarts += 1

    def _call(self, op: str, items: Sequence[tuple]) -> dict[int, tuple[bool, Any]]:
        """Send ``items`` (tuples starting with a slot) to their workers; gather ``slot -> (ok, value)``."""
        if self._local is not None:
            return {slot: (ok, value) for slot, ok, value in self._local.handle(op, list(items))}
        by_worker: dict[int, list] = {}
        for item in items:
            by_worker.setdefault(item[0] % self.n_workers, []).append(item)
        for w, batch in by_worker.items():
            if self._workers[w] is None:
                self._start(w)
            with contextlib.suppress(BrokenPipeError, OSError):  # a dead worker shows up below as no reply
                self._workers[w][1].send((op, batch))
        results: dict[int, tuple[bool, Any]] = {}
        for w, batch in by_worker.items():
            conn = self._workers[w][1]
            try:
                if not conn.poll(self.timeout_s):
                    raise TimeoutError(f"worker {w} gave no answer within {self.timeout_s:.0f}s")
                for slot, ok, value in conn.recv():
                    results[slot] = (ok, value)
            except (EOFError, OSError, TimeoutError) as err:
                reason = f"worker {w} lost: {type(err).__name__}: {err}"
                self._kill(w)
                for item in batch:
                    results[item[0]] = (False, reason)
                # Episodes the dead worker held but that were not in this call are lost as well.
                self._dead.update(s for s in range(w, self._max_slot + 1, self.n_workers) if s not in results)
        return results

    # ------------------------------------------------------------------ API

    def reset(self, tasks: Sequence[Task]) -> list[Observation | None]:
        """Start one episode per task in slots ``0..len(tasks)-1``; ``None`` where the env failed."""
        self._max_slot = max(self._max_slot, len(tasks) - 1)
        self._dead = set()
        results = self._call("reset", [(i, task) for i, task in enumerate(tasks)])
        self.reset_info = {}
        out: list[Observation | None] = []
        for i in range(len(tasks)):
            ok, value = results[i]
            if ok:
                out.append(value[0])
                self.reset_info[i] = value[1]
            else:
                self._dead.add(i)
                out.append(None)
        return out

    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        """Step the given slots. A slot whose worker died returns a crashed, failed final step."""
        live = [(slot, action) for slot, action in actions.items() if slot not in self._dead]
        results = self._call("step", live) if live else {}
        out: dict[int, StepResult] = {}
        for slot in actions:
            ok, value = results.get(slot, (False, "the worker holding this episode crashed earlier"))
            out[slot] = value if ok else crashed_result(str(value))
            if not ok:
                self._dead.add(slot)
        return out

    def expert(self, slots: Sequence[int]) -> dict[int, str | None]:
        """The env's expert action per slot (``None`` where it has none or the slot is dead)."""
        live = [(slot,) for slot in slots if slot not in self._dead]
        results = self._call("expert", live) if live else {}
        return {slot: results[slot][1] if results.get(slot, (False,))[0] else None for slot in slots}

    def close(self) -> None:
        for w, worker in enumerate(self._workers):
            if worker is None:
                continue
            proc, conn = worker
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send(("close", []))
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
            conn.close()
            self._workers[w] = None

    def __enter__(self) -> BatchRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
