"""Checks of the public calls' arguments that are not token ids (the module checks those):
a value of the wrong type, or an integer the engine's C++ type cannot hold, is an
sps.InputError naming the argument (pybind11's own TypeError would print the binding's
signature instead, without the name)."""
from __future__ import annotations

import numbers
import operator
import os
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any, List, Optional

import numpy as np

from . import _sps


def _refuse(name: str, expected: str, value: Any):
    shown = " ".join(reprlib.repr(value).split())  # short, and on one line
    raise _sps.InputError(f"{name}: expected {expected}, got {type(value).__name__} {shown}")


INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)
UINT64 = (0, 2**64 - 1)


def integer(name: str, value: Any, bounds=INT64) -> int:
    """An int (numpy integers too; not a bool, not a float) within bounds (inclusive): by
    default the engine's int64."""
    if isinstance(value, (bool, float)):
        _refuse(name, "an integer", value)
    try:
        value = operator.index(value)
    except TypeError:
        _refuse(name, "an integer", value)
    low, high = bounds
    if not low <= value <= high:
        raise _sps.InputError(f"{name}: expected an integer in [{low}, {high}], got {value}")
    return value


def optional_integer(name: str, value: Any, bounds=INT64) -> Optional[int]:
    return None if value is None else integer(name, value, bounds)


def seed(name: str, value: Any) -> int:
    """A random seed: an integer in [0, 2**64)."""
    return integer(name, value, UINT64)


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


def optional_text(name: str, value: Any) -> Optional[str]:
    return None if value is None else text(name, value)


def sequence(name: str, values: Any, expected: str = "a list") -> list:
    """A list of the items of a list, tuple or other iterable (not of a str or bytes)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        _refuse(name, expected, values)
    return list(values)


def texts(name: str, values: Any) -> List[str]:
    """One str (a list of one), or a sequence of them."""
    if isinstance(values, str):
        return [values]  # one stop string, one include pattern
    return [text(f"{name}[{i}]", v) for i, v in enumerate(sequence(name, values))]


def integers(name: str, values: Any, bounds=INT64) -> List[int]:
    return [integer(f"{name}[{i}]", v, bounds) for i, v in enumerate(sequence(name, values))]


def path(name: str, value: Any) -> str:
    """A file or folder: a str, bytes or os.PathLike (pathlib.Path)."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        _refuse(name, "a path (str or os.PathLike)", value)
    return os.fsdecode(value)


def optional_path(name: str, value: Any) -> Optional[str]:
    return None if value is None else path(name, value)


def paths(name: str, values: Any) -> List[str]:
    """One path (a list of one), or a sequence of them."""
    if isinstance(values, (str, bytes, os.PathLike)):
        return [path(name, values)]
    listed = sequence(name, values, "a path or a list of paths")
    return [path(f"{name}[{i}]", v) for i, v in enumerate(listed)]


def mapping(name: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        _refuse(name, "a dict", value)
    return value


def callable_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        _refuse(name, "a callable or None", value)
    return value
