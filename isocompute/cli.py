"""The `isocompute` command line: the root click group, assembled above every package (docs/DESIGN.md arrows
`isocompute -> paper_figs -> studies -> {sandbox, llm_backend}`).

This is the one place where errors become one line on stderr and an exit code (2 for bad input, 130 / 143
for interrupts), and where `--json` is guaranteed to print exactly one JSON object on stdout: while a
command runs, anything else written to stdout (vLLM's log handler, C-level prints) goes to stderr.
Sub-commands of heavy packages (torch, matplotlib) are imported only when invoked.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import logging
import os
import signal
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import click

from studies import cli as studies_cli
from studies.cli_kit import output
from studies.config import StudiesError

# name -> (module, attribute); loaded on first use so `isocompute run` never imports torch or matplotlib
LAZY = {
    "llm": ("llm_backend.cli", "llm"),
    "figs": ("paper_figs.cli", "figs"),
    "report": ("isocompute.reports.cli", "report"),
    # aliases of `isocompute report claims` / `isocompute report groupstd`
    "claims": ("isocompute.reports.cli.claims", "claims"),
    "groupstd": ("isocompute.reports.cli.groupstd", "groupstd"),
}

QUIET_ENV = {
    # third-party chatter off by default (`-v` keeps it); it goes to stderr either way. vLLM logs its
    # start-up notes (Triton, NUMA binding, memory) as INFO and WARNING, ~19 lines per engine start, so only
    # its errors pass; transformers' "Loading weights" and the hub's download bars follow
    # HF_HUB_DISABLE_PROGRESS_BARS, and so does vLLM's "Loading safetensors" bar (llm_backend.engines).
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_DEDUP_LOGS": "1",
}

OUR_LOGGERS = ("isocompute", "studies", "sandbox", "llm_backend", "paper_figs")
"""Our packages' loggers: what they log at INFO are phase lines (an engine starting, which takes minutes on
a CPU), shown on stderr as they are, so a long phase never looks like a hang."""


class _EchoHandler(logging.Handler):
    """A log record as one plain line on the current stderr (CliRunner swaps it per invocation)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def _show_our_logs() -> None:
    for name in OUR_LOGGERS:
        lg = logging.getLogger(name)
        if not any(isinstance(h, _EchoHandler) for h in lg.handlers):
            lg.addHandler(_EchoHandler())
        lg.setLevel(logging.INFO)
        lg.propagate = False


INTERRUPTED = "interrupted (finished runs are kept; rerun to resume)"
INTERRUPTED_ONE = "interrupted (nothing was saved: `run` trains one configuration and does not resume; " \
                  "`sweep` keeps finished runs)"
"""`run` writes nothing until its run ends, so the resumable stores' message would be untrue for it."""
INTERRUPTED_READ = "interrupted (nothing was written)"
READING = ("fit", "plot", "plan")
"""Commands that only read runs and write their output at the end: an interrupt leaves nothing."""


def interrupted_message(argv: list[str]) -> str:
    """What an interrupt leaves behind, for the command in `argv`: what the command said it keeps
    (output.interrupt_note: a sweep counts the runs it kept), else what commands of its kind leave."""
    note = output.interrupt_note()
    if note:
        return f"interrupted: {note}"
    command = next((a for a in argv if not a.startswith("-")), None)
    if command == "run":
        return INTERRUPTED_ONE
    return INTERRUPTED_READ if command in READING else INTERRUPTED


