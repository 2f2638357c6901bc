"""What a new user trips over, through the command line: nothing written outside what they name (--out, the
documented cache), committed docs/ written only with --docs, an interrupted sweep leaves no lock and no empty
store, reused runs are announced, help texts speak of the code (not of issues), third-party chatter off
stderr without -v."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from studies_fakes import register

from isocompute.cli import main

register()
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BOOT = f"import sys; sys.path.insert(0, {str(HERE)!r}); import studies_fakes; studies_fakes.register(); " \
       "from isocompute.cli import main; main()"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(r) -> bool:
    return r.exit_code == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """An empty current folder (with a docs/ and a README.md, as in a checkout), and the cache beside it."""
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "README.md").write_text("# readme\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("ISOCOMPUTE_CACHE", str(tmp_path / "cache"))
    return work


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}


def curves_csv(path: Path) -> Path:
    rows = []
    for i, n in enumerate([2, 8, 32]):
        c = np.geomspace(1e3, 1e7, 30)
        r = 0.1 + (0.4 + 0.12 * i - 0.1) / (1 + (1e4 * 4**i / c) ** 1.5)
        rows += [{"run_id": f"run-n{n}", "compute": cc, "n": n, "bp": 32, "val_mean": rr}
                 for cc, rr in zip(c, r, strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


# ----------------------------------------------------------------------------- nothing outside what is named
def test_plot_writes_beside_its_input_and_nothing_in_the_current_folder(cwd, tmp_path):
    table = curves_csv(tmp_path / "data" / "mine.csv")
    r = invoke("plot", table)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "data" / "mine_frontier.png").is_file()
    assert files_under(cwd) == {"README.md"}


def test_predict_runs_its_pilots_in_the_cache_not_the_current_folder(cwd, tmp_path):
    r = invoke("predict", "--backend", "fake", "--n", "2,4", "--bp", "4", "--budget", "2^14", "--seeds", "1",
               "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    where = Path(json.loads(r.stdout)["pilot_dir"])
    assert where.parent == tmp_path / "cache" / "predict" and (where / "manifest.json").is_file()
    assert files_under(cwd) == {"README.md"}


def test_no_stray_figure_at_the_repository_root():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.png"], capture_output=True, text=True)
    assert tracked.returncode == 0 and not [f for f in tracked.stdout.split() if "/" not in f]


# ------------------------------------------------------------------------------------- docs/ only on request
def test_claims_writes_results_by_default_and_docs_only_with_docs(cwd, monkeypatch):
    from isocompute.reports import readme
    from isocompute.reports.cli import claims

    figures = []

    def build(*a, docs=False, headline=None, **k):
        figures.append(headline)
        return f"# report docs={docs}\n", []

    monkeypatch.setattr(claims, "build_report", build)
    monkeypatch.setattr(readme, "summary_of", lambda plan, outcomes: {})
    r = invoke("claims", "--results", "res")
    assert r.exit_code == 0, r.output
    assert (cwd / "results" / "CLAIMS-full.md").read_text() == "# report docs=False\n"
    assert files_under(cwd / "docs") == set()
    r = invoke("report", "claims", "--results", "res", "--docs")
    assert r.exit_code == 0, r.output
    assert (cwd / "docs" / "CLAIMS.md").read_text() == "# report docs=True\n"
    # the headline figure: beside the report, or README's docs/figs/headline.png with --docs
    assert figures == [Path("results/CLAIMS-full-headline.png"), Path("docs/figs/headline.png")]
    for bad in (["--quick", "--docs"], ["--docs", "--out", "x.md"]):
        r = invoke("claims", "--results", "res", *bad)
        assert one_line_error(r), r.output


def test_the_claims_header_of_the_committed_copy_says_docs():
    from isocompute.reports.claims.common import MODES
    from isocompute.reports.claims.report import command_line

    assert command_line(MODES[("sim", False)], docs=True) == "isocompute report claims --docs"
    assert command_line(MODES[("sim", True)]) == "isocompute report claims --quick"


def test_mechanisms_writes_results_by_default(cwd, monkeypatch):
    from isocompute.reports.cli import claims

    monkeypatch.setattr(claims, "mechanisms_report", lambda *a, docs=False, **k: f"# mech docs={docs}\n")
    r = invoke("report", "mechanisms", "--results", "res")
    assert r.exit_code == 0, r.output
    assert (cwd / "results" / "MECHANISMS-full.md").is_file() and files_under(cwd / "docs") == set()
    r = invoke("report", "mechanisms", "--results", "res", "--docs")
    assert r.exit_code == 0 and (cwd / "docs" / "MECHANISMS.md").read_text() == "# mech docs=True\n"


def test_groupstd_aims_at_results_by_default_and_docs_only_with_docs(cwd, monkeypatch):
    from isocompute.reports.cli import groupstd
    from studies.config import StudiesError

    aimed = []
    monkeypatch.setattr(groupstd, "check_output_file", lambda p, *a, **k: aimed.append(Path(p)))

    def stop(*a, **k):
        raise StudiesError("stopped before the runs")

    monkeypatch.setattr(groupstd, "build", stop)
    r = invoke("groupstd", "--backend", "sim", "--results", "res")
    assert one_line_error(r) and "stopped before the runs" in r.stderr
    assert aimed == [Path("results/GROUP_STD-full.md"), Path("results/GROUP_STD-full.png")]
    aimed.clear()  # the full tiny-LM study's runs were never committed: refused before anything is aimed at
    r = invoke("groupstd", "--backend", "llm", "--results", "res")
    assert one_line_error(r) and "never committed" in r.stderr and aimed == []
    (cwd / "docs" / "MECHANISMS.md").write_text("# mechanisms\n")
    aimed.clear()
    r = invoke("groupstd", "--results", "res", "--docs")
    assert aimed == [Path("docs/GROUP_STD.md"), Path("docs/figs/group_std.png")], r.output
    assert one_line_error(invoke("groupstd", "--quick", "--docs"))
    assert (cwd / "README.md").read_text() == "# readme\n"


def test_make_figs_writes_results_and_figs_docs_writes_docs():
    def recipe(target):
        out = subprocess.run(["make", "-n", "-s", "-C", str(ROOT), target, "BIN=bin", "STAMP_BASE="],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if "isocompute figs" in line]

    assert recipe("figs") and not any("docs/" in line for line in recipe("figs"))
    assert any("--out docs/figs" in line for line in recipe("figs-docs"))


# ------------------------------------------------------------------------------------------ interrupted sweep
def _sweep(out, sleep):
    args = ["sweep", "n-vs-m", "--backend", "fake", "--out", str(out), "--n", "2,4,8", "--bp", "4",
            "--budget", "2^11", "--seeds", "1", "--jobs", "1", "--no-progress"]
    env = {**os.environ, "FAKE_SLEEP": str(sleep)}
    # SIGINT back to its default in the child: a suite started in the background by a shell (`make test &`)
    # inherits SIGINT ignored, and Python then keeps it ignored, as a user's shell job would be
    return subprocess.Popen([sys.executable, "-c", BOOT, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(cond, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while not cond() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_sweep_interrupted_before_any_run_leaves_nothing(tmp_path):
    out = tmp_path / "res"
    proc = _sweep(out, sleep=60)
    manifest = out / "manifest.json"
    _wait_for(lambda: manifest.is_file() and '"pending"' in manifest.read_text(), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.count("\n") == 1 and err.startswith("interrupted"), err
    assert not out.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_sweep_interrupted_after_a_run_keeps_it_and_leaves_no_lock(tmp_path):
    out = tmp_path / "res"
    # 5 s per run: the signal must land while the second of three runs sleeps, even when a loaded machine
    # (the suite on two workers) delays this process between the first run's record and the signal
    proc = _sweep(out, sleep=5.0)
    _wait_for(lambda: any((out / "runs").glob("*.json")), proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert any((out / "runs").glob("*.json")) and not (out / ".lock").exists()
    r = invoke("sweep", "n-vs-m", "--backend", "fake", "--out", out, "--n", "2,4,8", "--bp", "4", "--budget",
               "2^11", "--seeds", "1", "--jobs", "1", "--no-progress")
    assert r.exit_code == 0 and "already finished" in r.stdout and not (out / ".lock").exists()


# -------------------------------------------------------------------------------------------- saying things
@pytest.mark.slow  # the demo's 2 x 8 simulator runs, twice
def test_demo_says_when_it_reuses_earlier_runs(tmp_path):
    args = ["demo", "--out", tmp_path / "demo", "--seeds", "1", "--budget", "2^13", "--jobs", "1",
            "--no-progress"]
    first = invoke(*args)
    assert first.exit_code == 0 and "reused" not in first.stderr, first.output
    again = invoke(*args)
    assert again.exit_code == 0 and again.stdout == first.stdout
    notes = [line for line in again.stderr.splitlines() if "reused" in line]
    assert len(notes) == 2 and all("reused 8 of 8 runs" in line for line in notes), again.stderr


def _help_texts():
    import click

    def walk(cmd, path, parent):
        ctx = click.Context(cmd, info_name=path[-1], parent=parent)
        yield " ".join(path), cmd.get_help(ctx)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    yield from walk(sub, [*path, name], ctx)

    return dict(walk(main, ["isocompute"], None))


def test_help_texts_say_what_a_command_does_not_which_issue_made_it():
    texts = _help_texts()
    assert {"isocompute report claims", "isocompute llm", "isocompute figs"} <= set(texts)
    cited = {p: t for p, t in texts.items() if re.search(r"\bissue \d+", t, re.I)}
    assert cited == {}


def test_an_llm_run_on_the_tiny_lm_prints_only_our_lines_without_v(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("ISOCOMPUTE_PROGRESS_EVERY", "0.01")  # a progress line at every chance
    r = invoke("run", "--backend", "llm", "--lm", "tiny", "--n", "2", "--bp", "4", "--budget", "16")
    assert r.exit_code == 0, r.output
    lines = [line.strip() for line in re.split(r"[\r\n]", r.stderr) if line.strip()]
    theirs = [line for line in lines if not line.startswith("llm n=2 bp=4: ")]
    assert theirs == [] and lines


def test_engine_start_is_announced_on_stderr(monkeypatch, capsys):
    """A vLLM start takes minutes on a CPU: the CLI's log setup shows a line before and after it."""
    pytest.importorskip("torch")
    from isocompute.cli import _show_our_logs
    from llm_backend import engines

    monkeypatch.setattr(engines.VLLMEngine, "_start", lambda self, *a: None)
    monkeypatch.setattr(engines, "_guard_llvmlite_against_vllm_module_scan", lambda: None)
    _show_our_logs()
    engines.VLLMEngine("/models/smollm2", tokenizer=None)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("llm: starting the vLLM engine (float32, smollm2)")
    assert re.fullmatch(r"llm: vLLM engine started in \d+\.\d s", err[1])


@pytest.mark.llm
@pytest.mark.slow  # the packaged SmolLM2 on the transformers engine: ~40 s of CPU
def test_a_smollm2_run_shows_no_loading_bars_without_v(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS",)}
    cmd = [sys.executable, "-m", "isocompute", "run", "--backend", "llm", "--n", "2", "--bp", "2", "--budget",
           "4", "--option", "engine=hf", "--option", "max_new_tokens=8", "--d-val", "2", "--k", "1",
           "--progress"]
    out = subprocess.run(cmd, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line.strip() for line in re.split(r"[\r\n]", out.stderr) if line.strip()]
    assert [line for line in lines if not line.startswith(("llm:", "llm n="))] == []
