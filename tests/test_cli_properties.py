"""Property-based test of the whole CLI: argument lists for every command, generated from its click
definition (valid and invalid values, extreme numbers, odd paths), must end in exit 0 or exit 2, never a
traceback, never a hang; on exit 2 the error is one line (only `warning:` lines may precede it).

Bounded for CI: a handful of examples per command, valid values small enough that a run takes well under a
second, and a wall-clock alarm per example. Commands that are long by nature (demo, figs, claims, the llm
commands, and commands this test does not know) get one last argument that must fail validation after
everything else was parsed, so only their argument checks are exercised.
"""

from __future__ import annotations

import signal
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isocompute.cli import main
from studies.io import load_table

EXAMPLE_SECONDS = 60  # a first simulator run compiles its Numba kernels (cached afterwards)
EXAMPLES = 12

COUNTS_OK = ["2", "4", "8", "2^2", "1e1", "16"]
EXTREMES = ["0", "-4", "2^63", "1e19", "2^200", "18446744073709551616", "4.5", "x", "", "inf", "nan"]
# name -> values: valid ones small (a run of at most 2^12 rollouts), invalid ones extreme or malformed
BY_NAME: dict[str, list[str]] = {
    "budget": ["2^8", "2^10", "2^12", "1e3", *EXTREMES, "2^53", "2^40"],
    "n": ["2", "4", "8", "2^1..2^2", "2,4", "1", *EXTREMES, "2^1..2^100000000", "2,2"],
    "bp": ["1", "4", "8", "2,4", *EXTREMES],
    "n_flag": ["2", "4", "2,4", *EXTREMES],
    "bp_flag": ["4", "8", *EXTREMES],
    "batch": ["8", "16,32", *EXTREMES],
    "bmax": ["16", "64", *EXTREMES],
    "seeds": ["1", "2", "0", "-1", "100000000"],
    "seed": ["0", "1", "-1", "18446744073709551616", "x"],
    "problem_seed": ["0", "3", "-2", "2^64", "9223372036854775808"],
    "n_evals": ["2", "3", "8", "0", "1", "1000000000", "x"],
    "d": ["8", "16", "64", "0", "2^40", "2^31"],
    "d_val": ["8", "16", "0", "2^40"],
    "k": ["1", "4", "0", "1048576"],
    "n_est": ["0", "2", "1", "-3", "2^62"],
    "jobs": ["1", "0", "-1"],
    "backend": ["sim", "bogus", ""],
    "executor": ["local", "bogus"],
    "model": ["tabular", "interference", "linear", "mlp", "skills", "bogus", ""],
    "dataset": ["easy", "hard", "tri", "bogus"],
    "device": ["cpu", "cuda", "cuda:7", "gpu", "auto"],
    "options": ["K=4", "K=2^40", "dim=8", "dim=2^31", "share=0.5", "share=2", "response_len=inf",
                "response_len=10", "hidden=4", "hidden=2^40", "bogus=1", "noequals", "K=x", "=3"],
    "lr": ["0.1", "1e-3", "0", "-1", "nan", "inf", "1e308", "x"],
    "metric": ["val_mean", "train_mean", "nope", ""],
    "by": ["n", "bp", "nope"],
    "bin_width": ["0.005", "0.1", "0", "-1", "nan", "x"],
    "fmt": ["auto", "csv", "bogus"],
    "address": ["localhost:1"],
}


def _path_pool(root: Path) -> list[str]:
    return [str(root / "results"), str(root / "table.csv"), str(root / "FILE"), str(root / "FILE" / "sub"),
            str(root / "missing" / "deep" / "x.csv"), "/proc/x.csv", "", str(root / "empty"),
            str(root / "garbage.parquet"), str(root / "new" / "out.png"), str(root / "new" / "t.parquet"),
            str(root / "x.xlsx"), str(root / "sweep")]


def _values(param: click.Parameter, root: Path) -> list[str]:
    name = param.name or ""
    if name in BY_NAME:
        return BY_NAME[name]
    t = param.type
    if isinstance(t, click.Choice):
        return [*map(str, t.choices), "bogus"]
    if isinstance(t, click.Path):
        return _path_pool(root)
    if isinstance(t, click.types.FloatParamType):
        return ["0", "0.5", "1", "-1", "nan", "inf", "1e308", "x"]
    if isinstance(t, click.types.IntParamType):
        return ["0", "1", "2", "-1", "2^63", "99999999999999999999", "x"]
    if type(t).__name__ in ("CountType", "CountListType"):
        return [*COUNTS_OK, *EXTREMES]
    return ["x", "", "1", "2^63", "a,b", str(root / "FILE")]


def _poison(path: tuple[str, ...], root: Path) -> list[str]:
    """The last argument of a long command: it must fail validation, whatever came before."""
    file = str(root / "FILE")
    return {
        ("demo",): ["--out", f"{file}/sub"],
        ("figs",): ["--results", f"{file}/sub"],
        ("claims",): ["--results", f"{file}/sub"],
        ("llm", "prepare"): ["--cache-dir", file],
        ("llm", "calibrate"): ["--out", file],
    }.get(path, ["--no-such-option"])


