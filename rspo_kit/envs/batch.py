"""Step many environments at once, in worker processes, without ever hanging the batch.

``BatchRunner`` owns ``n_workers`` processes; slot ``i`` of a batch lives in worker ``i % n_workers``.
Every call sends each worker one message with all of its slots and waits for one reply, so the
real ALFWorld engine (tens of ms per step) runs on all cores. A worker that dies, or does not answer
within ``timeout_s``, is killed and restarted; every episode it held ends as a failure
(``done=True, won=False, info["crashed"]=True``, and ``info["error"]`` says why: the timeout, or the
worker's exit code or signal) and the rest of the batch carries on. An exception raised inside one
env (``SystemExit`` included), or a ``reset``/``step`` that returns something other than an
``Observation``/``StepResult`` (``None``, say), ends only that env's episode, the same way, with the
traceback or what was returned as its ``info["error"]``. ``reset_info`` holds each slot's progress and
anchor after ``reset``, and every step's info has both (``rspo_kit.envs.base.state_info``'s defaults
where the env gives none).

``n_workers=0`` runs everything in this process (same API; handy in tests and for fast engines).
There each env call gets ``timeout_s`` too, enforced with ``SIGALRM`` on the main thread: it stops
Python code and blocking calls such as ``sleep``, not a C call that never returns; off the main
thread there is none, and a timer armed already (pytest-timeout's) rules when it is the stricter.
An env that calls ``os._exit`` or crashes the interpreter ends this process with it, with no message:
nothing in-process can catch that. Run envs you do not trust with ``n_workers >= 1``, where the
same fault ends one worker and its episodes say ``worker 0 lost (exit code 3)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing as mp
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rspo_kit.envs.base import Observation, StepResult, Task, TextEnv, reset_info, state_info
from rspo_kit.envs.registry import _entry

_CRASH_TEXT = "The environment crashed; the episode ends as a failure."


def crashed_result(error: str) -> StepResult:
    return StepResult(
        Observation(_CRASH_TEXT, (), ""), True, False, 0.0, False, {"crashed": True, "error": error}
    )


class _EnvTimeout(BaseException):
    """An in-process env call ran past ``timeout_s``. A ``BaseException``, so that an env's own
    ``except Exception`` cannot swallow it and go on hanging."""


class _Alarm:
    """Per-call deadlines for a batch of in-process env calls: ``arm()`` before a call, ``disarm()``
    after it; a call still running ``seconds`` after ``arm()`` gets ``_EnvTimeout`` (``SIGALRM``).

    The handler is installed once per batch, so a call costs two ``setitimer`` calls (about 2 µs). Off
    the main thread, or without ``setitimer``, it does nothing. A timer armed before (pytest-timeout's)
    keeps its deadline: a call's alarm never goes past it, that one calls its handler, and it is re-armed
    with the time it has left when the batch ends.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds, self.armed, self.outer_fires = seconds, False, False
        self.active = (
            0 < seconds < math.inf
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )

    def __enter__(self) -> _Alarm:
        if self.active:
            delay, self.outer_interval = signal.getitimer(signal.ITIMER_REAL)
            self.outer_deadline = time.monotonic() + delay if delay else None
            self.outer_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        return self

    def __exit__(self, *exc) -> None:
        if self.active:
            self.disarm()
            # None: a handler installed outside Python, which Python cannot reinstate
            signal.signal(
                signal.SIGALRM, signal.SIG_DFL if self.outer_handler is None else self.outer_handler
            )
            if self.outer_deadline is not None:
                left = max(self.outer_deadline - time.monotonic(), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, self.outer_interval)

    def arm(self) -> None:
        if self.active:
            delay = self.seconds
            if self.outer_deadline is not None:
                delay = min(delay, max(self.outer_deadline - time.monotonic(), 1e-3))
            self.outer_fires, self.armed = delay < self.seconds, True
            signal.setitimer(signal.ITIMER_REAL, delay)

    def disarm(self) -> None:
        if self.active:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _on_alarm(self, signum, frame) -> None:
        if not self.armed:  # fired just as the call returned: too late to matter
            return
        self.armed = False
        if self.outer_fires:
            if callable(self.outer_handler):
                self.outer_handler(signum, frame)
            return
        raise _EnvTimeout(f"the env gave no answer within {self.seconds:g}s")


def _checked(env: TextEnv, method: str, value: Any, kind: type) -> Any:
    """``value`` if it is a ``kind`` (a ``StepResult`` also needs an ``Observation`` and an info dict);
    otherwise a ``TypeError`` naming the env, the method and what it returned."""
    ok = isinstance(value, kind)
    if ok and kind is StepResult:
        ok = isinstance(value.obs, Observation) and isinstance(value.info, dict)
    if not ok:
        raise TypeError(f"{type(env).__name__}.{method} returned {value!r:.200}, not a {kind.__name__}")
    return value


def _with_state_info(result: StepResult) -> StepResult:
    """``result`` with the protocol's defaults for a missing progress or anchor (``state_info``); the
    same object when it has both."""
    if "progress" in result.info and "anchor" in result.info:
        return result
    return dataclasses.replace(result, info=state_info(result.info, result.obs))


class _Slots:
    """The envs of one worker, keyed by slot. Runs in the worker, or in-process for n_workers=0 where
    each env call runs under ``timeout_s``."""

    def __init__(
        self, make: Callable[..., TextEnv], kwargs: Mapping[str, Any], timeout_s: float = 0.0
    ) -> None:
        self.make, self.kwargs, self.timeout_s = make, dict(kwargs), timeout_s
        self.envs: dict[int, TextEnv] = {}

    def _run(self, op: str, item: tuple) -> Any:
        slot = item[0]
        if op == "reset":
            if slot not in self.envs:
                self.envs[slot] = self.make(**self.kwargs)
            env = self.envs[slot]
            obs = _checked(env, "reset", env.reset(item[1]), Observation)
            return obs, reset_info(env, obs)
        if slot not in self.envs:  # its env failed before, or this worker is a restarted one
            raise LookupError(f"slot {slot} has no running episode")
        env = self.envs[slot]
        if op == "step":
            return _with_state_info(_checked(env, "step", env.step(item[1]), StepResult))
        if op == "expert":
            return env.expert_action()
        raise ValueError(f"unknown op {op!r}")

    def handle(self, op: str, items: list) -> list:
        out = []
        with _Alarm(self.timeout_s) as alarm:
            for item in items:
                try:
                    try:
                        alarm.arm()
                        value = self._run(op, item)
                    finally:  # an alarm that fires here still lands in the except below
                        alarm.disarm()
                    out.append((item[0], True, value))
                except (Exception, SystemExit, _EnvTimeout) as err:
                    self.envs.pop(item[0], None)  # a broken env is rebuilt at its next reset
                    why = str(err) if isinstance(err, _EnvTimeout) else traceback.format_exc(limit=4)
                    out.append((item[0], False, why))
        return out


def _sendable(replies: list) -> list:
    """``replies`` with each value that cannot be pickled replaced by a failure that says so."""
    out = []
    for slot, ok, value in replies:
        try:
            pickle.dumps(value)
            out.append((slot, ok, value))
        except Exception as err:
            out.append((slot, False, f"the env's result could not be sent from its worker: {err!r}"))
    return out


def _worker_main(conn, make, kwargs) -> None:
    """A worker's loop: one reply per message, a list of ``(slot, ok, value)``; a failure of the loop
    itself is sent as its traceback (a ``str``) before the worker ends."""
    slots = _Slots(make, kwargs)
    while True:
        try:
            op, items = conn.recv()
        except EOFError:
            return
        if op == "close":
            return
        try:
            replies = slots.handle(op, items)
            try:
                conn.send(replies)
            except (pickle.PicklingError, TypeError, AttributeError):  # pickled first: nothing was sent
                conn.send(_sendable(replies))
        except Exception:
            with contextlib.suppress(Exception):
                conn.send(traceback.format_exc(limit=4))
            raise


def _exit_cause(exitcode: int | None) -> str:
    """How a worker ended, from ``Process.exitcode``: 'exit code 3', 'signal 9 (SIGKILL)'."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"signal {-exitcode} ({signal.Signals(-exitcode).name})"
        return f"signal {-exitcode}"
    return f"exit code {exitcode}"


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
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.make = _entry(env).make
        self.env_kwargs = dict(env_kwargs or {})
        self.n_workers, self.timeout_s = n_workers, timeout_s
        # fork keeps envs registered in a notebook visible to the workers; spawn elsewhere.
        method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self._ctx = mp.get_context(method)
        self._local = _Slots(self.make, self.env_kwargs, timeout_s) if n_workers == 0 else None
        self._workers: list = [None] * n_workers
        self._dead: dict[int, str] = {}  # slot -> why its episode ended early
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

    def _kill(self, w: int, wait_s: float = 1.0) -> str:
        """Stop worker ``w``, after ``wait_s`` for one that is ending on its own (its exit code is set by
        then); returns how it had ended (``_exit_cause``)."""
        proc, conn = self._workers[w]
        proc.join(timeout=wait_s)
        cause = _exit_cause(proc.exitcode)
        proc.kill()
        proc.join(timeout=5)
        conn.close()
        self._workers[w] = None
        self.restarts += 1
        return cause

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
                    self._kill(w, wait_s=0.0)
                    reason = f"worker {w} gave no answer within {self.timeout_s:g}s and was killed"
                elif isinstance(reply := conn.recv(), str):  # the worker's own loop failed
                    reason = f"worker {w} lost ({self._kill(w)}): {reply}"
                else:
                    results.update((slot, (ok, value)) for slot, ok, value in reply)
                    continue
            except (EOFError, OSError) as err:
                reason = f"worker {w} lost ({self._kill(w)})" + (
                    f": {type(err).__name__}: {err}" if str(err) else ""
                )
            results.update((item[0], (False, reason)) for item in batch)
            # every episode the worker held is gone with it, whether it was in this call or not
            self._dead.update(dict.fromkeys(range(w, self._max_slot + 1, self.n_workers), reason))
        return results

    # ------------------------------------------------------------------ API

    def reset(self, tasks: Sequence[Task]) -> list[Observation | None]:
        """Start one episode per task in slots ``0..len(tasks)-1``; ``None`` where the env failed."""
        self._max_slot = max(self._max_slot, len(tasks) - 1)
        self._dead = {}
        results = self._call("reset", [(i, task) for i, task in enumerate(tasks)])
        self.reset_info = {}
        out: list[Observation | None] = []
        for i in range(len(tasks)):
            ok, value = results[i]
            if ok:
                out.append(value[0])
                self.reset_info[i] = value[1]
            else:
                self._dead[i] = str(value)
                out.append(None)
        return out

    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        """Step the given slots. A slot whose env or worker failed returns a crashed, failed final step."""
        live = [(slot, action) for slot, action in actions.items() if slot not in self._dead]
        results = self._call("step", live) if live else {}
        out: dict[int, StepResult] = {}
        for slot in actions:
            ok, value = results.get(
                slot, (False, f"this episode's env failed earlier: {self._dead.get(slot)}")
            )
            out[slot] = value if ok else crashed_result(str(value))
            if not ok:
                self._dead.setdefault(slot, str(value))
        return out

    def expert(self, slots: Sequence[int]) -> dict[int, str | None]:
        """The env's expert action per slot (``None`` where it has none, it failed or the slot is dead)."""
        live = [(slot,) for slot in slots if slot not in self._dead]
        results = self._call("expert", live) if live else {}
        for slot, (ok, value) in results.items():
            if not ok:  # the env is gone (an exception, a timeout or its worker): so is its episode
                self._dead.setdefault(slot, str(value))
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
