"""The emulator's progress bar: shown on stderr when a run takes more than a second and stderr is a terminal (or
when asked for), with the elapsed time and an estimate of the time left; at most four redraws a second."""

from __future__ import annotations

import sys
import time


class Progress:
    """``update(done)`` after each unit of work out of ``total``; ``close()`` at the end.

    ``show``: True (always), False (never) or None (only on a terminal, once the run has taken ``delay`` seconds).
    ``update``'s ``note`` is shown after the times (a rate)."""

    def __init__(self, total: int, show: bool | None = None, label: str = "emulating KV tiles", delay: float = 1.0):
        self.total, self.label = max(int(total), 1), label
        self.delay = delay
        self.show = show
        self.auto = show is None and getattr(sys.stderr, "isatty", lambda: False)()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def update(self, done: int, note: str = "") -> None:
        now = time.monotonic()
        if not (self.show or (self.auto and now - self.t0 > self.delay)):
            return
        if done < self.total and now - self.last < 0.25:
            return
        self.last = now
        elapsed = now - self.t0
        frac = min(done / self.total, 1.0)
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        width = 30
        bar = "#" * int(width * frac) + "." * (width - int(width * frac))
        sys.stderr.write(
            f"\r  {self.label} [{bar}] {done}/{self.total}  {elapsed:6.1f}s elapsed, ETA {eta:6.1f}s {note}"
        )
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