FULL = {("run",), ("sweep",), ("fit",), ("plot",)}
NEVER = {"executor", "address"}  # starting Ray is not bounded; tests/studies/test_ray_executor.py covers it


def _commands() -> list[tuple[tuple[str, ...], click.Command]]:
    out = []

    def walk(cmd: click.Command, path: tuple[str, ...], ctx: click.Context) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                walk(sub, (*path, name), click.Context(sub, parent=ctx, info_name=name))
        else:
            out.append((path, cmd))

    walk(main, (), click.Context(main, info_name="isocompute"))
    return out


COMMANDS = _commands()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Inputs for the path pool: a tiny results directory, a table, a plain file, garbage, an empty dir."""
    r = tmp_path_factory.mktemp("props")
    res = CliRunner().invoke(main, ["sweep", "n-vs-m", "--out", str(r / "results"), "--n", "2,4", "--bp", "4",
                                    "--budget", "2^10", "--d", "8", "--d-val", "8", "--n-evals", "6",
                                    "--no-progress"])
    assert res.exit_code == 0, res.output  # also compiles the simulator's kernels outside the time bound

    load_table(r / "results").to_csv(r / "table.csv", index=False)
    (r / "FILE").write_text("a plain file\n")
    (r / "garbage.parquet").write_bytes(b"\x00\xffgarbage")
    (r / "empty").mkdir()
    return r


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _args(draw, path: tuple[str, ...], cmd: click.Command, root: Path) -> list[str]:
    args: list[str] = list(path)
    full = path in FULL
    poison = [] if full else _poison(path, root)
    skip = set(NEVER) | {p.lstrip("-").replace("-", "_") for p in poison[:1]}
    for p in cmd.params:
        if isinstance(p, click.Argument):
            vals = _values(p, root)
            count = 1 if p.nargs == 1 else draw(st.integers(0 if not p.required else 1, 2))
            args += [draw(st.sampled_from(vals)) for _ in range(count)]
    opts = [p for p in cmd.params if isinstance(p, click.Option) and p.name not in skip]
    chosen = draw(st.lists(st.sampled_from(opts), max_size=6, unique_by=lambda p: p.name)) if opts else []
    for p in chosen:
        flag = p.opts[0]
        if p.is_flag:
            args.append(draw(st.sampled_from(p.opts + p.secondary_opts)) if p.secondary_opts else flag)
        else:
            args += [flag, draw(st.sampled_from(_values(p, root)))]
    if full and path != ("fit",) and path != ("plot",):
        # keep valid runs tiny: defaults of these commands are sized for real studies
        defaults = {"--budget": "2^10", "--d": "8", "--d-val": "8", "--n-evals": "4", "--bp": "4"}
        if path == ("sweep",):
            defaults |= {"--n": "2,4", "--jobs": "1", "--out": str(root / "sweep")}
        given_flags = set(args)
        args += [x for k, v in defaults.items() if k not in given_flags for x in (k, v)]
        if path == ("sweep",) and "--no-progress" not in args and "--progress" not in args:
            args.append("--no-progress")
    return args + poison


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_exits_0_or_2_in_one_line(path, cmd, root, tmp_path, monkeypatch):
    # from an empty folder: a drawn relative path ("" is ".") would otherwise reach the checkout (`plot ""`
    # run there finds the tutorial's TRL logs under docs/ and writes frontier.png at the repository root)
    monkeypatch.chdir(tmp_path)
    codes: list[int] = []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        args = _args(data.draw, path, cmd, root)
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(EXAMPLE_SECONDS)
        try:
            res = CliRunner().invoke(main, args)
        except _Hang:
            pytest.fail(f"no answer within {EXAMPLE_SECONDS} s: isocompute {' '.join(args)}")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if isinstance(res.exception, _Hang):
            pytest.fail(f"no answer within {EXAMPLE_SECONDS} s: isocompute {' '.join(args)}")
        where = f"isocompute {' '.join(map(repr, args))}"
        codes.append(res.exit_code)
        assert res.exit_code in (0, 2), f"{where}: exit {res.exit_code}\n{res.output}\n{res.exception!r}"
        assert "Traceback" not in res.output, f"{where}\n{res.output}"
        if res.exit_code == 2:
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            assert lines and lines[-1].startswith("error: "), f"{where}\n{res.stderr}"
            assert all(ln.startswith("warning: ") for ln in lines[:-1]), f"{where}\n{res.stderr}"
        if path not in FULL:
            assert res.exit_code == 2 or "--list" in args or "--help" in args, f"{where}\n{res.output}"

    check()
    if path in FULL:  # the examples reach real work too, not only refusals
        assert 0 in codes and 2 in codes, codes


def test_the_walk_sees_every_command():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"run", "sweep", "fit", "plot", "demo", "figs", "claims", "llm prepare", "llm calibrate",
            "report claims", "report allocators", "report llm-study", "report mechanisms"} <= names
