"""The policy presets: one table per backend that maps a policy role to the RunConfig fields of its runs.

Every consumer that names a role (the figures of paper_figs, the claims report and its group-std study, the
tiny-LM study, the allocators study, `isocompute demo`) reads it here. A run id is a hash of the RunConfig
(studies.config.RunConfig.run_id), so two tables that spell one configuration differently (an lr written out
in one, left to the backend's default in the other) give the same runs two ids, and a figure and a report
cannot share them; one table gives one configuration one id everywhere, and a stronger preset swaps in for
every consumer by editing one entry.

Spelling: a preset writes only what differs from the backend's defaults. The simulator's roles leave lr to
the simulator's default (`preset_lr`), as `isocompute demo` and the figures always have, so their stored
runs keep their ids; a consumer that asks for a constant lr equal to the preset's leaves it unwritten too
(isocompute.reports.claims.common.ClaimsMode.lr_overrides), so "constant lr 0.1" and the preset are one run.
The committed tiny-LM store (docs/tiny_study/store) is keyed by the tiny role's fields, `{"lm": "tiny"}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cpu_dtype() -> str:
    from studies.backends import llm_cpu_dtype

    return llm_cpu_dtype()


CPU_LLM: dict[str, Any] = {
    "engine": "vllm",
    "engine_dtype": _cpu_dtype(),
    "train_dtype": _cpu_dtype(),
    "max_new_tokens": 16,
    "d_val": 16,
}
"""RunConfig fields / llm options of the CPU-sized real-model preset (SmolLM2-135M, minutes per study on
2 cores): rollouts and training in the CPU's precision (bf16 with AMX / AVX-512 BF16, float32 elsewhere,
where bf16 is ~20x slower; llm_backend.config.cpu_dtype), 16 new tokens, 16 validation problems. The dtype
is written into the options so that it is part of every run id. The grid (bp 4, n 2..8, budget 256, 1 seed)
is the consumer's (paper_figs.specs.LLM_GRID, isocompute.reports.claims.common.LLM_QUICK)."""

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "sim": {
        "tabular": {"model": "tabular"},
        "interference": {"model": "interference"},
        "linear": {"model": "linear"},
        "mlp": {"model": "mlp"},
        "skills": {"model": "skills"},
    },
    "llm": {"interference": CPU_LLM},
    "tiny": {"interference": {"lm": "tiny"}},
}
"""Table -> policy role -> RunConfig fields (other keys are backend options, studies.declared.study_configs).
"sim": the simulator's policies (sandbox/policies.py) at its own defaults (Adam, constant lr 0.1); "llm":
SmolLM2's CPU preset, a real LM that interferes across problems by construction, so it plays the
interference role (the tabular / linear / mlp / skills roles have no LM counterpart); "tiny": the llm
backend on the shipped tiny LM (`--lm tiny`) at its own defaults (llm_backend.config.TINY_DEFAULTS)."""

DEMO_ROLES: tuple[tuple[str, str, str], ...] = (
    # tabular validation problems never move (no shared parameters), so claim 1 is read on training problems
    ("tabular", "train_mean", "the theory's claim: many small steps win, n* stays at the smallest n "
                              "(docs/PAPER.md 5.1)"),
    ("interference", "val_mean",
     "the paper's finding 1: with interference n* grows with C, then saturates (docs/PAPER.md); whether it "
     "does under the paper's tuned recipe is the claims report's question (printed at the end)"),
)
"""(role, metric, claim) of `isocompute demo` and the headline figure (paper_figs/headline.py): the
simulator's two roles of the theory's claim 1, each read on the reward where the claim lives. The claims are
the paper's, stated as claims: the demo runs at the untuned constant lr and prints what the claims report
finds under the tuned recipe beside it (`demo_contrast`)."""

CLAIMS_JSON = Path(__file__).resolve().parents[1] / "docs" / "CLAIMS.json"
"""The numbers `isocompute report claims --docs` writes beside docs/CLAIMS.md (its layout:
isocompute.reports.readme.summary_of), which `demo_contrast` quotes."""


def demo_contrast(summary: dict | None) -> list[str]:
    """What `isocompute demo` prints after its constant-lr rows: finding 1 as the claims report reads it
    under the paper's tuned recipe, and at the same constant lr, from its JSON `summary` (None: where to find
    it). Every number and verdict is the report's."""
    def iv(g: dict | None) -> str:
        return "n/a" if not g else f"{g['estimate']:+.4f} [{g['lo']:+.4f}, {g['hi']:+.4f}]"

    f1 = (summary or {}).get("f1")
    if not f1 or "recipe" not in f1:
        return ["The tuned recipe beside this constant lr: docs/CLAIMS.md (`isocompute report claims --docs` "
                "writes it and docs/CLAIMS.json)."]
    rec, pre = f1["recipe"], f1.get("preset") or {}
    sets = " and ".join(f"seeds {s}" for s in summary.get("seed_sets") or []) or "its seeds"
    top = (summary.get("headline") or {}).get("top")
    budget = f"2^{int(top).bit_length() - 1}" if top else "its top budget"
    out = [f"== the same question under the paper's recipe (claims report, docs/CLAIMS.md, finding 1; "
           f"{sets}, budgets to {budget}):",
           f"  paper's recipe (sqrt lr rule, base lr {rec['base_lr']:g} tuned on held-out seeds, KL + "
           f"entropy): {summary['verdicts'].get('f1', 'n/a')}; best large n minus best small n at {budget} "
           f"{iv(rec.get('gain'))}"]
    if pre:
        out.append(f"  constant lr {pre['lr']:g}, as in this demo (a sensitivity row, not a verdict): the "
                   f"same gain {iv(pre.get('gain'))}")
    return out

DEMO_BASE: dict[str, int] = {"d": 512, "d_val": 256, "n_evals": 24}
"""RunConfig fields of `isocompute demo`'s runs beyond the role's (bp 32, easy, n 2..256): the headline
figure declares the same (paper_figs.catalog.HEADLINE_BASE), so `isocompute figs --only headline --reuse`
finds the demo's runs."""


def presets_for(backend: str, lm: str | None = None) -> dict[str, dict[str, Any]]:
    """The roles of one backend: the simulator's, the tiny LM's (`backend` llm with `lm` "tiny") or
    SmolLM2's CPU preset (`backend` llm otherwise)."""
    return PRESETS["tiny" if backend == "llm" and lm == "tiny" else backend]


def preset_lr(backend: str, role: str = "interference", lm: str | None = None) -> float | None:
    """The lr a role's runs train with: the one its preset writes, else the simulator's default on the
    simulator; None on the llm backend, whose default depends on the model."""
    fields = presets_for(backend, lm).get(role, {})
    if "lr" in fields:
        return float(fields["lr"])
    if backend == "sim":
        from studies.backends import sim_default

        return float(sim_default("lr"))
    return None
