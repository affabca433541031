"""Progress bars for the long calls: tqdm's when it is installed, nothing otherwise."""
from __future__ import annotations

from typing import Callable, Optional

ProgressFactory = Callable[[str, str], Callable[[int, int], None]]


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


class _Bar:
    """A tqdm bar moved to (done, total) by the engine; closed when done reaches total."""

    def __init__(self, tqdm, label: str, unit: str) -> None:
        self._bar = tqdm(desc=label, unit=unit, total=None, leave=False)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.disable:
            return
        if total > 0 and self._bar.total != total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)
        if total > 0 and done >= total:
            self._bar.close()


def bars(enabled: bool) -> Optional[ProgressFactory]:
    """(label, unit) -> a (done, total) callable showing a bar, or None (no tqdm, or off)."""
    tqdm = _tqdm() if enabled else None
    if tqdm is None:
        return None
    return lambda label, unit: _Bar(tqdm, label, unit)


def bar(enabled: bool, label: str, unit: str) -> Optional[Callable[[int, int], None]]:
    """One bar (see bars)."""
    factory = bars(enabled)
    return factory(label, unit) if factory else None
