"""README paragraphs generated from data, and the rule that no other README number is typed.

Three blocks are made here (each between its markers, by studies.files.write_marked_block):
- `claims-summary`: the science paragraph, from docs/CLAIMS.json, the numbers `isocompute report claims`
  writes next to docs/CLAIMS.md (`summary_of(outcomes)`); without that file, or with one that predates the
  tuned recipe, the paragraph names no number;
- `headline-caption`: the caption of the headline figure (its lr, and what the claims report says about
  n*(C) under the tuned recipe; "grows with compute" only where that verdict is reproduced);
- `llm-rollout`: the vLLM vs transformers rollout throughput, from the benchmark JSONs of
  `benchmarks/llm_rollout.py` in docs/llm_study/.
`isocompute report readme` rewrites all three in README.md. `stray_numbers(text)` lists the decimal numbers of
a README outside code, inline code and marked blocks; tests/studies/test_readme_numbers.py requires none.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

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
SUMMARY_VERSION = 2
"""Version of docs/CLAIMS.json's layout: 2 = verdicts per seed set and finding 1's key intervals under the
paper's recipe (older files predate the recipe and are quoted by verdict only)."""


def _iv(c: dict | None) -> dict | None:
    """A contrast's arms and 95% interval (claims.common.heldout_contrast), for the JSON."""
    if not c or "n_small" not in c or "iv" not in c:
        return None
    iv = c["iv"]
    return {"n_small": c["n_small"], "n_large": c["n_large"], "estimate": iv.estimate, "lo": iv.lo,
            "hi": iv.hi, "lo90": iv.lo90, "hi90": iv.hi90, "seeds": iv.k}


def summary_of(plan, outcomes) -> dict:
    """The numbers the README's paragraph and caption quote, from the report's outcomes
    (isocompute.reports.claims.report.Outcome): every verdict with its per-seed-set verdicts, and finding 1's
    key quantity (the top-budget gain of large n) under the recipe, the lr envelope and the preset lr."""
    from isocompute.reports.claims.judge import equivalent
    from isocompute.reports.claims.nstar import ENVELOPE, RECIPE_ROW, constant_label

    by = {o.section.key: o for o in outcomes}
    first = next((o for o in outcomes if o.by_set), None)
    out = {"version": SUMMARY_VERSION, "plan": plan.name, "backend": plan.backend, "seeds": plan.seeds,
           "seed_sets": [b[0] for b in first.by_set] if first else [],
           "verdicts": {k: o.verdict for k, o in by.items()},
           "by_set": {k: [[b[0], b[1]] for b in o.by_set] for k, o in by.items()}}
    preset_lr = plan.preset_lr("interference")
    out["preset_lr"] = preset_lr
    f1 = by.get("f1")
    if f1 is not None and f1.numbers and f1.numbers.get("main") == RECIPE_ROW:
        tr = f1.numbers["treatments"]
        rec = tr[RECIPE_ROW]
        top = rec["rows"][-1] if rec["rows"] else {}
        stake = top.get("stake")
        stake_top = None if stake is None else {"estimate": stake.estimate, "lo": stake.lo, "hi": stake.hi,
                                                "within": equivalent(stake)}
        out["f1"] = {
            "recipe": {"base_lr": f1.numbers.get("base_lr"), "gain": _iv(rec["record"]),
                       "gain_final": _iv(rec["final"]),
                       "n_star": [r.get("set_text") or str(r["n_star"]) for r in rec["rows"]],
                       "stake_top": stake_top},
            "envelope": {"gain": _iv(tr.get(ENVELOPE, {}).get("record"))},
        }
        pre = tr.get(constant_label(preset_lr, preset_lr)) if preset_lr is not None else None
        if pre is not None:
            out["f1"]["preset"] = {"lr": preset_lr, "gain": _iv(pre["record"]),
                                   "n_star": [r.get("set_text") or str(r["n_star"]) for r in pre["rows"]]}
    mech = by.get("mechanisms")
    if mech is not None and mech.numbers:
        ings = mech.numbers["ingredients"]
        out["mechanisms"] = {"rises": [i["key"] for i in ings if i["rises"]], "of": len(ings)}
    return out


