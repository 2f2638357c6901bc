"""How a long job (a run, a sweep) says where it is, on stderr, the same way in every engine and command.

On a terminal: one status line rewritten in place (a bar). Without one (a log file, a pipe, a CI job): a
plain line at most every EVERY seconds (the first after half that), from a heartbeat thread, so a job of
minutes is never silent (a step or an evaluation that takes long still gets its line) and never prints a line
per step. The line
says what was done (`step 12/256`), how much (`3,072 rollouts`, the job's count), the rate of that count
(`1,024 rollouts/s`), the caller's notes (the last evaluation), the time since the start and the time left
(ETA). Rate and ETA are measured from the first unit done, so they appear only once measured: from a
job's first seconds (a compile, a warm-up) they would be guesses. Nothing goes to stdout (the results').

Pure Python (the contract's rule): the engines and the executors import it; the bar is drawn here, not by
tqdm, so the simulator needs nothing more.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

EVERY = 10.0
"""Seconds between two progress lines without a terminal (ISOCOMPUTE_PROGRESS_EVERY overrides it: tests
that need a line soon set it to a fraction of a second)."""
REDRAW = 0.2
"""Seconds between two redraws of the status line on a terminal (and the heartbeat's period there)."""
BAR = 20
"""Width of the bar, in characters."""


def every() -> float:
    """EVERY, or ISOCOMPUTE_PROGRESS_EVERY where set to a positive number of seconds."""
    try:
        value = float(os.environ.get("ISOCOMPUTE_PROGRESS_EVERY", EVERY))
    except ValueError:
        return EVERY
    return value if value > 0 else EVERY


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal (False for anything that cannot say: closed or in-memory streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `2 h 10 min`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """The progress of one job: `total` units (`unit`: "step", "run"; 0: a phase that counts nothing, whose
    line says only how long it has taken), `done` of them done, and a running
    count (`count`: "rollouts", `amount` of it before the job), told by `update` and drawn on `stream`
    (default: the process's stderr when the job starts). `enabled=False` draws nothing (--quiet). Use it
    as a context manager, or call `close`: the heartbeat thread stops there.

    `say(line)` prints a line of its own (a phase: the engine started), above the status line on a
    terminal. `poll`: a function the heartbeat calls before each line for `update`'s arguments, where the
    work itself cannot call `update` (a compiled simulator run advancing its step counter in place)."""

    def __init__(self, label: str, total: int, unit: str = "step", count: str | None = None, *,
                 enabled: bool = True, done: int = 0, amount: int = 0, stream: TextIO | None = None,
                 tty: bool | None = None, period: float | None = None,
                 poll: Callable[[], dict[str, Any]] | None = None):
        self.label, self.total, self.unit, self.count = label, int(total), unit, count
        self.enabled = bool(enabled)
        self.stream = sys.stderr if stream is None else stream
        self.tty = is_terminal(self.stream) if tty is None else tty
        self.every = every() if period is None else period
        self.poll = poll
        self.done = self.start = int(done)
        self.amount = int(amount)
        self._anchor: tuple[float, int, int] | None = None  # (time, done, amount) at the first unit done
        self.notes: dict[str, str] = {}
        self.t0 = time.monotonic()
        self._drawn = 0.0  # when the status line was last drawn (terminal) or printed (log)
        self._shown = False  # a status line is on the terminal's current line
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.enabled:
            # a terminal's bar is drawn at the first update; a log's first line comes after half a period (a
            # job that started is seen alive sooner)
            self._drawn = self.t0 - (REDRAW if self.tty else self.every / 2)
            self._thread = threading.Thread(target=self._beat, name=f"progress {label}", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------------------------------------ feed
    def update(self, done: int | None = None, amount: int | None = None, **notes: str | None) -> None:
        """Units done so far, the running count so far, and notes to show (None removes one); draws on a
        terminal (at most every REDRAW seconds), else leaves the line to the heartbeat."""
        if done is not None:
            self.done = int(done)
        if amount is not None:
            self.amount = int(amount)
        if self._anchor is None and self.done > self.start:
            self._anchor = (time.monotonic(), self.done, self.amount)
        for key, value in notes.items():
            if value is None:
                self.notes.pop(key, None)
            else:
                self.notes[key] = value
        if self.enabled and self.tty and time.monotonic() - self._drawn >= REDRAW:
            self._write(self._status(), newline=False)

    def say(self, line: str) -> None:
        """A line of its own on the stream (not rate-limited: for phases, a handful per job)."""
        if self.enabled:
            self._write(line, newline=True, own=True)

    # ------------------------------------------------------------------------------------------------ text
    def line(self) -> str:
        """The status as one line: label, units, count, rate, notes, elapsed and (once measured) ETA."""
        now = time.monotonic()
        parts = [] if self.total <= 0 else [f"{self.unit} {self.done}/{self.total}" if self.unit != "run" else
                                            f"{self.done}/{self.total} runs"]
        t, done, amount = self._anchor or (now, self.done, self.amount)
        since = now - t  # the rate and the ETA are measured from the first unit done (compiles and warm-up
        # before it say nothing of the pace), so neither is shown before a second measurement
        if self.count:
            parts.append(f"{self.amount:,} {self.count}")
            if since > 0 and self.amount > amount:
                parts.append(f"{(self.amount - amount) / since:,.0f} {self.count}/s")
        parts += [v for v in self.notes.values() if v]
        tail = duration(now - self.t0)
        if since > 0 and self.done > done and self.done < self.total:
            tail += f", ETA {duration(since / (self.done - done) * (self.total - self.done))}"
        return f"{self.label}: {', '.join(parts)} ({tail})" if parts else f"{self.label} ({tail})"

    def _status(self) -> str:
        if not self.tty:
            return self.line()
        frac = min(1.0, self.done / self.total) if self.total > 0 else 0.0
        full = int(frac * BAR)
        return f"[{'#' * full}{'.' * (BAR - full)}] {self.line()}"

    # ------------------------------------------------------------------------------------------- drawing
    def _write(self, text: str, newline: bool, own: bool = False) -> None:
        with self._lock:
            if self._stop.is_set() and not own:
                return
            try:
                if self.tty:
                    # \r and erase-to-end: the status line is replaced, a line of our own goes above it
                    out = f"\r\x1b[K{text}" + ("\n" if newline else "")
                    if own and self._shown:
                        out += f"\r\x1b[K{self._status()}"
                    self._shown = self._shown if own else True
                else:
                    out = text + "\n"
                self.stream.write(out)
                self.stream.flush()
            except (ValueError, OSError):  # the stream was closed under us (a test runner's, a pipe)
                self._stop.set()
                return
            if not own:
                self._drawn = time.monotonic()

    def _beat(self) -> None:
        """The heartbeat: a line whenever EVERY seconds (a terminal: REDRAW) passed without one."""
        period = REDRAW if self.tty else self.every
        while not self._stop.wait(min(period, 1.0)):
            if time.monotonic() - self._drawn >= period:
                if self.poll is not None:
                    try:
                        self.update(**self.poll())
                    except Exception:  # noqa: BLE001 - a progress line is never worth failing the work for
                        continue
                self._write(self._status(), newline=False)

    def close(self) -> None:
        """Stop the heartbeat; on a terminal, leave the last status on its line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self.enabled and self.tty and self._shown:
            with self._lock:
                try:
                    self.stream.write(f"\r\x1b[K{self._status()}\n")
                    self.stream.flush()
                except (ValueError, OSError):
                    pass
            self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
