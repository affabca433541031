"""Checks of the public calls' scalar arguments: a value of the wrong type is an
sps.InputError naming the argument (pybind11's own TypeError would print the binding's
signature instead, without the name)."""
from __future__ import annotations

import numbers
import operator
from typing import Any, Iterable, List, Optional

import numpy as np

from . import _sps


def _refuse(name: str, expected: str, value: Any):
    raise _sps.InputError(f"{name}: expected {expected}, got {type(value).__name__} {value!r}")


def integer(name: str, value: Any) -> int:
    """An int (numpy integers too; not a bool, not a float)."""
    if isinstance(value, (bool, float)):
        _refuse(name, "an integer", value)
    try:
        return operator.index(value)
    except TypeError:
        _refuse(name, "an integer", value)


def optional_integer(name: str, value: Any) -> Optional[int]:
    return None if value is None else integer(name, value)


def number(name: str, value: Any) -> float:
    """A real number (int, float, numpy scalars; not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _refuse(name, "a number", value)
    return float(value)


def flag(name: str, value: Any) -> bool:
    """True or False (numpy's bool too)."""
    if not isinstance(value, (bool, np.bool_)):
        _refuse(name, "True or False", value)
    return bool(value)


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        _refuse(name, "a str", value)
    return value


def texts(name: str, values: Iterable[Any]) -> List[str]:
    if isinstance(values, str):
        return [values]  # one stop string
    return [text(f"{name}[{i}]", v) for i, v in enumerate(values)]


def integers(name: str, values: Iterable[Any]) -> List[int]:
    return [integer(f"{name}[{i}]", v) for i, v in enumerate(values)]
