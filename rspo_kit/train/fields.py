"""A config field's declared type: whether a value holds it, and a value parsed as it.

``check_types`` runs in every config dataclass's ``__post_init__`` (``rspo_kit.train.config``), so a
value from config.json, code or an override is checked alike; ``require`` names a field whose value
breaks a rule beyond its type; ``parse_field`` reads an override's text (the CLI's ``key=value``, a
notebook parameter) as the field's type.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The types a field's annotation allows: ``int | None`` -> ``(int, NoneType)``."""
    union = isinstance(hint, types.UnionType) or get_origin(hint) is Union
    return get_args(hint) if union else (hint,)


def _holds(value: Any, kind: Any) -> bool:
    """``value`` is a ``kind``: bools are not numbers, integers are numbers, numbers are finite."""
    if get_origin(kind) is Literal:
        return any(value == v and type(value) is type(v) for v in get_args(kind))
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind is type(None):
        return value is None
    if get_origin(kind) is tuple:  # tuple[str, ...]: a tuple whose items are all of the item type
        return isinstance(value, tuple) and all(_holds(v, get_args(kind)[0]) for v in value)
    return isinstance(value, kind) if isinstance(kind, type) else True


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}
_TYPE_NAMES |= {tuple[str, ...]: "a tuple of names"}


def check_types(obj: Any) -> None:
    """Every field holds a value of its declared type (floats finite, ``Literal`` fields one of their
    values), whether it came from config.json, code or an override."""
    hints = get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, kinds = getattr(obj, f.name), _kinds(hints[f.name])
        if any(_holds(value, kind) for kind in kinds):
            continue
        where = f"{type(obj).__name__}.{f.name} = {value!r}"
        allowed = [v for kind in kinds if get_origin(kind) is Literal for v in get_args(kind)]
        if allowed:
            allowed += [None] if type(None) in kinds else []
            raise ValueError(f"{where} is not allowed; choose one of {allowed}")
        what = " or ".join(_TYPE_NAMES.get(kind, getattr(kind, "__name__", str(kind))) for kind in kinds)
        raise ValueError(f"{where}: must be {what.replace('NoneType', 'None')}")


def require(obj: Any, name: str, ok: bool, what: str) -> None:
    """Unless ``ok``, a ValueError naming ``obj``'s field ``name``, its value and what it must be."""
    if not ok:
        raise ValueError(f"{type(obj).__name__}.{name} = {getattr(obj, name)!r}: must be {what}")


_WHAT = {bool: "true or false", int: "an integer", float: "a number", type(None): "none"}
_WHAT |= {tuple[str, ...]: "names, comma-separated"}


def parse_field(dotted: str, value: Any, hint: Any) -> Any:
    """A value for a field of type ``hint``, or a ValueError naming ``dotted``.

    Text is parsed as the field's type (``int | None`` accepts "none"; a boolean is exactly one of
    true/false/1/0/yes/no in any case; a tuple of names is comma-separated, "" none); any other value
    must be of the type already (an integer is a number, 0 and 1 are booleans, a list of names is a
    tuple), so that a notebook's 2.5 never becomes an iteration count. Literal fields take any value
    here: ``validate()`` names their allowed values.

    >>> parse_field("train.max_env_steps", "none", int | None), parse_field("policy.lora", "Yes", bool | None)
    (None, True)
    >>> parse_field("policy.sft_exclude_kinds", "a, b", tuple[str, ...]), parse_field("x.y", ["a"], tuple[str, ...])
    (('a', 'b'), ('a',))
    >>> parse_field("algo.lr", "abc", float)
    Traceback (most recent call last):
    ValueError: algo.lr = 'abc': must be a number
    >>> parse_field("policy.warmstart", "on", bool)
    Traceback (most recent call last):
    ValueError: policy.warmstart = 'on': must be true or false
    >>> parse_field("train.iterations", 2.5, int)
    Traceback (most recent call last):
    ValueError: train.iterations = 2.5: must be an integer
    """
    kinds = _kinds(hint)
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("none", "null") and type(None) in kinds:
        return None
    if any(get_origin(kind) is Literal for kind in kinds):
        return value
    if any(get_origin(kind) is tuple for kind in kinds):
        names = value.split(",") if isinstance(value, str) else value
        if isinstance(names, list | tuple) and all(isinstance(n, str) for n in names):
            return tuple(n.strip() for n in names if n.strip())
    if text is None:
        for kind in kinds:
            if kind is bool and type(value) is int and value in (0, 1):
                return bool(value)
            if kind is float and type(value) is int:
                return float(value)
            if (kind is float and type(value) is float) or _holds(value, kind):
                return value  # a float's range (finite, > 0, ...) is validate()'s to name
    else:
        for kind in kinds:
            if kind is str:
                return value
            if kind is bool and text in ("true", "false", "1", "0", "yes", "no"):
                return text in ("true", "1", "yes")
            if kind in (int, float):
                try:
                    return kind(value)
                except ValueError:
                    pass
    what = " or ".join(_WHAT.get(kind, getattr(kind, "__name__", str(kind))) for kind in kinds)
    raise ValueError(f"{dotted} = {value!r}: must be {what}")
