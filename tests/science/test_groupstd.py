"""The group-std study (isocompute/reports/claims/groupstd.py): the verdict rule as declared
there, the fast record frame against run_rewards, the readout on a synthetic sweep whose answer is known, the
declaration, and the quick command end to end (slow)."""

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims.groupstd import (
    ARMS,
    GROUP_KL,
    INCONCLUSIVE,
    KL_EXT,
    KL_MID,
    NONE_KL,
    PAPER_KL,
    RULED_OUT,
    SHOWN,
    SIZES,
    Size,
    all_arms,
    boot_stars,
    extreme_contrast,
    kl_pairs,
    measure_arm,
    records,
    spec,
    studies_of,
    verdict,
    verdict_kl,
    verdicts_by_kl,
)
from isocompute.reports.claims.wgain import w_gain
from studies.fit.analyses import run_rewards
from studies.fit.sigmoid import sigmoid


def _arm(diff: float, half: float, growth: float = 8.0) -> dict:
    return {
        "top": {
            "n_small": 2,
            "n_large": 128,
            "diff": diff,
            "ci": half,
            "lo": diff - half,
            "hi": diff + half,
            "wins": 0,
            "seeds": 8,
        },
        "growth": growth,
    }


def test_verdict_rule_as_written():
    # shown: group + KL CI above 0, n* rising >= 4x, none + KL flat (CI containing 0) or below
    assert verdict(_arm(0.03, 0.01), _arm(0.0, 0.01))[0] == SHOWN
    assert verdict(_arm(0.03, 0.01), _arm(-0.05, 0.01))[0] == SHOWN
    # none + KL also above 0: not the gain, so not shown (and group's CI is above 0.01: not ruled out)
    v, why = verdict(_arm(0.03, 0.01), _arm(0.03, 0.01))
    assert v == INCONCLUSIVE and "none + KL flat" in why
    # rising only 2x, or falling (last / first < 1): inconclusive
    assert verdict(_arm(0.03, 0.01, growth=2.0), _arm(0.0, 0.01))[0] == INCONCLUSIVE
    assert verdict(_arm(0.03, 0.01, growth=0.25), _arm(0.0, 0.01))[0] == INCONCLUSIVE
    # a lower bound of exactly 0 is not above 0
    assert verdict(_arm(0.01, 0.01), _arm(0.0, 0.01))[0] == INCONCLUSIVE
    # ruled out: the group + KL upper bound below +0.01 (whatever none + KL does)
    assert verdict(_arm(-0.02, 0.005), _arm(0.03, 0.01))[0] == RULED_OUT
    assert verdict(_arm(0.004, 0.005), _arm(0.0, 0.01))[0] == RULED_OUT
    # an upper bound of exactly 0.01 is not below it; a CI straddling 0 reaching above 0.01 is inconclusive
    assert verdict(_arm(0.005, 0.005), _arm(0.0, 0.01))[0] == INCONCLUSIVE
    v, why = verdict(_arm(0.0, 0.02), _arm(0.0, 0.01))
    assert v == INCONCLUSIVE and "What would decide it" in why
    # no CI (one seed): never shown, never ruled out
    assert verdict(_arm(0.05, float("nan")), _arm(0.0, 0.01))[0] == INCONCLUSIVE


