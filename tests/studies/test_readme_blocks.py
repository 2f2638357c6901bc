"""Generated README paragraphs: studies.files.write_marked_block, and the llm_step speed sentence generated
from a benchmark JSON (benchmarks/llm_step.py readme_line) with its targets judged from the numbers."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from studies.files import write_marked_block

ROOT = Path(__file__).resolve().parents[2]


def test_block_is_replaced_between_markers_and_appended_when_absent(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("head\n<!-- x -->\nold\n<!-- x -->\ntail\n")
    write_marked_block(p, "<!-- x -->", "<!-- x -->", "new")
    assert p.read_text() == "head\n<!-- x -->\nnew\n<!-- x -->\ntail\n"
    write_marked_block(p, "<!-- a -->", "<!-- b -->", "added")
    assert p.read_text().endswith("tail\n\n<!-- a -->\nadded\n<!-- b -->\n")
    write_marked_block(p, "<!-- a -->", "<!-- b -->", "again")
    text = p.read_text()
    assert text.count("<!-- a -->") == 1 and "again" in text and "added" not in text


def _llm_step():
    spec = importlib.util.spec_from_file_location("llm_step", ROOT / "benchmarks" / "llm_step.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_llm_step_line_comes_from_the_json_and_judges_its_targets():
    mod = _llm_step()
    out = json.loads((ROOT / "docs" / "llm_study" / "llm_step.json").read_text())
    line = mod.readme_line(out)
    e = out["runs"][0]
    assert f"{e['ratio_vs_trl']:.2f}x the completions/s of TRL" in line
    assert f"{e['train_vs_matmul_floor']:.1f}x above the" in line
    fast = json.loads(json.dumps(out))
    fast["runs"][0]["ratio_vs_trl"], fast["runs"][0]["train_vs_matmul_floor"] = 4.5, 1.5
    fast_line = mod.readme_line(fast)
    assert "target 4x: met" in fast_line and "target 2x: met" in fast_line
    slow = json.loads(json.dumps(out))
    slow["runs"][0]["ratio_vs_trl"], slow["runs"][0]["train_vs_matmul_floor"] = 1.5, 3.0
    assert "target 4x: not met" in mod.readme_line(slow) and "target 2x: not met" in mod.readme_line(slow)


def test_readme_carries_the_generated_llm_step_line():
    """The line a reader sees first names the machine and the date it was measured."""
    mod = _llm_step()
    line = mod.readme_from(ROOT / "docs" / "llm_study" / "llm_step.json")
    assert f"{mod.MARK}\n{line}\n{mod.MARK}" in (ROOT / "README.md").read_text()
    assert re.match(r"Measured on 20\d\d-\d\d-\d\d.*, on AMD EPYC", line)


def _sim_sweep():
    spec = importlib.util.spec_from_file_location("sim_sweep", ROOT / "benchmarks" / "sim_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_carries_the_readable_sim_sweep_block():
    """One bullet per measurement, the command without its quoted --machine words (shown once, as prose)."""
    mod = _sim_sweep()
    block = mod.readme_from(ROOT / "docs" / "sim_sweep.json")
    assert f"{mod.MARK}\n{block}\n{mod.MARK}" in (ROOT / "README.md").read_text()
    lines = block.splitlines()
    assert re.match(r"Simulator speed measured on 20\d\d-\d\d-\d\d.*, on Intel Xeon", lines[0])
    assert len(lines) >= 4 and all(line.startswith("- ") for line in lines[1:])
    assert max(map(len, lines)) < 300 and "'\"'\"'" not in block and "--machine" not in block


def test_shown_command_drops_the_machine_and_out_options():
    mod = _sim_sweep()
    cmd = "python benchmarks/sim_sweep.py --ref abc --out /tmp/x.json --machine 'a b'\"'\"'s' --quick"
    assert mod.shown_command(cmd) == "python benchmarks/sim_sweep.py --ref abc --quick"