def _above(g: dict | None) -> str:
    """Where a gain's 95% interval lies: 'above 0', 'below 0' or 'not distinguishable from 0'."""
    if not g:
        return "n/a"
    if g["lo"] > 0:
        return "above 0"
    if g["hi"] < 0:
        return "below 0"
    return "not distinguishable from 0"


def _gt(g: dict | None) -> str:
    """'n = 256 − n = 8: +0.0264 [+0.0158, +0.0370] (95% CI over 8 seeds)'."""
    if not g:
        return "n/a"
    return (f"n = {g['n_large']} − n = {g['n_small']}: {g['estimate']:+.4f} [{g['lo']:+.4f}, {g['hi']:+.4f}] "
            f"(95% CI over {g['seeds']} seeds, {_above(g)})")


def _stake(st: dict | None) -> str:
    """', and what n* gains over the best small n at the top budget ...' (empty without a stake)."""
    if not st:
        return ""
    if st["estimate"] == 0 and st["lo"] == 0 and st["hi"] == 0:
        return ", n* at the top budget being the best small n itself"
    within = " (inside the equivalence margin)" if st["within"] else ""
    return (f", and what n* gains over the best small n at the top budget {st['estimate']:+.4f} "
            f"[{st['lo']:+.4f}, {st['hi']:+.4f}]{within}")


def _current(summary: dict | None) -> bool:
    return bool(summary) and summary.get("version") == SUMMARY_VERSION and "f1" in summary


def claims_paragraph(summary: dict | None) -> str:
    """The science paragraph; every number comes from `summary` (docs/CLAIMS.json), and every statement says
    which lr it was made at."""
    lead = ("`isocompute report claims --docs` writes [docs/CLAIMS.md](docs/CLAIMS.md): for the theory and "
            "each of the paper's findings 1-11, the preset and command used, the key quantity of each rule "
            "with its seed interval, and a verdict (on two disjoint seed sets, standing only where they "
            "agree).")
    tail = ("docs/MECHANISMS.md asks which simulator ingredient makes n*(C) rise under a per-n "
            "tuned lr, docs/PREDICT.md scores a predictor of n*(C) from 5% pilots against its baselines, and "
            "docs/ALLOCATORS.md compares adaptive allocators with fixed n. Read the report for the rest, "
            "including what does not reproduce.")
    if not _current(summary):
        return " ".join([lead, "The committed report predates the paper's tuned recipe as the default of "
                         "every section (outside finding 1 its verdicts were made at the preset's "
                         "constant lr), so no summary is quoted here; `isocompute report claims --docs` "
                         "regenerates it and `isocompute report readme` this paragraph.", tail])
    v, f1 = summary["verdicts"], summary["f1"]
    rec = f1["recipe"]
    sets = summary.get("seed_sets") or []
    seeds = (f"two disjoint sets of {summary['seeds']} seeds ({' and '.join(sets)})" if len(sets) > 1
             else f"{summary['seeds']} seeds")
    stake = rec.get("stake_top")
    per = summary.get("by_set", {}).get("f1") or []
    f1v = v.get("f1", "n/a") + (f" (seeds {per[0][0]}: {per[0][1]}; seeds {per[1][0]}: {per[1][1]})"
                                if len(per) > 1 else "")
    first = f" (numbers: seeds {sets[0]})" if len(sets) > 1 else ""
    parts = [
        lead,
        f"In short ({summary['plan']} mode, {seeds}; generated from docs/CLAIMS.json by `isocompute report "
        "readme`):",
        f"the tabular theory (small n wins; the tabular learner at its preset constant lr): "
        f"{v.get('theory', 'n/a')};",
        f"finding 1 under the paper's recipe (sqrt(batch) lr rule with the base lr {rec['base_lr']:g} chosen "
        f"on tuning seeds, KL + entropy on Easy): {f1v}, the top-budget gain of the best large n over the "
        f"best small n being {_gt(rec['gain'])}{first}, n* per budget {', '.join(rec['n_star'])}"
        + _stake(stake) + ";",
        f"with the best constant lr per n and budget (the lr envelope, chosen on held-out seeds) the same "
        f"gain is {_gt(f1['envelope']['gain'])};",
    ]
    if "preset" in f1:
        pre = f1["preset"]
        parts.append(f"at the preset's constant lr {pre['lr']:g} (a sensitivity row, not a verdict) it is "
                     f"{_gt(pre['gain'])}, n* per budget {', '.join(pre['n_star'])};")
    parts.append(f"the pass@1 polarisation of small n (finding 5, under the recipe): {v.get('f5', 'n/a')}.")
    mech = summary.get("mechanisms")
    if mech:
        parts.append(f"Under a per-n tuned lr, {len(mech['rises'])} of the {mech['of']} mechanism "
                     f"ingredients make n*(C) rise ({', '.join(mech['rises']) or 'none'}; Holm-corrected).")
    return " ".join(parts + [tail])


