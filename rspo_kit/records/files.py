"""Reading run records so that a damaged one says which file it is and what is wrong with it.

Readers of run records (``metrics.jsonl``, turn tables, ``final_episodes.parquet``, ``start.json``,
a notebook's results, a checkpoint's ``state.json`` and ``replay.json.gz``, a run's ``config.json``)
go through these. A file that cannot be parsed raises ``RecordError``: its message is
``<path>[, line N]: <what is wrong>``. A missing file stays ``FileNotFoundError`` (it names the path
already). ``RecordError`` is a ``ValueError``, so callers that tolerate a half-written file (a live
run's metrics) go on doing so.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
>>> _ = path.write_text('{"iteration": 0}\\n{"iteration": 1, "loss": \\n')
>>> read_jsonl(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
rspo_kit.records.files.RecordError: .../metrics.jsonl, line 2: not valid JSON: Expecting value (column 26)
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")


class RecordError(ValueError):
    """A run record that cannot be read: ``path``, the ``line`` where that applies, and the ``problem``."""

    def __init__(self, path: str | Path, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = Path(path), problem, line
        super().__init__(f"{self.path}{f', line {line}' if line else ''}: {problem}")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(path, f"not UTF-8 text ({err.reason} at byte {err.start})") from None


def _json_error(path: Path, err: json.JSONDecodeError, line: int | None = None) -> RecordError:
    return RecordError(path, f"not valid JSON: {err.msg} (column {err.colno})", line or err.lineno)


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``."""
    path = Path(path)
    text = _text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _json_error(path, err) from None


def read_jsonl(path: str | Path) -> list[dict]:
    """The JSON objects of ``path``, one a line (blank lines skipped); line numbers count from 1."""
    path = Path(path)
    rows = []
    for number, line in enumerate(_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise _json_error(path, err, line=number) from None
        if not isinstance(row, dict):
            raise RecordError(path, f"not a JSON object but a {type(row).__name__}: {line[:80]!r}", number)
        rows.append(row)
    return rows


def read_json_gz(path: str | Path) -> Any:
    """The JSON document in the gzip file ``path`` (a checkpoint's stored trajectories)."""
    path = Path(path)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise
    except json.JSONDecodeError as err:
        raise _json_error(path, err) from None
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as err:
        raise RecordError(path, f"truncated or damaged gzip file ({type(err).__name__}: {err})") from None


def read_parquet(path: str | Path) -> pd.DataFrame:
    """The parquet table in ``path`` (turn tables, final episodes)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise RecordError(path, f"not a readable parquet table ({type(err).__name__}: {err})") from None


def require_keys(record: Any, keys: Iterable[str], path: str | Path) -> Mapping:
    """``record`` (read from ``path``) if it is a JSON object with every one of ``keys``."""
    if not isinstance(record, Mapping):
        raise RecordError(path, f"a JSON object was expected, not a {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise RecordError(
            path, f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
        )
    return record


def read_record(path: str | Path, parse: Callable[[Any], T]) -> T:
    """``parse(read_json(path))``, with what ``parse`` rejects (an unknown or mistyped field of a
    ``config.json``: ``TypeError``, ``KeyError``, ``ValueError``) named with the path."""
    data = read_json(path)
    try:
        return parse(data)
    except RecordError:
        raise
    except (TypeError, KeyError, ValueError) as err:
        problem = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        raise RecordError(path, problem) from err
