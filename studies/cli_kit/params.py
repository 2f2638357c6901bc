"""Click parameter types and option helpers the commands share: counts written as 1024, 4e6 or 2^22, lists
of them, output paths that refuse the empty string, and help texts whose defaults are read from the code.

A click type turns a malformed value into click's usage error, which the root group prints as one line with
exit code 2; the parsing itself is studies.config's (parse_count, parse_count_list), shared with the Python
API."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from studies.config import StudiesError, parse_count, parse_count_list


class CountType(click.ParamType):
    """An integer written as 1024, 4e6 or 2^22."""

    name = "COUNT"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_count(value)
        except StudiesError as e:
            self.fail(str(e), param, ctx)


class CountListType(click.ParamType):
    """A comma list of counts, with 2^a..2^b ranges of powers of two."""

    name = "LIST"

    def convert(self, value: Any, param: Any, ctx: Any) -> list[int]:
        if isinstance(value, list):
            return value
        try:
            return parse_count_list(value)
        except StudiesError as e:
            self.fail(str(e), param, ctx)


COUNT, COUNT_LIST = CountType(), CountListType()


class OutPath(click.Path):
    """An output path; refuses the empty string, which pathlib would turn into the current directory."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("needs a name, got an empty path", param, ctx)
        return super().convert(value, param, ctx)


class CodeDefaultOption(click.Option):
    """An option whose default lives in code that this module does not load at start-up: `code_default` (a
    callable) gives its text when the help is shown ("sim 32, llm 4", "4.0 (studies.fit.plan.WARN_FACTOR)"),
    so no default in --help is typed by hand."""

    def __init__(self, *args: Any, code_default: Callable[[], str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.code_default = code_default

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        rec = super().get_help_record(ctx)
        if rec is None:
            return rec
        return rec[0], f"{rec[1]} [default: {self.code_default()}]"


def engine_default(name: str) -> Callable[[], str]:
    """`code_default` of a RunConfig field the backend fills when it is None (studies.backends)."""
    def text() -> str:
        from studies.backends import engine_defaults

        return engine_defaults(name)

    return text


def module_default(module: str, attr: str) -> Callable[[], str]:
    """`code_default` of a constant: its value and where it is defined."""
    def text() -> str:
        return f"{import_attr(module, attr)} ({module}.{attr})"

    return text


def import_attr(module: str, attr: str) -> Any:
    """`module.attr`, imported when a command needs it (fitting and plotting load pandas and matplotlib); a
    module missing from this installation is a StudiesError, not a traceback."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            raise StudiesError(f"{module} is not available yet") from None
        raise
    return getattr(mod, attr)


def apply_options(options: list[Callable]) -> Callable:
    """One decorator from a list of click options (a group of options several commands take), in order."""
    def deco(f: Callable) -> Callable:
        for opt in reversed(options):
            f = opt(f)
        return f

    return deco


def dir_option(*decls: str, help: str, default: Any = None, **kw: Any) -> Callable:
    """An option naming a directory (a results directory, a store), as a Path; `default` None lets the
    command pick its default from other options. An empty name is refused (OutPath)."""
    path = OutPath(file_okay=False, path_type=Path)
    return click.option(*decls, type=path, default=default, help=help, **kw)


def file_option(*decls: str, help: str, default: Any = None, **kw: Any) -> Callable:
    """An option naming a file the command writes (a report, a figure), as a Path; an empty name is
    refused."""
    path = OutPath(dir_okay=False, path_type=Path)
    return click.option(*decls, type=path, default=default, help=help, **kw)


def jobs_option(default: int = 2, help: str = "Worker processes.") -> Callable:
    """`--jobs`: worker processes of a report's runs (1..64)."""
    return click.option("--jobs", type=click.IntRange(1, 64), default=default, show_default=True, help=help)
