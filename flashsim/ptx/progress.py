"""A launch's progress: blocks done of all, simulated warp instructions per second and the time left, on stderr
(flashsim.emulator.progress draws the line), for a launch in this process or over an executor's workers.

``launch(progress=...)``: None shows it when stderr is a terminal and the launch has run past ``DELAY`` seconds,
True always, False never; a callable is called instead with (blocks done, blocks in all, seconds so far)."""

from __future__ import annotations

from ..emulator.progress import Progress

__all__ = ["progress_display", "DELAY"]

DELAY = 3.0  # seconds a launch runs before the automatic line appears: a short launch prints nothing


class _Display:
    def __init__(self, progress, total: int, label: str):
        self.callback = progress if callable(progress) else None
        show = None if progress is None else bool(progress)
        self.bar = None if self.callback is not None or show is False else Progress(total, show, label, DELAY)

    def __call__(self, done: int, total: int, seconds: float, instructions: int) -> None:
        if self.callback is not None:
            self.callback(done, total, seconds)
        elif self.bar is not None:
            rate = instructions / seconds if seconds > 0 else 0.0
            self.bar.update(done, f"{rate:,.0f} warp instructions/s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_display(progress, total: int, label: str = "simulating blocks") -> _Display:
    """The progress reporter of a launch of ``total`` blocks: called with (blocks done, blocks in all, seconds,
    warp instructions so far), then ``close()``."""
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError(f"progress must be None, True, False or a callable, got {type(progress).__name__}")
    return _Display(progress, total, label)
