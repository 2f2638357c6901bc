"""The output and warning policy of every command: `--json` prints exactly one JSON object on stdout, and
everything else a command says (notes, warnings, progress) goes to stderr as plain lines.

This module owns the state behind that policy, and changes it only through its functions: where `emit_json`
writes (`json_stream`, entered by the root group of isocompute/cli.py while it sends every other write to
stdout to stderr), whether third-party warnings are shown (`set_verbose`, the root's -v) and what an
interrupted command says it kept (`set_interrupt_note`, read by the root's one interrupt line).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import click

OUR_PACKAGES = ("isocompute", "studies", "sandbox", "llm_backend", "paper_figs", "benchmarks", "tests")
"""Folders whose warnings are always shown; those raised in other code only with -v."""

_json_streams: list[TextIO] = []
"""Where `emit_json` writes: the innermost `json_stream`, else sys.stdout."""
_verbose: list[bool] = [False]
"""Whether third-party warnings are shown (`set_verbose`)."""
_interrupt_note: list[str | None] = [None]
"""What the running command has kept should it be interrupted now (`set_interrupt_note`)."""


@contextlib.contextmanager
def json_stream(stream: TextIO) -> Iterator[None]:
    """Inside, `emit_json` writes to `stream` (the real stdout) whatever sys.stdout has been pointed at, so
    third-party output (vLLM's log lines, C-level prints) sent to stderr meanwhile cannot mix into the one
    JSON object."""
    _json_streams.append(stream)
    try:
        yield
    finally:
        _json_streams.pop()


def emit_json(obj: Any) -> None:
    """Print `obj` as the command's one JSON object (studies.files.jsonable, strict: NaN/inf become null)."""
    from studies.files import jsonable

    stream = _json_streams[-1] if _json_streams else sys.stdout
    stream.write(json.dumps(jsonable(obj), allow_nan=False) + "\n")
    stream.flush()


def set_verbose(on: bool) -> None:
    """The root command's -v: show third-party warnings too (`shown_warning`)."""
    _verbose[:] = [bool(on)]


def set_interrupt_note(note: str | None) -> None:
    """What an interrupt of the running command would leave behind, in its own words ("5 of 32 runs
    finished and kept in DIR; rerun to resume"), or None for the words of its kind of command; the root
    group clears it before each command."""
    _interrupt_note[:] = [note]


def interrupt_note() -> str | None:
    """The note `set_interrupt_note` left, if any."""
    return _interrupt_note[0]


def shown_warning(category: type[Warning], filename: str | None) -> bool:
    """Whether a warning reaches the user: never a DeprecationWarning; one raised in third-party code
    (torch, transformers, vLLM: its file is outside our packages) only with -v."""
    if issubclass(category, DeprecationWarning | PendingDeprecationWarning):
        return False
    if _verbose[0] or not filename:
        return True
    parts = Path(filename).parts
    return any(p in OUR_PACKAGES for p in parts) and "site-packages" not in parts


def show_warning(message: Any, category: type[Warning], filename: str | None = None, *args: Any,
                 **kw: Any) -> None:
    """A `warnings.showwarning`: a shown warning (`shown_warning`) as one `warning: ...` line on stderr."""
    if shown_warning(category, filename):
        click.echo(f"warning: {' '.join(str(message).split())}", err=True)


class echo_warnings:  # noqa: N801 - used like contextlib's lower-case managers
    """Show every warning raised inside (left-out, damaged or dropped data), as it happens, as one
    `warning: ...` line on stderr (a resumed sweep says which damaged runs it reruns before running them)."""

    def __enter__(self) -> echo_warnings:
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = show_warning
        return self

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)


def progress_lines(command: str) -> Callable[[str, int, int], None]:
    """A progress callback `(what, done, total)` on stderr: one line when a step starts and, for steps with
    many parts, a counter (rewritten in place on a terminal, every quarter in a log), so no command sits
    silent for seconds. stdout stays clean for --json."""
    state = {"what": None, "mark": -1, "t0": time.perf_counter()}
    tty = sys.stderr.isatty()

    def tell(what: str, done: int, total: int) -> None:
        if what != state["what"]:
            if tty and state["what"] is not None:
                click.echo("", err=True)
            state.update(what=what, mark=-1, t0=time.perf_counter())
            if total <= 1:
                click.echo(f"{command}: {what} ...", err=True)
                return
        if total <= 1:
            return
        quarter = 4 * done // total
        if tty:
            click.echo(f"\r{command}: {what} {done}/{total}", err=True, nl=done >= total)
        elif quarter != state["mark"]:
            state["mark"] = quarter
            took = f" ({time.perf_counter() - state['t0']:.1f} s)" if done >= total else ""
            click.echo(f"{command}: {what} {done}/{total}{took}", err=True)

    return tell