class Interrupted(BaseException):
    """Ctrl-C's KeyboardInterrupt once it left a command: click's own handler would print an empty line
    before its Abort, and the interrupt must end in exactly one line (`_Main.main`)."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt so that the same cleanup runs
    (executors kill their workers, the store's lock is released; every file is written atomically)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _quiet_destructors() -> None:
    """After an interrupt the process only exits: an object the signal cut half-built (llvmlite's
    `OutputString` when it lands inside Numba's compiler) fails in its destructor as its frames are freed,
    and Python would print that as an "Exception ignored" traceback after the interrupt's one line."""
    sys.unraisablehook = lambda unraisable: None


def _say_interrupted(argv: list[str], code: int, whole_process: bool) -> None:
    """End an interrupted command: its one line on stderr, then exit `code` (130 Ctrl-C, 143 SIGTERM).

    The command's own cleanup already ran as the interrupt unwound it (workers killed, the store's lock
    released). A second Ctrl-C from here on is ignored, so it cannot add a traceback. When this is the
    whole process (the console script, not a test's in-process call), it leaves by os._exit once the
    atexit handlers ran: tearing down torch's and Numba's modules took another ~1 s for nothing, and threads
    still inside a compiled call (a simulator sweep's runs in flight) are not waited for."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _quiet_destructors()
    click.echo(interrupted_message(argv), err=True)
    if whole_process:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        atexit._run_exitfuncs()
        os._exit(code)
    sys.exit(code)


@contextlib.contextmanager
def _signals_and_warnings() -> Iterator[None]:
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    shown = warnings.showwarning
    # warnings (left-out runs, damaged files, dropped rows) as one `warning: ...` line on stderr; those of
    # third-party code only with -v
    warnings.showwarning = output.show_warning
    try:
        yield
    finally:
        warnings.showwarning = shown
        if main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


class _Main(click.Group):
    """Root group: lazy sub-commands from other packages and the one place where errors become exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name, (mod, _) in LAZY.items() if _module_exists(mod)]
        return sorted(set(super().list_commands(ctx)) | set(lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in LAZY:
            return cmd
        mod_name, attr = LAZY[name]
        if not _module_exists(mod_name):
            return None
        try:
            cmd = getattr(importlib.import_module(mod_name), attr)
        except ImportError as e:
            raise StudiesError(f"the {name} commands cannot load: {e}") from None
        if name == "llm" and isinstance(cmd, click.Group) and "options" not in cmd.commands:
            cmd.add_command(llm_options)
        self.add_command(cmd, name)
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        verbose = any(a in ("-v", "--verbose") for a in argv)
        output.set_verbose(verbose)
        output.set_interrupt_note(None)
        if not verbose:
            for key, value in QUIET_ENV.items():
                os.environ.setdefault(key, value)
        _show_our_logs()
        code = 0
        try:
            with _signals_and_warnings(), _json_stdout(enabled="--json" in argv):
                rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
            sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        except click.exceptions.Exit as e:
            code = e.exit_code
        except (click.exceptions.Abort, KeyboardInterrupt, Interrupted):
            _say_interrupted(argv, 130, whole_process=args is None)
        except Terminated:
            _say_interrupted(argv, 143, whole_process=args is None)
        except BrokenPipeError:
            _quiet_stdout()  # `isocompute fit DIR | head -1`: the reader has what it wanted
            code = 0
        except SystemExit:  # click turns a closed pipe inside a command into a silent exit 1
            if type(sys.stdout).__name__ != "_PacifyFlushWrapper":  # click's mark that it met EPIPE
                raise
            _quiet_stdout()
            code = 0
        except click.ClickException as e:
            click.echo(f"error: {one_line(e.format_message())}", err=True)
            code = 2 if isinstance(e, click.UsageError) else e.exit_code
        except StudiesError as e:
            click.echo(f"error: {one_line(str(e))}", err=True)
            code = 2
        except MemoryError:
            click.echo("error: out of memory; use a smaller budget, d, K or dim", err=True)
            code = 2
        except OSError as e:
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            click.echo(f"error: {one_line(e.strerror or str(e))}{where}", err=True)
            code = 2
        sys.exit(code)


@contextlib.contextmanager
def _json_stdout(enabled: bool) -> Iterator[None]:
    """While a `--json` command runs, stdout is stderr for everyone but `emit_json`
    (studies.cli_kit.output.json_stream points it at the real stdout)."""
    if not enabled:
        yield
        return
    real = sys.stdout
    saved_fd = None
    try:
        fd = real.fileno()
    except (AttributeError, OSError, ValueError):  # CliRunner and other in-memory streams
        fd = None
    if fd is not None:
        real.flush()
        saved_fd = os.dup(fd)
        os.dup2(sys.stderr.fileno(), fd)  # C-level writes to fd 1 land on stderr
        real = os.fdopen(saved_fd, "w", closefd=False)
    sys.stdout = sys.stderr
    try:
        with output.json_stream(real):
            yield
    finally:
        sys.stdout = sys.__stdout__ if fd is not None else real
        if saved_fd is not None:
            real.flush()
            sys.__stdout__.flush()
            os.dup2(saved_fd, fd)
            os.close(saved_fd)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # in-memory streams (CliRunner)
        pass


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def one_line(msg: str) -> str:
    return " ".join(str(msg).split())


@click.command("options")
@click.option("--json", "as_json", is_flag=True, help="Print the keys as one JSON object.")
def llm_options(as_json: bool) -> None:
    """List the llm backend's --option KEY=VALUE keys (generated from llm_backend.config.LLMConfig: every
    field that no run flag sets), with defaults and documentation."""
    from studies.backends import backend_options

    opts = backend_options("llm")
    if as_json:
        output.emit_json({"backend": "llm", "options": opts})
        return
    click.echo("--option KEY=VALUE keys of the llm backend (run, sweep, predict; repeatable):")
    for o in opts:
        click.echo(f"  {o['key']} = {o['default']!r} ({o['type']})")
        if o["doc"]:
            for line in textwrap.wrap(o["doc"], 100):
                click.echo(f"      {line}")


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="isocompute", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="Show third-party logs (vLLM, transformers).")
def main(verbose: bool) -> None:
    """Compute-optimal allocation of RL sampling compute C = bp * n * m (IsoCompute Playbook).

    Run one configuration, sweep allocations into a resumable results directory, fit the compute-optimal
    frontier n*(C) of a sweep or of your own logs, and regenerate the claims report and the paper figures,
    on the simulator (--backend sim) or a real LLM (--backend llm).
    """


for _cmd in studies_cli.COMMANDS:
    main.add_command(_cmd)


if __name__ == "__main__":
    main()