CAPTION_BEGIN, CAPTION_END = "<!-- headline-caption:begin -->", "<!-- headline-caption:end -->"


def demo_setup() -> dict:
    """Seeds, bp, budget and lr of the headline figure's interference runs (`make demo`:
    paper_figs.catalog.HEADLINE_INTERFERENCE at the interference preset's lr, the simulator's default)."""
    from paper_figs.catalog import HEADLINE_INTERFERENCE as st
    from studies.presets import preset_lr

    return {"seeds": st.seeds, "bp": st.bp[0], "budget": st.budget, "lr": preset_lr("sim", st.preset)}


def headline_caption(summary: dict | None, demo: dict | None = None) -> str:
    """The caption of README's headline figure: what its panels show, at which lr, and what the claims report
    says about n*(C) under the paper's recipe; it says n* grows with compute only where the recipe's verdict
    on finding 1 is 'reproduced' (docs/CLAIMS.json)."""
    d = demo or demo_setup()
    k = int(round(math.log2(d["budget"])))
    built = (f"Built by `make demo` ({d['seeds']} seeds per n, bp = {d['bp']}, budget 2^{k} rollouts, the "
             f"simulator's default constant lr {d['lr']:g}).")
    left = "Left: a tabular policy (independent logits per problem)"
    mid = (f"Middle and right: a shared MLP policy (updates interfere across problems); both at the "
           f"simulator's default constant lr {d['lr']:g}, not the paper's tuned recipe")
    if not _current(summary):
        return (f"*{left}; middle and right: a shared MLP policy (updates interfere across problems), both "
                f"at the simulator's default constant lr, which is not the paper's tuned recipe: whether "
                f"n*(C) grows under the recipe is the claims report's question (docs/CLAIMS.md). {built}*")
    v = summary["verdicts"]
    theory = ("is best served by the smallest n at every budget (the claims report's theory verdict: "
              f"{v.get('theory')})" if v.get("theory") == "reproduced"
              else f"(the claims report's theory verdict: {v.get('theory')})")
    rec = summary["f1"]["recipe"]
    f1v = v.get("f1", "n/a")
    if f1v == "reproduced":
        tuned = (f"under the paper's recipe with a tuned base lr ({rec['base_lr']:g}) n*(C) grows with "
                 f"compute too (finding 1 reproduced, top-budget gain of large n {_gt(rec['gain'])})")
    else:
        tuned = (f"under the paper's recipe with a tuned base lr ({rec['base_lr']:g}) the claims report's "
                 f"verdict on finding 1 is {f1v}: the top-budget gain of large n is {_gt(rec['gain'])}")
    return f"*{left} {theory}. {mid}; {tuned} (docs/CLAIMS.md). {built}*"


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
    """Rewrite the generated blocks of README.md from their data files."""
    from studies.files import write_marked_block

    cj = root / CLAIMS_JSON
    summary = json.loads(cj.read_text()) if cj.exists() else None
    write_marked_block(readme, CLAIMS_BEGIN, CLAIMS_END, claims_paragraph(summary))
    write_marked_block(readme, CAPTION_BEGIN, CAPTION_END, headline_caption(summary))
    fp32, bf16 = (json.loads((root / p).read_text()) for p in ROLLOUT_JSONS)
    write_marked_block(readme, ROLLOUT_MARK, ROLLOUT_MARK, rollout_paragraph(fp32, bf16))
