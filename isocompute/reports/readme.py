"""README paragraphs generated from data, and the rule that no other README number is typed.

Two blocks are made here (each between its markers, by studies.files.write_marked_block):
- `claims-summary`: the science paragraph, from docs/CLAIMS.json, the numbers `isocompute report claims`
  writes next to docs/CLAIMS.md (`summary_of(outcomes)`); without that file the paragraph names no number.
- `llm-rollout`: the vLLM vs transformers rollout throughput, from the benchmark JSONs of
  `benchmarks/llm_rollout.py` in docs/llm_study/.
`isocompute report readme` rewrites both in README.md. `stray_numbers(text)` lists the decimal numbers of a
README outside code, inline code and marked blocks; tests/studies/test_readme_numbers.py requires none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
CLAIMS_BEGIN, CLAIMS_END = "<!-- claims-summary:begin -->", "<!-- claims-summary:end -->"
ROLLOUT_MARK = "<!-- llm-rollout -->"
CLAIMS_JSON = Path("docs/CLAIMS.json")
ROLLOUT_JSONS = (
    "docs/llm_study/benchmark_cpu_16x16_fp32.json",
    "docs/llm_study/benchmark_cpu_16x16_bf16.json",
)

ALLOWED = {"3.11", "2603.12151"}
"""Decimal-looking strings of README prose that are not measurements: the Python version and the paper's
arXiv id."""
VERSION = re.compile(r"(?:>=|<=|==|~=|\bversion|\bv)\s*$")
"""A number right after a version comparison (`Ray >= 2.59`) or 'version' is a version, not a measurement."""

NUMBER = re.compile(r"(?<![\w.^/-])[-+]?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])|(?<![\w.])\d+(?:\.\d+)?e[-+]?\d+\b|±")
"""A decimal (0.0264, 3.6e7, +0.0014) or a ± sign: what a measured value looks like. Integers (seeds, grid
values, 2^18) are settings, not measurements, and are not matched."""


# ------------------------------------------------------------------------------------------ the README rule
def _blank_blocks(text: str) -> str:
    """The text with code fences, inline code and every marked block (<!-- x --> ... <!-- x --> or
    <!-- x:begin --> ... <!-- x:end -->) replaced by blanks of the same length."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    text = re.sub(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", blank, text, flags=re.S)
    text = re.sub(r"<!-- ([\w-]+) -->.*?<!-- \1 -->", blank, text, flags=re.S)
    return re.sub(r"`[^`\n]*`", blank, text)


def stray_numbers(text: str) -> list[tuple[int, str]]:
    """(line number, number) of every measured-looking number outside code and marked blocks."""
    out = []
    for i, line in enumerate(_blank_blocks(text).splitlines(), 1):
        for m in NUMBER.finditer(line):
            if m.group(0) not in ALLOWED and not VERSION.search(line[: m.start()]):
                out.append((i, m.group(0)))
    return out


# ------------------------------------------------------------------------------------- claims-summary block
def _c(c: dict | None) -> dict | None:
    if not c or "n_small" not in c:
        return None
    return {k: c[k] for k in ("n_small", "n_large", "diff", "ci", "wins", "seeds")}


def summary_of(plan, outcomes) -> dict:
    """The numbers the README paragraph quotes, from the report's outcomes
    (isocompute.reports.claims.report.Outcome)."""
    by = {o.section.key: o for o in outcomes}
    out = {"plan": plan.name, "backend": plan.backend, "seeds": plan.seeds,
           "verdicts": {k: o.verdict for k, o in by.items()}}
    f1 = by.get("f1")
    if f1 is not None and f1.numbers:
        from isocompute.reports.claims.nstar import ENVELOPE, PRESET, SQRT_TUNED

        tr = f1.numbers["treatments"]
        out["f1"] = {
            "preset": {"lr": dict(_preset_lr(plan)), "n_star": [r["n_star"] for r in tr[PRESET]["rows"]],
                       "record": _c(tr[PRESET]["record"]), "final": _c(tr[PRESET]["final"])},
            "envelope": {"record": _c(tr.get(ENVELOPE, {}).get("record")),
                         "final": _c(tr.get(ENVELOPE, {}).get("final"))},
            "sqrt": {"record": _c(tr.get(SQRT_TUNED, {}).get("record")),
                     "base": tr.get(SQRT_TUNED, {}).get("base_record")},
        }
    mech = by.get("mechanisms")
    if mech is not None and mech.numbers:
        ings = mech.numbers["ingredients"]
        out["mechanisms"] = {"rises": [i["key"] for i in ings if i["rises"]], "of": len(ings)}
    return out


def _preset_lr(plan) -> dict:
    lr = plan.presets["interference"].get("lr")
    return {"lr": lr} if lr is not None else {}