def test_the_rule_is_read_at_every_kl_coefficient_and_named():
    """verdicts_by_kl: the rule at each KL coefficient with both scale arms; the text names the coefficient,
    and the report's lines put the declared verdict's KL first and the others beside it."""
    from isocompute.reports.claims.groupstd_report import kl_lines

    measured = {"group-kl0": _arm(0.0, 0.005), "none-kl0": _arm(0.0, 0.005), "group-kl0.1": _arm(0.015, 0.02),
                "none-kl0.1": _arm(0.0, 0.01), "group-kl1": _arm(0.2, 0.01), "none-kl1": _arm(0.0, 0.01)}
    by = verdicts_by_kl(measured, all_arms(SIZES["full"]))
    assert {k: v for k, (v, _) in by.items()} == {0.0: RULED_OUT, 0.1: INCONCLUSIVE, 1.0: SHOWN}
    assert "group + KL 1: n=128 - n=2 = +0.2000" in by[1.0][1] and "none + KL 1:" in by[1.0][1]
    assert "group + KL 0.1" in by[0.1][1]
    for m in measured.values():
        m["rows"] = [{"per_n": {2: (0.5, 0.01), 128: (0.5 + m["top"]["diff"], 0.01)}}]
    x = {"size": SIZES["full"], "arms": measured, "kl": 1.0, "by_kl": by}
    text = "\n".join(kl_lines(x))
    assert "at KL 0: **ruled out**" in text
    assert "at KL 0.1 (declared after this verdict was known): **inc" in text
    assert "at KL 1:" not in text.split("So the verdict")[0]  # the declared verdict is not repeated beside
    assert "measured against a KL pull of coefficient 1" in text
    assert "KL 1: n = 2 0.500, n = 128 0.700" in text
    x["by_kl"] = {**by, 1.0: (INCONCLUSIVE, "")}
    assert "measured against" not in "\n".join(kl_lines(x))  # said only where the verdict is "shown"
    assert verdict_kl(SIZES["llm"]) == 0.1


def test_the_tiny_lm_paragraph_quotes_its_source_exactly():
    """Every number of the folded tiny-LM paragraph stands in the retired page at the commit it names, and the
    count of tuned-lr cells at 1e-4 is that page's table's."""
    import re
    import subprocess
    from pathlib import Path

    from isocompute.reports.claims.groupstd_report import (
        TINY_LR_CELLS,
        TINY_QUOTED,
        TINY_SOURCE,
        tiny_lm_paragraph,
    )

    root = Path(__file__).resolve().parents[2]
    commit, path = TINY_SOURCE
    page = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{path}"], capture_output=True,
                          text=True, check=True).stdout
    for key, quoted in TINY_QUOTED.items():
        assert quoted in page, key
        assert quoted in tiny_lm_paragraph(), key
    table = page.split("Tuned lr per n (tuning seeds), at each budget:")[1].split("\n\n")[1]
    cells = re.findall(r"\d+: ([\d.e-]+)", table)
    assert (sum(float(c) == 1e-4 for c in cells), len(cells)) == TINY_LR_CELLS
    assert f"git show {commit}:{path}" in tiny_lm_paragraph()


def test_extreme_contrast_is_the_paired_largest_minus_smallest():
    piv = pd.DataFrame({2: [0.5, 0.6, 0.7], 8: [0.9, 0.9, 0.9], 32: [0.55, 0.62, 0.74]}, index=[2, 3, 4])
    c = extreme_contrast(piv)
    d = np.array([0.05, 0.02, 0.04])
    assert (c["n_small"], c["n_large"], c["wins"], c["seeds"]) == (2, 32, 3, 3)
    assert c["diff"] == pytest.approx(d.mean())
    assert c["ci"] == pytest.approx(4.302653 * d.std(ddof=1) / np.sqrt(3), rel=1e-5)  # t(0.975, 2 df)
    assert c["lo"] == pytest.approx(c["diff"] - c["ci"]) and c["hi"] == pytest.approx(c["diff"] + c["ci"])


LRS = (1e-3, 1e-2, 1e-1)
SIZE = Size(
    "t",
    "sim",
    ns=(2, 8, 32, 128),
    bp=32,
    budgets=(2**14, 2**16, 2**18, 2**20),
    seeds=6,
    tune=2,
    lrs=LRS,
    over=(("d_val", 64),),
    boot=4,
)


