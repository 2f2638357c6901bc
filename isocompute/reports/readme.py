"""README paragraphs generated from data, and the rule that no other README number is typed.

Four blocks are made here (each between its markers, by studies.files.write_marked_block):
- `answer`: the project's answer, first on the page: what the simulator says under the tuned recipe (from
  docs/CLAIMS.json), what the real transformer says (the preregistered tiny-LM study, read from its committed
  store through isocompute.reports.tiny_study.measure) and which mechanism (docs/CLAIMS.json's mechanism
  study and docs/GROUP_STD.json), each sentence linking its document and worded from the numbers;
- `claims-summary`: the science paragraph, from docs/CLAIMS.json, the numbers `isocompute report claims`
  writes next to docs/CLAIMS.md (`summary_of(outcomes)`); without that file, or with one that predates the
  tuned recipe, the paragraph names no number;
- `headline-caption`: the caption of the headline figure (its lr, and what the claims report says about
  n*(C) under the tuned recipe; "grows with compute" only where that verdict is reproduced);
- `llm-rollout`: the vLLM vs transformers rollout throughput, from the benchmark JSONs of
  `benchmarks/llm_rollout.py` in docs/llm_study/.
`isocompute report readme` rewrites all four in README.md. `stray_numbers(text)` lists the decimal numbers of
a README outside code, inline code and marked blocks; tests/studies/test_readme_numbers.py requires none.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CLAIMS_BEGIN, CLAIMS_END = "<!-- claims-summary:begin -->", "<!-- claims-summary:end -->"
ROLLOUT_MARK = "<!-- llm-rollout -->"
CLAIMS_JSON = Path("docs/CLAIMS.json")
GROUPSTD_JSON = Path("docs/GROUP_STD.json")
"""The group-std report's verdicts by KL coefficient (`isocompute report groupstd --docs`)."""
TINY_STORE = Path("docs/tiny_study/store")
"""The preregistered tiny-LM study's committed store (isocompute.reports.tiny_study_report.COMMITTED)."""
ANSWER_BEGIN, ANSWER_END = "<!-- answer:begin -->", "<!-- answer:end -->"
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
SUMMARY_VERSION = 3
"""Version of docs/CLAIMS.json's layout: 3 = verdicts per seed set, finding 1's key intervals under the
paper's recipe and its lr choices as the headline figure draws them ("headline"); older files are quoted by
verdict only."""


def _iv(c: dict | None) -> dict | None:
    """A contrast's arms and 95% interval (claims.common.heldout_contrast), for the JSON."""
    if not c or "n_small" not in c or "iv" not in c:
        return None
    iv = c["iv"]
    return {"n_small": c["n_small"], "n_large": c["n_large"], "estimate": iv.estimate, "lo": iv.lo,
            "hi": iv.hi, "lo90": iv.lo90, "hi90": iv.hi90, "seeds": iv.k}


