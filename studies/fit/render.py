"""A fit as text, the one rendering of a `studies.fit.report.fit_report` (`print_fit_report`), which
`isocompute fit` and `demo` print and the LLM-study report writes to fit.txt: lines handed to `echo`, so
the caller decides where they go. Its fitting modules load when a fit is rendered, not on import."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def fmt_c(c: float) -> str:
    """A compute as people read it: 2^k for a power of two, else 3 significant digits."""
    if c > 0 and float(math.log2(c)).is_integer():
        return f"2^{int(math.log2(c))}"
    return f"{c:.3g}"


def print_fit_report(report: dict[str, Any], echo: Callable[[str], None], every: int = 1) -> None:
    """A `studies.fit.report.fit_report` as text, the one rendering of a fit: what cannot be used first
    (degenerate per-configuration fits), then n*(C) one row per frontier compute (every `every`-th and the
    last) with the frontier's value, the best's interval and n* as its set where the seeds cannot tell, how
    n* moves where it is determined, the certainty at the largest compute, the fits and the extrapolation,
    and the speed-or-ceiling block where the report has one (`print_lag`)."""
    from studies.fit.extrapolation import extrapolation_verdict
    from studies.fit.nstar import change_text, numeric_keys, set_text

    by, metric = report.get("by", "n"), report.get("metric", "val_mean")
    frontier = report.get("frontier", [])
    curves = report.get("curves", [])
    fits = report.get("fits") or {}
    ns = report.get("n_star") or {}
    grid = [c.get(by) for c in curves]
    bad = fits.get("degenerate") or {}
    if bad:
        shown = "; ".join(f"{by}={k}: {v}" for k, v in bad.items())
        head = ("every per-" + by if len(bad) == len(curves) else f"{len(bad)} of {len(curves)} per-" + by)
        echo(f"{head} sigmoid fit(s) degenerate ({shown}): no {by}*(C) fit and no extrapolation verdict; "
             f"{by}* below is read from the measured records only")
    keep = [i for i in range(len(frontier)) if i % every == 0 or i == len(frontier) - 1]
    level = f"{ns.get('level', 0.9):.0%}"
    echo(f"compute-optimal {by}*(C) for {metric} ({len(curves)} curves, {len(keep)} of {len(frontier)} "
         f"computes): {by}* is the set of {by} whose {level} interval reaches the best's (seed-mean record, "
         f"{ns.get('reps')} resamples of the runs)")
    echo(f"{'compute':>12}  {metric:>10}  {level + ' interval':>18}  {by + '*'}")
    marks = set()
    for i in keep:
        f = frontier[i]
        members = f.get("set") or ([] if f.get(by) is None else [f.get(by)])
        if f.get("tie"):
            mark = " (tie)"
        elif not f.get("determined"):
            mark = " (alone)"
        else:
            mark = ""
        marks.add(mark.strip())
        lo, hi = f.get("reward_interval") or (None, None)
        iv = f"[{_num4(lo)}, {_num4(hi)}]"
        echo(f"{fmt_c(float(f['compute'])):>12}  {_num4(f.get('reward')):>10}  {iv:>18}  "
             f"{set_text(members, grid)}{mark}")
    if "(tie)" in marks:
        echo(f"(tie): every {by} listed is within the best's interval: these seeds cannot tell them apart")
    if "(alone)" in marks:
        echo(f"(alone): the only {by} with an evaluation at or below that compute")
    cert = report.get("certainty") or {}
    print_certainty(cert, by, metric, echo, grid)
    if ns.get("change") is not None and not ns.get("none_improved") and numeric_keys(grid):
        echo(change_text(ns["change"], by, grid, fmt=fmt_c) + f" ({ns.get('determined', 0)} of "
             f"{len(frontier)} computes determine {by}*)")
    if curves:
        echo("per-curve fits R(C) = R0 + (A - R0) / (1 + (C_mid / C)^b):")
        for cur in curves:
            params = ", ".join(f"{k}={_num(v)}" for k, v in (cur.get("params") or {}).items())
            status = "" if cur.get("status", "ok") == "ok" else f"  ({cur['status']})"
            echo(f"  {by}={cur.get(by)}: {params}  r2={_num(cur.get('r2'))}{status}")
    nsf = report.get("n_star_fit")
    if nsf and not bad:
        if nsf.get("shape") == "sigmoid":
            params = ", ".join(f"{k}={_num(v)}" for k, v in (nsf.get("params") or {}).items())
            echo(f"log2 {by}* vs log C sigmoid on the {nsf.get('points')} determined computes: {params}  "
                 f"r2={_num(nsf.get('r2'))}")
        else:
            echo(f"log2 {by}* vs log C: {nstar_fit_text(report)}")
    ex = report.get("extrapolation")
    if ex and not bad:
        echo(extrapolation_verdict(ex, fmt=fmt_c))
    if report.get("lag"):
        print_lag(report["lag"], echo)


def print_lag(lag: dict[str, Any], echo: Callable[[str], None]) -> None:
    """The speed-or-ceiling block of a `studies.fit.lag.lag_report`: a head line, then per pair (smallest
    n, other n) its lag line, the lag against lr x steps and val at matched train reward."""
    from studies.fit.lag import ceiling_text, lr_text

    by, metric = lag.get("by", "n"), lag.get("metric", "val_mean")
    if lag.get("status") not in ("ok", None) and not lag.get("pairs"):
        echo(f"speed or ceiling: {lag.get('status')}")
        return
    seeds = sorted({p.get("seeds") for p in lag.get("pairs") or []})
    shown = "-".join(map(str, [seeds[0], seeds[-1]] if len(seeds) > 1 else seeds))
    echo(f"speed or ceiling: each {by}'s {metric} seed-mean record against {by} = {lag.get('reference')}'s, "
         f"lag in octaves of {lag.get('x')} at matched reward ({lag.get('level', 0.9):.0%} intervals, "
         f"{shown} seeds, {lag.get('reps')} resamples)")
    if lag.get("status") != "ok":
        echo(f"  note: {lag.get('status')}")
    for p in lag.get("pairs") or []:
        echo(f"  {p['text']}")
        if p["lag"].get("status") == "ok":
            echo(f"    {lr_text(p['lr_steps'])}")
        echo(f"    {ceiling_text(p['ceiling'], by, p[by], p['reference'], metric)}")


def nstar_fit_text(report: dict[str, Any]) -> str:
    """What the report's sigmoid of log2 n* against log C is, in a few words: "sigmoid r2 0.92 (7
    determined computes)" where it describes a determined trend, else why there is none (not fitted and
    why; flat: no determined change of n*; a sigmoid through a noisy n*, whose parameters mean nothing).
    The one wording of `fit`'s output and of the figures' gallery lines."""
    by = report.get("by", "n")
    nsf = report.get("n_star_fit") or {}
    change = (report.get("n_star") or {}).get("change") or {}
    if nsf.get("shape") == "sigmoid":
        return f"sigmoid r2 {_num(nsf.get('r2'))} ({nsf.get('points')} determined computes)"
    if nsf.get("params") is None:
        return str(nsf.get("status") or "not fitted")
    if not change.get("rise") and not change.get("fall"):
        return f"flat (no determined change of {by}*: no sigmoid to fit)"
    return f"flat (r2 = {_num(nsf.get('r2'))} < 0.5, or {nsf.get('status')})"


def print_certainty(cert: dict[str, Any], by: str, metric: str, echo: Callable[[str], None],
                    grid: list | None = None) -> None:
    """The lines of studies.fit.certainty.assess: the answer at the largest compute (the frontier's last row)
    and how sure it is."""
    from studies.fit.nstar import set_text

    if not cert or cert.get("n_star") is None:
        for note in (cert or {}).get("notes") or []:
            echo(f"note: {note}")
        return
    lo, hi = cert.get("reward_interval") or (None, None)
    level = f"{cert.get('level', 0.9):.0%}"
    regret, r_iv = cert.get("expected_regret"), cert.get("expected_regret_interval")
    said = "" if regret is None else f"; expected regret of {by} = {cert['n_star']}: {_num(regret)}"
    if said and r_iv:
        said += f" {level} interval [{_num4(r_iv[0])}, {_num4(r_iv[1])}]"
    echo(f"at C = {fmt_c(float(cert['budget']))}: best measured {by} = {cert['n_star']} ({metric} seed-mean "
         f"record {level} interval [{_num4(lo)}, {_num4(hi)}]); within it: {by} = "
         f"{set_text(cert.get('flat_set') or [], grid)}{said}")
    for note in cert.get("notes") or []:
        echo(f"note: {note}")


def _num4(v: Any) -> str:
    return "-" if v is None else f"{float(v):.4f}"


def _num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)