def _table(large_wins: bool = True, tune_lr: float = 1e-2, report_lr: float = 1e-2) -> pd.DataFrame:
    """n-vs-m sweep: a sigmoid per n (large n slower; higher plateau when large_wins) minus a penalty for the
    lr's distance from the best lr, which is tune_lr on the tuning seeds and report_lr on the others."""
    rng = np.random.default_rng(0)
    parts = []
    for n in SIZE.ns:
        C = np.concatenate([[0.0], np.geomspace(32 * n, SIZE.budgets[-1], 24)])
        A = 0.6 + (0.06 if large_wins else -0.06) * np.log2(n) / 7
        base = sigmoid(np.maximum(C, 1.0), 0.3, A, 40.0 * n, 1.5)
        for lr in LRS:
            for s in range(SIZE.seeds):
                opt = tune_lr if s < SIZE.tune else report_lr
                pen = 0.05 * abs(np.log10(lr) - np.log10(opt))
                parts.append(
                    pd.DataFrame(
                        {
                            "run_id": f"n{n}-lr{lr}-s{s}",
                            "compute": C,
                            "n": n,
                            "bp": 32,
                            "seed": s,
                            "variant": f"lr={lr:g}",
                            "val_mean": base - pen + rng.normal(0, 0.002, C.size),
                        }
                    )
                )
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def table():
    return _table()


def test_records_equal_run_rewards(table):
    budgets = [1000.0, 2.0**14, 3e5, 2.0**20]
    rec = records(table, budgets)
    for b in budgets:
        want = run_rewards(table, keys=("variant", "n", "bp", "seed"), budget=b, stat="best")
        got = rec.loc[rec["budget"] == b].set_index("run_id")["reward"]
        assert np.array_equal(got.loc[want["run_id"]].to_numpy(), want["reward"].to_numpy())


def test_readout_recovers_the_rise_the_lr_and_the_plateau(table):
    x = measure_arm(table, SIZE)
    assert all(r["lr"] == {n: 1e-2 for n in SIZE.ns} for r in x["rows"]) and x["edges"] == []
    assert x["stars"][0] < x["stars"][-1] == 128 and x["growth"] >= 4
    top = x["top"]
    assert (top["n_small"], top["n_large"]) == (2, 128) and top["lo"] > 0.03 and top["seeds"] == 4
    assert x["rows"][0]["extreme"]["hi"] < 0  # at 2^14 the large n has not caught up
    for s, (lo, hi) in zip(x["stars"], x["stars_ci"], strict=True):
        assert lo <= s <= hi
    tp = x["to_plateau"]
    assert tp["plateau"] == pytest.approx(max(tp["top"].values()))
    assert tp["need"][128] is not None and tp["need"][2] is None  # n = 2 plateaus below 95% of n = 128's
    v, _ = verdict(x, measure_arm(_table(large_wins=False), SIZE))
    assert v == SHOWN


def test_the_lr_is_chosen_on_the_tuning_seeds_only():
    """Tuning seeds peak at lr 1e-1, reported seeds at 1e-3: the choice follows the tuning seeds (and sits on
    the grid's edge, which the readout lists)."""
    x = measure_arm(_table(tune_lr=1e-1, report_lr=1e-3), SIZE)
    assert all(set(r["lr"].values()) == {1e-1} for r in x["rows"])
    assert {e["lr"] for e in x["edges"]} == {1e-1} and not any(e["saturated"] for e in x["edges"])


def test_bootstrap_is_seeded_and_bracketing(table):
    keep = table.loc[(table["seed"] >= 2) & (table["variant"] == "lr=0.01")].assign(
        arm=lambda d: d["n"] * 1.0
    )
    a = boot_stars(keep, SIZE.budgets, [2, 3, 4, 5], 3)
    assert a == boot_stars(keep, SIZE.budgets, [2, 3, 4, 5], 3)
    assert all(lo <= hi for lo, hi in a)


