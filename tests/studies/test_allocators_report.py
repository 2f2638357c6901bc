"""isocompute.reports.allocators: interpolation at C, n* envelope and paired SEs on a synthetic table; the
Holm flags of a table on hand-computed cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from isocompute.reports.allocators import at_budget, compare


def _table():
    rows = []
    for seed in range(3):
        for alloc, slope in (("fixed-n2", 1.0), ("fixed-n8", 2.0), ("knapsack", 2.0 + 0.1 * (seed + 1))):
            for c in (0, 100, 400):
                v = 0.0 if c == 0 else slope * math.log(c / 100) + seed
                rows.append({"run_id": f"{alloc}-{seed}", "allocator": alloc, "seed": seed, "n": 8,
                             "compute": c, "m": c // 10, "val_mean": v})
    return pd.DataFrame(rows)


def test_at_budget_interpolates_in_log_compute():
    pts = at_budget(_table(), "val_mean", 200).set_index("run_id")
    assert pts.loc["fixed-n8-0", "value"] == pytest.approx(2.0 * math.log(2))  # halfway in log: 0 .. 2 log 4
    assert pts.loc["fixed-n8-0", "compute"] == 200


def test_compare_envelope_and_paired_se():
    star, df = compare(_table(), "val_mean", 400)
    assert star == "fixed-n8"
    k = df.set_index("allocator").loc["knapsack"]
    diffs = [0.1 * (s + 1) * math.log(4) for s in range(3)]
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    assert k["diff"] == pytest.approx(mean) and k["se"] == pytest.approx(sd / math.sqrt(3))
    assert k["seeds"] == 3


def test_marks_holm_over_a_table_by_hand():
    """Two-sided paired t-tests on 8 seeds (7 df), Holm over the family. t = 2.5 and 2.6 (p 0.0410 and
    0.0354) are each more than 2 SE above, but Holm over the two asks p_(1) <= 0.025: neither is flagged.
    With t = 5, 4 (below) and 3 (p 0.00157, 0.00519, 0.0199) added, the five sorted p times 5, 4, 3, 2, 1 give
    0.0078, 0.0208, 0.0598, ...: t = 5 above and t = 4 below are flagged, the rest are not."""
    from isocompute.reports.allocators import marks

    two = {"a": (0.025, 0.01, 8), "b": (0.026, 0.01, 8)}
    assert marks(two) == {"a": "", "b": ""}
    five = {**two, "c": (0.05, 0.01, 8), "d": (-0.04, 0.01, 8), "e": (0.03, 0.01, 8)}
    assert marks(five) == {"a": "", "b": "", "c": "above", "d": "below", "e": ""}
    assert marks({"a": (0.025, 0.01, 8)}) == {"a": "above"}  # alone: p 0.041 <= 0.05


def test_marks_never_flag_a_difference_that_reads_zero():
    from isocompute.reports.allocators import _cell, marks

    m = marks({"tiny": (3e-5, 1e-7, 8), "none": (0.0, 0.0, 8), "real": (0.02, 0.001, 8)})
    assert m == {"tiny": "", "none": "", "real": "above"}
    assert _cell(3e-5, 1e-7, m["tiny"]) == "+0.0000 +- 0.0000"
    assert _cell(0.02, 0.001, m["real"]).endswith(" **")


def test_claim_verdicts_grouped_by_what_the_data_say():
    """A compute ratio whose interval clears the claimed factor holds; one that contains it is not excluded;
    one above 1 but below the factor is a smaller saving; `never` does not hold. Allocators judged by reward
    (no stated factor) hold only when flagged above their base n."""
    from isocompute.reports.allocators import FACTORS, verdict_groups

    Cs = [2**12, 2**14]
    f = FACTORS["knapsack"]
    rows = [("knapsack", f + 0.5, f + 0.1, f + 1.0), ("pilot-commit", 1.2, 1.05, 1.4),
            ("skip-zero-var", 0.0, 0.0, 0.0), ("gvm", 1.5, 0.9, 2.5),
            ("ada", 3.0, 2.0, 4.0), ("dynamic-sampling", 0.0, 0.0, 0.0)]
    eq = pd.DataFrame([{"allocator": a, "C": float(C), "own": r, "own_lo": lo, "own_hi": hi,
                        "env": r, "env_lo": lo, "env_hi": hi} for a, r, lo, hi in rows for C in Cs])
    own = {"knapsack": (0.01, 0.001, "above"), "pilot-commit": (0.0, 0.01, ""),
           "skip-zero-var": (-0.02, 0.002, "below"), "gvm": (0.0, 0.01, ""),
           "ada": (0.03, 0.005, "above"), "dynamic-sampling": (-0.01, 0.01, "")}
    g = verdict_groups(eq, own, Cs)
    name = {k: [e.split(":")[0] for e in v] for k, v in g.items()}
    assert name["holds"] == ["knapsack"]
    assert name["a smaller saving than claimed"] == ["pilot-commit"]
    assert name["does not hold"] == ["skip-zero-var"]
    assert name["not excluded"] == ["gvm"]
    assert name["a gain in the claimed direction"] == ["ada"]
    assert name["not shown"] == ["dynamic-sampling"]