def _ct(c: dict | None, unit: str = "") -> str:
    if not c:
        return "n/a"
    return (f"n = {c['n_large']} − n = {c['n_small']}: {c['diff']:+.4f} ± {c['ci']:.4f}{unit}, larger n "
            f"wins on {c['wins']}/{c['seeds']} seeds")


def claims_paragraph(summary: dict | None) -> str:
    """The science paragraph; every number comes from `summary` (docs/CLAIMS.json)."""
    lead = ("`isocompute report claims --docs` writes [docs/CLAIMS.md](docs/CLAIMS.md): for the theory and "
            "each of the paper's findings 1-11, the preset and command used, the measured numbers with seed "
            "confidence intervals, and a verdict.")
    tail = ("docs/MECHANISMS.md asks which simulator ingredient makes n*(C) rise under a per-n "
            "tuned lr, docs/PREDICT.md scores a predictor of n*(C) from 5% pilots, and docs/ALLOCATORS.md "
            "compares adaptive allocators with fixed n. Read the report for the rest, including what does "
            "not reproduce.")
    if not summary or "f1" not in summary:
        return " ".join([lead, "Its verdicts and numbers are in the report (no summary of a full run is "
                         "committed yet).", tail])
    v, f1 = summary["verdicts"], summary["f1"]
    ns = f1["preset"]["n_star"]
    lr = f1["preset"]["lr"].get("lr")
    mech = summary.get("mechanisms")
    parts = [
        lead,
        f"In short ({summary['plan']} mode, {summary['seeds']} seeds; every choice of lr, base lr or arm "
        "made on held-out seeds; generated from docs/CLAIMS.json by `isocompute report readme`):",
        f"the tabular theory (small n wins): {v.get('theory', 'n/a')};",
        f"with the shared MLP preset at its constant lr{f' ({lr:g})' if lr else ''} n* goes from {ns[0]} to "
        f"{ns[-1]} over the budgets and at the top budget {_ct(f1['preset']['record'])} (best-so-far reward; "
        f"final reward: {_ct(f1['preset']['final'])});",
        f"with the best constant lr per n and budget (the lr envelope) {_ct(f1['envelope']['record'])};",
        f"under the paper's sqrt(batch) rule with its base lr tuned (chosen {f1['sqrt']['base']}) "
        f"{_ct(f1['sqrt']['record'])}; finding 1: {v.get('f1', 'n/a')};",
        f"the pass@1 polarisation of small n (finding 5): {v.get('f5', 'n/a')}.",
    ]
    if mech:
        parts.append(f"Under a per-n tuned lr, {len(mech['rises'])} of the {mech['of']} mechanism "
                     f"ingredients make n*(C) rise ({', '.join(mech['rises']) or 'none'}; Holm-corrected).")
    return " ".join(parts + [tail])


# --------------------------------------------------------------------------------------- llm-rollout block
def rollout_paragraph(fp32: dict, bf16: dict) -> str:
    """The vLLM vs transformers rollout sentence, from the two benchmark JSONs."""
    comp = fp32["prompts"] * fp32["n"]
    return (f"`benchmarks/llm_rollout.py` on this 2-core CPU ({fp32['threads']} threads, 1-min load "
            f"{fp32['loadavg_1min']:.1f} and {bf16['loadavg_1min']:.1f}; {ROLLOUT_JSONS[0]} and "
            f"{ROLLOUT_JSONS[1]}): vLLM generated {fp32['vllm_tokens_per_s']:.0f} tokens/s against "
            f"{fp32['hf_tokens_per_s']:.0f} for transformers `generate` on the same {comp} completions of up "
            f"to {fp32['max_new_tokens']} tokens in float32 ({fp32['ratio_vllm_over_hf']:.1f}x), "
            f"{bf16['vllm_tokens_per_s']:.0f} vs {bf16['hf_tokens_per_s']:.0f} in bf16 "
            f"({bf16['ratio_vllm_over_hf']:.1f}x), and a weight sync took {fp32['sync_s_median']:.2f} s "
            "(median); the GRPO step's phases are in the llm_step block below.")


def update(readme: Path = ROOT / "README.md", root: Path = ROOT) -> None:
    """Rewrite both generated blocks of README.md from their data files."""
    from studies.files import write_marked_block

    cj = root / CLAIMS_JSON
    summary = json.loads(cj.read_text()) if cj.exists() else None
    write_marked_block(readme, CLAIMS_BEGIN, CLAIMS_END, claims_paragraph(summary))
    fp32, bf16 = (json.loads((root / p).read_text()) for p in ROLLOUT_JSONS)
    write_marked_block(readme, ROLLOUT_MARK, ROLLOUT_MARK, rollout_paragraph(fp32, bf16))



@click.command("readme")
def readme() -> None:
    """Regenerate README.md's claims-summary and llm-rollout paragraphs from docs/CLAIMS.json and the
    rollout benchmark JSONs."""
    update()
    click.echo("README.md: claims-summary and llm-rollout blocks regenerated")
