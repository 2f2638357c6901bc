"""A newcomer's first hour: one test per numbered problem below, through the CLI where the user meets it.

1 a meaningless answer (tabular val_mean never moves), 2 edges and flat frontiers unreported, 3 incompatible
runs pooled silently, 4 bad input leaves output behind, 5 the real-model path (option keys, dtype by CPU,
third-party warnings, run's interrupt message), 6 the tutorial's figures, 7 docs that do not ship, 8 README
inconsistencies, 9 the minor ones. Simulator runs are tiny (budgets 2^11, a few problems); the rest uses
synthetic tables with known curves or the studies' fake backend.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from studies_fakes import register
from synthetic_curves import synthetic_table

from isocompute.cli import main

register()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def tabular_dir(tmp_path_factory):
    """A tabular simulator sweep: its validation problems share nothing with the training ones."""
    out = tmp_path_factory.mktemp("first_hour") / "tab"
    r = invoke("sweep", "n-vs-m", "--model", "tabular", "--n", "2,4,8", "--bp", "8", "--budget", "2^11",
               "--seeds", "2", "--d", "32", "--d-val", "16", "--n-evals", "10", "--out", out, "--jobs", "1",
               "--no-progress")
    assert r.exit_code == 0, r.output
    return out


# ------------------------------------------------------------------------------------------------------ 1
def test_1_tabular_reads_train_mean_and_a_metric_that_never_moves_is_all_tie(tabular_dir):
    r = invoke("fit", tabular_dir)
    assert r.exit_code == 0, r.output
    assert "metric train_mean: the default of these runs' preset" in r.stderr
    assert "compute-optimal n*(C) for train_mean" in r.stdout
    r = invoke("fit", tabular_dir, "--metric", "val_mean", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["certainty"]["none_improved"] is True
    # every row is a tie (or the only n with data), never a determined "n* = 2"
    assert any(f["tie"] for f in rep["frontier"]) and not any(f["determined"] for f in rep["frontier"])
    text = invoke("fit", tabular_dir, "--metric", "val_mean").stdout
    rows = [ln for ln in text.splitlines() if re.match(r"\s+[\d.e+^]+\s+0\.\d+\s+\[", ln)]
    assert rows and all(ln.endswith(("(tie)", "(alone)")) for ln in rows) and rows[-1].endswith("(tie)")
    assert "no n improved val_mean" in text and "--metric train_mean" in text
    assert "train_mean" in invoke("fit", "--help").stdout  # --help says it too


def test_1_plot_draws_no_n_star_sigmoid_for_a_degenerate_fit(tabular_dir):
    from studies.fit.frontier import FrontierFit
    from studies.fit.plots import plot_frontier
    from studies.io import load_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = load_table(tabular_dir)
    ff = FrontierFit(metric="val_mean").fit(table)
    fig = plot_frontier(table, "val_mean", "n", fit=ff, title="t", model="tabular")
    labels = [ln.get_label() for ax in fig.axes for ln in ax.get_lines()]
    assert not any("sigmoid fit" in lab for lab in labels)
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "no n improved val_mean" in texts and fig.get_suptitle() == "t"
    r = invoke("plot", tabular_dir, "--metric", "val_mean", "--out", tabular_dir / "f.png")
    assert r.exit_code == 0 and (tabular_dir / "f.png").read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------------------------------ 2
def _rising_table(tmp_path, flat=False):
    """n = 2..32: larger n end higher (n* at the end = 32, the grid's edge); flat: 8, 16, 32 end equal."""
    asym = {2: 0.55, 4: 0.62, 8: 0.70, 16: 0.78 if not flat else 0.70, 32: 0.85 if not flat else 0.70}
    specs = {n: (0.1, a, 2e3 * n, 1.6) for n, a in asym.items()}
    t = synthetic_table(specs, seeds=4, points=40, c_max=2e7 if flat else 2e6, noise=0.004,
                        rng=np.random.default_rng(1))
    path = tmp_path / ("flat.csv" if flat else "rising.csv")
    t.to_csv(path, index=False)
    return path, t


def test_2_fit_says_extend_the_grid_and_names_the_flat_set(tmp_path):
    path, _ = _rising_table(tmp_path)
    r = invoke("fit", path, "--json")
    cert = json.loads(r.stdout)["certainty"]
    assert cert["n_star"] == 32 and cert["edge"] == "upper"
    assert any("extend the grid" in n for n in cert["notes"])
    assert "extend the grid" in invoke("fit", path).stdout
    flat, _ = _rising_table(tmp_path, flat=True)
    cert = json.loads(invoke("fit", flat, "--json").stdout)["certainty"]
    assert {8, 16, 32} <= set(cert["flat_set"]) and 2 not in cert["flat_set"]
    assert cert["expected_regret"] >= 0
    lo, hi = cert["reward_interval"]
    assert lo <= 0.70 + 0.01 and hi >= 0.70 - 0.01


def test_2_plan_recommended_set_contains_the_swept_n_star(tmp_path):
    """Pilots stopped at 1/16 of the budget (large n still rising there): the recommended set must hold
    the n* that the full curves give at the budget, as in the demo case."""
    path, full = _rising_table(tmp_path)
    from studies.fit.frontier import FrontierFit

    budget = 2**19
    truth = FrontierFit(metric="val_mean").fit(full).n_star_at(budget)["n"].iloc[0]
    r = invoke("plan", path, "--budget", budget, "--max-compute", budget // 16, "--bootstrap", "20", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    cert = p["certainty"]
    assert truth in cert["recommended_set"], (truth, cert)
    assert cert["expected_regret"] is not None and cert["expected_regret"] >= 0
    assert set(cert["reward_intervals"]) == {"2", "4", "8", "16", "32"}


def test_2_predict_reports_the_edge_and_the_rules(tmp_path):
    path, _ = _rising_table(tmp_path)
    r = invoke("predict", path, "--budget", "2^22", "--rule", "paper", "--json")
    assert r.exit_code == 0, r.output
    cert = json.loads(r.stdout)["certainty"]
    assert "pilots" in cert and "tie" in cert["pilots"]
    assert cert["edge"] in (None, "upper", "lower")
    if cert["edge"] == "upper":
        assert any("extend the grid" in n for n in cert["notes"])


# ------------------------------------------------------------------------------------------------------ 3
def test_3_runs_of_two_presets_in_one_folder_are_not_pooled(tmp_path):
    out = tmp_path / "mixed"
    common = ["--backend", "fake", "--bp", "4", "--budget", "2^14", "--n-evals", "12", "--out", out, "--jobs",
              "1", "--no-progress"]
    assert invoke("sweep", "n-vs-m", "--model", "interference", "--n", "2,8", *common).exit_code == 0
    r = invoke("sweep", "n-vs-m", "--model", "tabular", "--n", "2,8", *common)  # mixing is warned about...
    assert r.exit_code == 0 and r.stderr.count("\n") == 1 and r.stderr.startswith("warning: "), r.output
    assert "another experiment" in r.stderr and "model: 'interference' vs 'tabular'" in r.stderr
    # ...and refused by every reader without --where, --by or --pool
    for cmd in (["fit", out], ["plan", out, "--budget", "2^16", "--bootstrap", "2"], ["plot", out]):
        r = invoke(*cmd)
        assert r.exit_code == 2, (cmd, r.output)
        line = r.stderr.strip()
        assert "\n" not in line and "--pool" in line
        assert "differ in model: 'interference' vs 'tabular'" in line
    assert not (out / "frontier.png").exists()
    assert invoke("fit", out, "--pool").exit_code == 0
    assert invoke("fit", out, "--by", "model").exit_code == 0  # --by says what varies


# ------------------------------------------------------------------------------------------------------ 4
@pytest.mark.parametrize("bad", [["--model", "foo"], ["--dataset", "foo"], ["--option", "foo=1"]])
def test_4_bad_sweep_input_creates_nothing(tmp_path, bad):
    out = tmp_path / "s3"
    r = invoke("sweep", "n-vs-m", "--n", "2,4", "--budget", "2^10", *bad, "--out", out, "--no-progress")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert not out.exists()


def test_4_bad_plot_input_creates_nothing(tmp_path):
    out = tmp_path / "figs" / "f.png"
    r = invoke("plot", tmp_path / "no-such-dir", "--out", out)
    assert r.exit_code == 2 and not out.parent.exists(), r.output


def test_4_bad_predict_input_creates_nothing(tmp_path):
    out = tmp_path / "p4"
    r = invoke("predict", "--model", "foo", "--budget", "2^14", "--out", out)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert not out.exists()


# ------------------------------------------------------------------------------------------------------ 5
def test_5_llm_options_are_listed_from_the_config():
    from dataclasses import fields

    from llm_backend.config import LLMConfig
    from studies.config import RunConfig

    r = invoke("llm", "options", "--json")
    assert r.exit_code == 0, r.output
    keys = {o["key"] for o in json.loads(r.stdout)["options"]}
    expected = {f.name for f in fields(LLMConfig)} - {f.name for f in fields(RunConfig)} - {"model"}
    assert keys == expected and {"engine_dtype", "max_new_tokens", "engine"} <= keys
    text = invoke("llm", "options").stdout
    assert "max_new_tokens" in text and "Completion cap" in text


def test_5_dtype_default_follows_the_cpu(tmp_path):
    from llm_backend.config import CPU_DTYPE, LLMConfig, cpu_dtype
    from studies.presets import CPU_LLM

    cases = (("fpu sse avx2 amx_tile amx_bf16", "bfloat16"), ("fpu avx512f avx512_bf16", "bfloat16"),
             ("fpu sse avx2 fma", "float32"))
    for flags, want in cases:
        f = tmp_path / "cpuinfo"
        f.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert cpu_dtype(str(f)) == want
    assert cpu_dtype(str(tmp_path / "missing")) == "float32"
    assert LLMConfig().engine_dtype == LLMConfig().train_dtype == CPU_DTYPE == cpu_dtype()
    assert CPU_LLM["engine_dtype"] == CPU_LLM["train_dtype"] == CPU_DTYPE


def test_5_third_party_warnings_only_with_v_and_run_interrupt_is_true(monkeypatch):
    from isocompute import cli as icli
    from studies.cli_kit import output

    monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    assert invoke("fit", "--help").exit_code == 0
    import os

    assert os.environ["VLLM_LOGGING_LEVEL"] == "ERROR"  # vLLM's start-up WARNING lines stay off
    third = "/x/.venv/lib/python3.11/site-packages/vllm/engine.py"
    assert not output.shown_warning(UserWarning, third)
    assert output.shown_warning(UserWarning, str(ROOT / "studies" / "io.py"))
    assert not output.shown_warning(DeprecationWarning, str(ROOT / "studies" / "io.py"))
    output.set_verbose(True)
    try:
        assert output.shown_warning(UserWarning, third)
    finally:
        output.set_verbose(False)
    assert "rerun to resume" not in icli.interrupted_message(["run", "--backend", "llm"])
    assert "rerun to resume" in icli.interrupted_message(["-v", "sweep", "n-vs-m"])


# ------------------------------------------------------------------------------------------------------ 6
def test_6_tutorial_renders_inline_with_a_frontier_figure_and_jupyter_in_an_extra():
    nb = json.loads((ROOT / "docs" / "tutorial.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'matplotlib.use("Agg")' not in code and "matplotlib.use('Agg')" not in code
    assert "%matplotlib inline" in code
    assert "plot_frontier" in code  # frontier and n*(C) panels
    plan_md = [i for i, c in enumerate(nb["cells"]) if "plan" in "".join(c["source"]) and c["cell_type"] ==
               "markdown"]
    assert plan_md, "a markdown cell explains the plan cell's numbers"
    toml = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^notebook = \[(.*?)\]", toml, re.S | re.M)
    assert extra and re.search(r'"(jupyter|nbclassic|notebook)[^"]*==', extra.group(1))


# ------------------------------------------------------------------------------------------------------ 7
def test_7_docs_the_code_names_ship():
    sys.path.insert(0, str(ROOT / "tests"))
    import test_doc_refs as refs

    readme = ROOT / "README.md"
    assert all(refs.resolves(r, readme) for r in refs.md_refs(readme.read_text()))
    for path in ("docs/PAPER.md", "docs/DESIGN.md", "docs/LLM_NOTES.md"):
        assert (ROOT / path).is_file()


# ------------------------------------------------------------------------------------------------------ 8
def test_8_readme_has_one_llm_study_paragraph_and_throughput_says_at_which_n():
    text = (ROOT / "README.md").read_text()
    assert "small n wins at every C" not in text
    assert text.count("<!-- llm-study:begin -->") == 1
    for line in text.splitlines():
        if "rollouts per second" in line or "rollouts/s" in line:
            assert re.search(r"n = \d", line), line
    # the speed numbers live in the block generated from docs/sim_sweep.json, which says n
    block = text.split("<!-- sim_sweep -->")[1]
    assert "one step at n = 2 costs" in block


# ------------------------------------------------------------------------------------------------------ 9
def test_9_minor_ones(tmp_path):
    from studies.cli import predict as predict_cmd

    progress = next(p for p in predict_cmd.params if p.name == "progress")
    assert progress.default is True  # as sweep
    plan_help = invoke("plan", "--help").stdout
    assert all(f in plan_help for f in ("wandb", "tensorboard", "trl", "verl"))
    path, table = _rising_table(tmp_path)
    rep = json.loads(invoke("fit", path, "--json").stdout)
    assert all(isinstance(f["tie"], bool) for f in rep["frontier"])
    r = invoke("fit", path, "--by", "compute")
    assert r.exit_code == 2 and "--by compute is an axis" in r.stderr and "Traceback" not in r.output
    nocol = tmp_path / "nocol.csv"
    table.drop(columns=["n"]).to_csv(nocol, index=False)
    r = invoke("fit", nocol)
    assert r.exit_code == 2 and "--n" in r.stderr
    from studies.cli import plot_title

    assert plot_title((path,), "val_mean", "n", table).startswith(f"{path}: val_mean by n")


def _one_error(r, *words):
    """exit 2 and one line on stderr, an error alone (no note before it), naming `words`."""
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert all(w in lines[0] for w in words), lines[0]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_9_errors_come_alone_and_write_nothing(tabular_dir, tmp_path):
    """A new user's slips with the analysis commands: each is one line on stderr, exit 2, with no note
    before it (the runs' default metric is said only once the input has loaded) and nothing written."""
    before = _files(tabular_dir)
    _one_error(invoke("fit", tabular_dir, "--by", "compute"), "--by compute is an axis")
    good = tmp_path / "good.csv"
    synthetic_table({2: (0.2, 0.6, 1e3, 1.5), 4: (0.2, 0.6, 1e3, 1.5)}, seeds=2, points=8).to_csv(good,
                                                                                                 index=False)
    inside = _files(tmp_path)
    _one_error(invoke("plot", tabular_dir, "--out", good / "p.png"), "good.csv is not a directory")
    if Path("/proc").is_dir():
        _one_error(invoke("plot", tabular_dir, "--out", "/proc/p.png"), "no file can be created in /proc")
    _one_error(invoke("plot", tabular_dir, "--out", tmp_path / "new" / "dir" / "p.bmp"),
               "unknown figure format")
    _one_error(invoke("fit", good, "--format", "trl"), "good.csv is not a TRL trainer_state.json", "not JSON")
    assert _files(tmp_path) == inside and _files(tabular_dir) == before
    r = invoke("plot", tabular_dir, "--out", tmp_path / "new" / "p.png")  # the same input is fine
    assert r.exit_code == 0 and r.stderr.startswith("note: metric train_mean")
    assert (tmp_path / "new" / "p.png").exists()


def test_9_the_pooling_refusal_names_an_unset_field_readably(tmp_path):
    common = ["--backend", "fake", "--model", "interference", "--bp", "4", "--budget", "2^12", "--n-evals",
              "6", "--jobs", "1", "--no-progress"]
    assert invoke("sweep", "n-vs-m", "--n", "2", "--d", "512", "--out", tmp_path / "a",
                  *common).exit_code == 0
    assert invoke("sweep", "n-vs-m", "--n", "4", "--out", tmp_path / "b", *common).exit_code == 0
    r = invoke("fit", tmp_path / "a", tmp_path / "b")
    _one_error(r, "differ in d: 512 vs unset (the backend's default)", "--pool")
    assert "None" not in r.stderr


def test_9_bounded_parameter_warnings_name_r0_too():
    from studies.fit.frontier import FrontierFit

    t = synthetic_table({2: (0.0, 1.0, 1e5, 1.5), 8: (0.0, 1.0, 1e6, 1.5)}, seeds=2, c_max=1e6, noise=0.0)
    ff = FrontierFit(metric="val_mean").fit(t)
    for k, fit in ff.curves_.items():
        shown = [w for w in ff.warnings_ if w.startswith(f"n={k}: parameter(s)")]
        if fit.ok_ and set(fit.at_bounds_) - {"R0"}:
            assert shown and (("R0 too" in shown[0]) == ("R0" in fit.at_bounds_)), (fit.at_bounds_, shown)


def test_9_a_closed_pipe_exits_quietly(tmp_path):
    """`isocompute fit FILE | head -1`: the reader leaves before the output is written. Here it leaves
    before the first byte (the read end closed at once), so the write meets a closed pipe every time."""
    path, _ = _rising_table(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "isocompute", "fit", str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert err.strip() == b"" or (b"Traceback" not in err and b"Broken pipe" not in err
                                  and b"Exception ignored" not in err), err


@pytest.mark.llm
def test_5_a_real_model_run_says_where_it_is(tmp_path, capsys, monkeypatch):
    """--progress on the llm backend, on a terminal: the engine start and each evaluation as lines, the
    steps on the status line (never a line per step), on a randomly initialised 2-layer Llama with the
    SmolLM2 tokenizer."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    from isocompute.contract import progress
    from llm_backend.config import LLMConfig
    from llm_backend.loop import run
    from llm_backend.model import load_tokenizer, prepare

    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)
    tok = load_tokenizer(prepare())
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "lm")
    tok.save_pretrained(tmp_path / "lm")
    run(LLMConfig(model=str(tmp_path / "lm"), engine="hf", dataset="arith", bp=2, n=2, budget=8,
                  max_new_tokens=4, k=1, d_val=2, n_evals=2, train_eval=False, seed=0), progress=True)
    err = capsys.readouterr().err
    lines = err.split("\n")
    assert re.search(r"llm: engine hf \(\w+\) ready in [\d.]+ s; 2 steps of 4 rollouts", err), err
    assert re.search(r"llm: step 0/2: val_mean [\d.]+ \([\d.]+ s\)", err)
    assert re.search(r"llm: step 2/2: val_mean", err)
    assert re.search(r"\] llm n=2 bp=2: step 2/2, 8 rollouts, .*val_mean [\d.]+ at step 2", lines[-2]), err
    assert not re.search(r"llm: step \d/2: rollout", err)  # no line of its own per step