def test_declaration_meets_the_issue():
    s = SIZES["full"]
    assert s.ns == (2, 8, 32, 128) and s.bp == 32 and s.budgets[0] == 2**14 and s.top == 2**20
    assert s.top // (s.bp * max(s.ns)) >= 256  # n = 128 gets >= 256 steps
    assert len(s.lrs) >= 7 and s.tune_seeds == [0, 1] and len(s.report_seeds) >= 6
    assert not set(s.tune_seeds) & set(s.report_seeds)
    assert {(a.scale_rewards, a.kl_coef) for a in s.arms} == {
        ("group", 0.0),
        ("none", 0.0),
        ("group", 1.0),
        ("none", 1.0),
    }
    assert {GROUP_KL, NONE_KL} <= {a.key for a in ARMS}
    # a tenth of the verdict's KL, both scale arms, at n vs m only (not at the fixed total batch)
    assert {(a.scale_rewards, a.kl_coef) for a in s.nvm_arms} == {("group", PAPER_KL), ("none", PAPER_KL)}
    assert PAPER_KL == 0.1 and verdict_kl(s) == 1.0
    names = set(studies_of(s))
    assert all(spec(s, a).name in names for a in s.nvm_arms)
    assert not any(spec(s, a, fixed_batch=True).name in names for a in s.nvm_arms)
    assert list(kl_pairs(all_arms(s))) == [0.0, PAPER_KL, 1.0]
    st = spec(s, ARMS[2])
    base = dict(st.base)
    assert (st.kind, st.preset, st.dataset, base["d"], base["d_val"]) == (
        "n-vs-m",
        "interference",
        "easy",
        256,
        256,
    )
    assert (base["scale_rewards"], base["kl_coef"]) == ("group", 1.0) and len(st.variants) == len(s.lrs)
    fb = spec(s, ARMS[2], fixed_batch=True)
    assert fb.kind == "fixed-batch" and fb.batch == (s.batch,) and fb.name != st.name
    # the diagnostic arms: n = 2 given n = 128's gain-to-KL ratio at p = 1/2 and at p = 0.01
    assert KL_MID == pytest.approx(float(w_gain(0.5, 2) / w_gain(0.5, 128)), abs=1e-4)
    assert (
        KL_EXT == pytest.approx(float(w_gain(0.01, 2) / w_gain(0.01, 128)), abs=1e-4) and KL_EXT < KL_MID < 1
    )
    dg = spec(s, s.diag[0], ns=s.diag_ns)
    assert dg.n == (2, 8) and dict(dg.base)["kl_coef"] == KL_MID and dg.name in studies_of(s)
    llm = SIZES["llm"]
    # sized down from the planned 2^18 (the comment at SIZES["llm"] says what was cut and why)
    assert llm.backend == "llm" and dict(llm.over)["lm"] == "tiny" and llm.bp == 16 and llm.top == 2**16
    assert llm.ns == (2, 8, 32) and len(llm.lrs) >= 5 and len(llm.report_seeds) >= 4
    assert {(a.scale_rewards, a.kl_coef) for a in llm.arms} == {("group", 0.1), ("none", 0.1)}
    assert set(llm.verdict_arms) == {a.key for a in llm.arms} and SIZES["llm-quick"].arms == llm.arms


@pytest.mark.slow
def test_quick_command_end_to_end(tmp_path):
    from click.testing import CliRunner

    from isocompute.reports.cli.groupstd import groupstd

    out, fig, link = tmp_path / "GS.md", tmp_path / "gs.png", tmp_path / "MECH.md"
    link.write_text("# Mechanisms\n\nkept text\n")
    args = [
        "--quick",
        "--results",
        str(tmp_path / "r"),
        "--out",
        str(out),
        "--fig",
        str(fig),
        "--link",
        str(link),
    ]
    res = CliRunner().invoke(groupstd, args)
    assert res.exit_code == 0, res.output
    linked = link.read_text()
    assert linked.startswith("# Mechanisms\n\nkept text\n") and "(GS.md)" in linked
    assert "**n vs m at KL 1: " in linked
    md = out.read_text()
    assert "Verdict (n vs m, the study's rule, read at KL coefficient 1)" in md and "Fixed total batch" in md
    assert "The same rule at the other KL coefficients (shown, not judged): at KL 0: **" in md
    assert fig.stat().st_size > 0
    assert any(v in res.output for v in (SHOWN, RULED_OUT, INCONCLUSIVE))
    bad = CliRunner().invoke(groupstd, ["--quick", "--results", str(out)])  # a file, not a directory
    assert bad.exit_code == 2
    bad = CliRunner().invoke(groupstd, ["--quick", "--link", str(tmp_path / "missing.md")])
    assert bad.exit_code == 2 and not (tmp_path / "missing.md").exists()