def _stake_json(iv) -> dict | None:
    """A stake interval (claims.common.stakes) for the JSON: estimate, 95% bounds, and whether it lies
    inside the equivalence margin (judge.equivalent)."""
    from isocompute.reports.claims.judge import equivalent

    if iv is None:
        return None
    return {"estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "within": equivalent(iv)}


def _top(rows: list[dict]) -> dict | None:
    """n* at the top budget of a row list (claims.common.n_star_rows) for the JSON: the budget, the set as
    text, whether it is a tie, and the stake."""
    if not rows:
        return None
    r = rows[-1]
    members = r.get("set") or [r["n_star"]]
    return {"budget": r["budget"], "set": r.get("set_text") or str(r["n_star"]), "tie": len(members) > 1,
            "stake": _stake_json(r.get("stake"))}


def headline_of(plan, x: dict) -> dict:
    """What README's headline caption quotes of the figure (claims/headline.py), from the same finding-1
    numbers `x` (nstar.f1_measure's "lr_choices"): per lr choice its lr (a constant, or each policy's tuned
    base lr), each policy's n* at the top budget with its stake, and the top-budget gain of large n."""
    rows = []
    for c in x.get("lr_choices", []):
        rows.append({"key": c["key"], "lr": c["lr"], "gain": _iv(c["gain"]),
                     "roles": {role: {"base_lr": r["base_lr"], "top": _top(r["rows"])}
                               for role, r in c["roles"].items()}})
    return {"mode": plan.name, "bp": plan.bp, "top": plan.top, "ns": list(plan.ns), "rows": rows}


def summary_of(plan, outcomes) -> dict:
    """The numbers the README's paragraph and caption quote, from the report's outcomes
    (isocompute.reports.claims.report.Outcome): every verdict with its per-seed-set verdicts, and finding 1's
    key quantity (the top-budget gain of large n) under the recipe, the lr envelope and the preset lr."""
    from isocompute.reports.claims.nstar import ENVELOPE, RECIPE_ROW, constant_label

    by = {o.section.key: o for o in outcomes}
    first = next((o for o in outcomes if o.by_set), None)
    out = {"version": SUMMARY_VERSION, "plan": plan.name, "backend": plan.backend, "seeds": plan.seeds,
           "seed_sets": [b[0] for b in first.by_set] if first else [],
           "verdicts": {k: o.verdict for k, o in by.items()},
           "zero": {k: o.zero for k, o in by.items()},
           "by_set": {k: [[b[0], b[1]] for b in o.by_set] for k, o in by.items()}}
    preset_lr = plan.preset_lr("interference")
    out["preset_lr"] = preset_lr
    out["tabular_lr"] = plan.preset_lr("tabular") if "tabular" in plan.presets else None
    out["base_lr_grid"] = list(plan.sqrt_lrs)
    f1 = by.get("f1")
    if f1 is not None and f1.numbers and f1.numbers.get("main") == RECIPE_ROW:
        tr = f1.numbers["treatments"]
        rec = tr[RECIPE_ROW]
        top = rec["rows"][-1] if rec["rows"] else {}
        stake_top = _stake_json(top.get("stake"))
        out["headline"] = headline_of(plan, f1.numbers)
        out["f1"] = {
            "recipe": {"base_lr": f1.numbers.get("base_lr"),
                       "tabular_base_lr": f1.numbers.get("tabular_base_lr"),
                       "gain": _iv(rec["record"]),
                       "gain_final": _iv(rec["final"]),
                       "n_star": [r.get("set_text") or str(r["n_star"]) for r in rec["rows"]],
                       "stake_top": stake_top},
            "envelope": {"gain": _iv(tr.get(ENVELOPE, {}).get("record")), "grid": f1.numbers.get("lr_grid")},
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


def _grid(values) -> str:
    """'0.001, 0.003, 0.01' (an lr grid), '' without one."""
    return ", ".join(f"{v:g}" for v in values or [])


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
            "tuned lr, docs/PREDICT.md scores a predictor of n*(C) from pilots against its baselines where "
            "the true n* rises and where it is flat, and "
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
    tab_lr = summary.get("tabular_lr")
    grid = _grid(summary.get("base_lr_grid"))
    env_grid = _grid(f1["envelope"].get("grid"))
    parts = [
        lead,
        f"In short ({summary['plan']} mode, {seeds}; generated from docs/CLAIMS.json by `isocompute report "
        "readme`):",
        f"the tabular theory (small n wins; the tabular learner at its preset constant lr"
        f"{f' {tab_lr:g}' if tab_lr is not None else ''}): {v.get('theory', 'n/a')};",
        f"finding 1 under the paper's recipe (sqrt(batch) lr rule with the base lr {rec['base_lr']:g} chosen "
        f"on tuning seeds{f' from the grid {grid}' if grid else ''}, KL + entropy on Easy): {f1v}, the "
        f"top-budget gain of the best large n over the best small n being {_gt(rec['gain'])}{first}, n* per "
        f"budget {', '.join(rec['n_star'])}" + _stake(stake) + ";",
        f"with the best constant lr per n and budget (the lr envelope: each n's lr of the grid"
        f"{f' {env_grid}' if env_grid else ''} chosen on held-out seeds) the same gain is "
        f"{_gt(f1['envelope']['gain'])};",
    ]
    if "preset" in f1:
        pre = f1["preset"]
        parts.append(f"at the preset's constant lr {pre['lr']:g} (a sensitivity row, not a verdict) it is "
                     f"{_gt(pre['gain'])}, n* per budget {', '.join(pre['n_star'])};")
    parts.append(f"the pass@1 polarisation of small n (finding 5, under the recipe): {v.get('f5', 'n/a')};")
    parts.append("the other findings train with the recipe too, each study with its own base lr chosen on "
                 "tuning seeds (the report's recipe table lists them), apart from what their Setup lines "
                 "name (constant-lr sensitivity rows, the mechanism study's per-n tuned lrs).")
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
    """The caption of README's headline figure (docs/figs/headline.png, drawn by `isocompute report claims
    --docs` from finding 1's runs: claims/headline.py): what its rows and panels show and, per lr choice, the
    numbers the figure draws (summary["headline"], from the same finding-1 numbers): the lr (the recipe's
    tuned base lrs, or the constant), n* at the top budget with its stake, and the top-budget gain of large
    n. It says n*(C) grows with compute only where finding 1's verdict is 'reproduced'. A summary that
    predates that figure (no "headline") keeps the caption of the figure it had: `make demo`'s, at the
    simulator's default constant lr (`demo`: its setup, demo_setup)."""
    if not _current(summary) or "headline" not in summary:
        return _demo_caption(demo or demo_setup())
    h, v = summary["headline"], summary["verdicts"]
    sets = summary.get("seed_sets") or []
    seeds = (f"seeds {sets[0]}, the first of {len(sets)} disjoint sets" if len(sets) > 1
             else f"{summary['seeds']} seeds")
    cmd = "isocompute report claims --docs" if h["mode"] == "full" else "isocompute report claims --quick"
    top = _budget(h["top"])
    lead = (f"Finding 1's runs at {len(h['rows'])} lr choice{'s' if len(h['rows']) > 1 else ''}, one per "
            f"row, drawn by `{cmd}` ({h['mode']} mode, {seeds}, bp = {h['bp']}, n = "
            f"{', '.join(map(str, h['ns']))}, Easy, budgets up to {top} rollouts). Per row: the frontier of "
            "a tabular policy (independent logits per problem; training reward) and of a shared MLP policy "
            "(updates interfere across problems; held-out reward), n*(C) of both (shaded where the seeds "
            "cannot tell n apart) and the reward at stake (what n* gains over the best small n, with its 95% "
            "interval).")
    where = ["Top", "Bottom"] if len(h["rows"]) == 2 else [""] * len(h["rows"])
    parts = [lead]
    for pos, row in zip(where, h["rows"], strict=True):
        parts.append(_caption_row(pos, row, top, v.get("f1", "n/a")))
    return "*" + " ".join(parts) + "*"


def _budget(b: float) -> str:
    """2^k (claims.common.budget_text)."""
    from isocompute.reports.claims.common import budget_text

    return budget_text(b)


def _caption_row(pos: str, row: dict, top: str, f1_verdict: str) -> str:
    """One lr choice of the headline caption: its lr, interference's n* at the top budget with its stake and
    the gain of large n (with finding 1's verdict on the recipe row), the tabular policy's n*."""
    roles = row["roles"]
    if row["key"] == "recipe":
        lrs = " and ".join(f"{r['base_lr']:g} ({role})" for role, r in roles.items()
                           if r["base_lr"] is not None)
        what = (f"the paper's recipe (lr = base x sqrt(bp n / 256) with the base lr {lrs} chosen on tuning "
                "seeds, KL + entropy)")
        verdict = ("n*(C) grows with compute: finding 1 reproduced" if f1_verdict == "reproduced"
                   else f"the claims report's verdict on finding 1: {f1_verdict}")
    elif row["key"] == "constant":
        what = f"the preset's constant lr {row['lr']:g} (a sensitivity row, not a verdict)"
        verdict = ""
    else:
        what = "the backend's own recipe and lr"
        verdict = f"the claims report's verdict on finding 1: {f1_verdict}"
    inter, tab = roles.get("interference", {}).get("top"), roles.get("tabular", {}).get("top")
    out = f"{pos + ', ' if pos else ''}{what}:"
    if inter:
        out += f" interference n* at {top} is {_set(inter)}{_caption_stake(inter['stake'])};"
    out += f" the top-budget gain of the best large n over the best small n is {_gt(row['gain'])}"
    out += f"; {verdict}" if verdict else ""
    if tab:
        out += f"; tabular n* at {top} is {_set(tab)}"
    return out + "."


def _caption_stake(st: dict | None) -> str:
    """', with nothing at stake (n* is the best small n)' or ', gaining +0.0041 [+0.0012, +0.0070] over the
    best small n' (the stake beside n*, claims.common.stakes); empty without one."""
    if not st:
        return ""
    if st["estimate"] == 0 and st["lo"] == 0 and st["hi"] == 0:
        return ", with nothing at stake (n* is the best small n)"
    within = " (inside the equivalence margin)" if st["within"] else ""
    return f", gaining {st['estimate']:+.4f} [{st['lo']:+.4f}, {st['hi']:+.4f}] over the best small n{within}"


def _set(top: dict) -> str:
    """'{32-128} (a tie: the seeds cannot tell these n apart)' or '8'."""
    return f"{{{top['set']}}} (a tie)" if top["tie"] else top["set"]


def _demo_caption(d: dict) -> str:
    """The caption of `make demo`'s figure (tabular vs interference at the simulator's default constant
    lr), for a README whose claims summary predates the claims report's headline figure."""
    k = int(round(math.log2(d["budget"])))
    built = (f"Built by `make demo` ({d['seeds']} seeds per n, bp = {d['bp']}, budget 2^{k} rollouts, the "
             f"simulator's default constant lr {d['lr']:g}).")
    return ("*Left: a tabular policy (independent logits per problem); middle and right: a shared MLP "
            "policy (updates interfere across problems), both at the simulator's default constant lr, which "
            "is not the paper's tuned recipe: whether n*(C) grows under the recipe is the claims report's "
            f"question (docs/CLAIMS.md). {built}*")


# --------------------------------------------------------------------------------------- llm-rollout block
def rollout_paragraph(fp32: dict, bf16: dict, when: str = "an unrecorded date") -> str:
    """The vLLM vs transformers rollout sentence, from the two benchmark JSONs, dated `when` (the date they
    were measured: studies.provenance.measured_on)."""
    comp = fp32["prompts"] * fp32["n"]
    return (f"Measured on {when}, on the project's 2-core development CPU (not necessarily yours), by "
            f"`benchmarks/llm_rollout.py` ({fp32['threads']} threads, 1-min load "
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

    summary = _json(root / CLAIMS_JSON)
    write_marked_block(readme, ANSWER_BEGIN, ANSWER_END,
                       answer_paragraph(summary, _json(root / GROUPSTD_JSON), tiny_measure(root)))
    write_marked_block(readme, CLAIMS_BEGIN, CLAIMS_END, claims_paragraph(summary))
    write_marked_block(readme, CAPTION_BEGIN, CAPTION_END, headline_caption(summary))
    write_marked_block(readme, ROLLOUT_MARK, ROLLOUT_MARK, rollout_text(root))


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def rollout_text(root: Path = ROOT) -> str:
    """The llm-rollout block from its JSONs, dated by the first (studies.provenance.measured_on)."""
    from studies.provenance import measured_on

    fp32, bf16 = (json.loads((root / p).read_text()) for p in ROLLOUT_JSONS)
    return rollout_paragraph(fp32, bf16, measured_on(fp32, root / ROLLOUT_JSONS[0]))


# ------------------------------------------------------------------------------------------ answer block
def tiny_measure(root: Path = ROOT) -> dict | None:
    """The preregistered tiny-LM study as its report reads it (isocompute.reports.tiny_study.measure on the
    committed store), or None without the store."""
    store = root / TINY_STORE
    if not (store / "manifest.json").exists():
        return None
    from isocompute.reports import tiny_study as ts

    return ts.measure(ts.FULL, store)


def simulator_answer(summary: dict | None) -> str:
    """The simulator's answer: finding 1 under the tuned recipe, its key interval, the reading at margin 0
    where it differs, and the untuned constant lr beside it; worded from the verdict."""
    if not _current(summary):
        return ("The simulator's answer is generated from docs/CLAIMS.json, which is missing or predates the "
                "tuned recipe (`isocompute report claims --docs`).")
    v, f1 = summary["verdicts"].get("f1", "n/a"), summary["f1"]
    g = f1["recipe"]["gain"]
    top = _budget((summary.get("headline") or {}).get("top", 2**22))
    head = {"reproduced": "a larger n wins as compute grows: the paper's finding 1 (n*(C) grows with "
                          "compute) is reproduced",
            "not reproduced": "a larger n does not win: the paper's finding 1 (n*(C) grows with compute) is "
                              "not reproduced"}.get(v, f"whether a larger n wins is not settled: the paper's "
                                                     f"finding 1 (n*(C) grows with compute) reads '{v}'")
    sets = summary.get("seed_sets") or []
    on = f" on {len(sets)} disjoint seed sets" if len(sets) > 1 else ""
    text = (f"In the simulator, under the paper's recipe with its learning rate tuned on held-out seeds, "
            f"{head}{on} (the best large n minus the best small n at {top}: {_iv_text(g)})")
    z = (summary.get("zero") or {}).get("f1")
    if z and z != v:
        text += f"; with no margin on that gain the verdict reads '{z}'"
    pre = f1.get("preset")
    if pre and pre.get("gain"):
        text += (f"; at the simulator's untuned constant lr {pre['lr']:g} the same gain is "
                 f"{_iv_text(pre['gain'])}, {_above(pre['gain'])}")
    return text + " ([docs/CLAIMS.md](docs/CLAIMS.md))."


def _iv_text(g: dict) -> str:
    return f"{g['estimate']:+.4f} [{g['lo']:+.4f}, {g['hi']:+.4f}]"


def tiny_answer(x: dict | None) -> str:
    """The real transformer's answer, from the preregistered tiny-LM study's arm R (reported seeds): n* per
    split, the stake at the top budget, the lag of the largest n behind the smallest (studies.fit.lag, as the
    study reads it) and the preregistered verdict with why it stays open; worded from those numbers."""
    if x is None:
        return "The real transformer's answer needs the tiny-LM study's store (docs/tiny_study/store)."
    parts, stakes, speed_only, verdicts, open_ = [], [], True, set(), False
    for key, res in x["parts"].items():
        a, part = res["arms"].get("R") or {}, res["part"]
        v, stars = a.get("verdict"), a.get("stars") or []
        if v is None or not stars:
            continue
        verdicts.add(v.outcome)
        pts = [s.point for s in stars]
        star = (f"n* = {pts[0]} at every budget to {_budget(part.readout[-1])}" if len(set(pts)) == 1
                else "n* " + ", ".join(map(str, pts)))
        st = v.numbers.get("stake") or {}
        if st.get("n_large") is not None:
            stakes.append(st)
            star += (f", n = {st['n_large']} − n = {st['n_small']} = {st['mean']:+.3f} [{st['lo']:+.3f}, "
                     f"{st['hi']:+.3f}] there")
        pair = next((q for q in ((a.get("readings") or {}).get("lag") or {}).get("pairs", [])
                     if q["n"] == max(part.ns)), None)
        same = bool(pair) and pair["lag"].get("trend") == "constant" and (
            (pair.get("ceiling") or {}).get("verdict") == "same")
        if pair and pair["lag"].get("status") == "ok":
            star += (f", n = {pair['n']} {'learns the same curve as' if same else 'trails'} n = "
                     f"{pair['reference']}, {pair['lag']['lag']:.1f} octaves of compute later")
        speed_only &= same
        open_ |= not (v.numbers.get("p_small") and v.numbers.get("p_large"))
        parts.append(f"{key}: {star}")
    if not parts:
        return "The real transformer's study has no verdict yet ([docs/TINY_STUDY.md](docs/TINY_STUDY.md))."
    small = bool(stakes) and all(np.isfinite(s["hi"]) and s["hi"] < 0 for s in stakes)
    head = ("small n wins at every budget so far" if small else
            "large n does not win" if stakes and all(s["lo"] <= 0 for s in stakes) else
            "the study's readings differ by split")
    how = (" So far n changes how fast a run learns, not how high it rises." if speed_only else "")
    rule = ", ".join(sorted(verdicts))
    still = ", as the smallest and largest n were still rising at the top budget" if open_ else ""
    return (f"On a real transformer (the shipped tiny LM in a preregistered study to 2^20 rollouts), {head}: "
            + "; ".join(parts) + f".{how} Its preregistered rule reads {rule}{still} "
            "([docs/TINY_STUDY.md](docs/TINY_STUDY.md)).")


def mechanism_answer(summary: dict | None, gs: dict | None) -> str:
    """Which mechanism: how many of the mechanism study's ingredients make n*(C) rise under a per-n tuned
    lr (docs/CLAIMS.json), and the group-std rule at each KL coefficient (docs/GROUP_STD.json)."""
    out = []
    mech = (summary or {}).get("mechanisms")
    if mech:
        out.append(f"under a per-n tuned lr {len(mech['rises'])} of the {mech['of']} simulator ingredients "
                   "tested make n*(C) rise ([docs/MECHANISMS.md](docs/MECHANISMS.md))")
    if gs and gs.get("by_kl"):
        main = f"{gs['kl']:g}" if gs.get("kl") is not None else None
        by = gs["by_kl"]
        c = (by.get(main) or {}).get("group")
        at = "; ".join(f"{r['verdict']} at KL {k}" for k, r in by.items())
        only = (main is not None and by[main]["verdict"] == "shown"
                and all(r["verdict"] != "shown" for k, r in by.items() if k != main))
        lead = (f"the gain of std-normalised advantages makes large n win only against a KL pull of "
                f"coefficient {main}" if only else "the group-std rule reads")
        gain = (f" (n = {c['n_large']} − n = {c['n_small']} = {c['diff']:+.3f} [{c['lo']:+.3f}, "
                f"{c['hi']:+.3f}] there)" if only and c else "")
        out.append(f"{lead}{gain}: {at} ([docs/GROUP_STD.md](docs/GROUP_STD.md))")
    if not out:
        return ""
    return "Why: " + "; ".join(out) + "."


def answer_paragraph(summary: dict | None, gs: dict | None, tiny: dict | None) -> str:
    """README's first paragraph: the project's answer in three sentences (simulator, real transformer,
    mechanism), each generated from its report's data and linking its document."""
    return " ".join(p for p in ("**The answer so far.** " + simulator_answer(summary), tiny_answer(tiny),
                                mechanism_answer(summary, gs)) if p)
