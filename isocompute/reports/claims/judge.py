"""Verdicts from intervals: the one rule by which every claims section turns its key quantity into a verdict.

Why: a verdict that compares two point estimates flips with the seeds or the CPU's round-off (a 0.003 margin
between two means is noise at 8 seeds). Here each rule names one key quantity (a paired difference of
rewards, a difference of ranges, ...), measures it with an interval over seeds, and says

- "reproduced" only when the interval clears the rule's threshold,
- "not reproduced" only when it clears the opposite threshold,
- "inconclusive" otherwise, with the interval shown.

Three kinds of rule (`Rule.kind`):
- "above": the claim is that the quantity is positive (e.g. large n beats small n): reproduced when the 95%
  interval lies above `threshold`, not reproduced when it lies below `opposite` (default: the threshold).
- "below": the mirror image (e.g. small n beats large n on a tabular learner).
- "equivalent": the claim is "no difference" (e.g. B_p matters little): a two one-sided test (TOST, Schuirmann
  1987) at 5% per side, i.e. reproduced when the 90% interval lies inside (-margin, +margin); not reproduced
  when the 95% interval lies wholly outside it (the difference exceeds the margin); the margin is stated in
  the rule (`EQUIVALENCE_MARGIN`, its provenance in `PROVENANCE`).

Every non-zero threshold names its provenance (`Rule.margin_of`, a key of `PROVENANCE`): its value, the
commit that set it and whether it was chosen before or after which data, because a margin chosen after seeing
data must say so. Beside each verdict the report gives the verdict at margin 0 (`at_margin_zero`: the same
rules with every "above" / "below" threshold set to 0) wherever the two differ; equivalence rules keep their
margin there (at 0 no interval can show equivalence).

Intervals (`Interval`) carry 95% and 90% bounds: a t-interval over per-seed values (`t_interval`) or a
percentile seed bootstrap of any statistic of a seed-indexed frame (`seed_bootstrap`). A claim with several
parts combines their verdicts (`combine`); a claim judged on two disjoint seed sets stands only where both
agree (`replicate`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
PARTLY = "partly"
"""A claim with several parts, some reproduced and some not reproduced (none inconclusive)."""
NO_REPLICATION = "does not replicate"
"""The verdict of a claim whose two seed sets disagree."""
LEVEL, EQUIVALENCE_LEVEL = 0.95, 0.90
EQUIVALENCE_MARGIN = 0.01
"""Margin of every "no difference" rule, in reward (pass@1): one point of validation pass@1, about 10 of the
1024 validation problems of the full report. A difference inside it is too small to matter for allocation.
When it was chosen, and after which data: PROVENANCE."""
MIN_GAIN = EQUIVALENCE_MARGIN
"""Threshold of every "large n wins" rule (the top-budget gain of large n, `common.TOP_GAIN`): reproduced only
when the 95% interval of the gain lies above one point of pass@1, not reproduced when it lies below it. A rise
of n* whose reward at stake is under the margin below which the report calls two allocations equivalent
does not make the paper's allocation claim, however resolved the interval; the same margin on both sides
keeps the verdicts exclusive. It was chosen after data that bear on it (PROVENANCE), so the report shows the
verdict at margin 0 beside every verdict it changes."""
OVERFIT_DROP = 0.01
"""Finding 7's threshold: the largest n overfits the small training set when its validation reward falls by
more than this from its peak to the budget (pass1.F7_DROP)."""


@dataclass(frozen=True)
class Provenance:
    """When a threshold of the rules was chosen, relative to the data it judges: `when` "before" or "after"
    the data named in `data`; `commit` set it."""

    name: str
    value: float
    commit: str
    when: str
    data: str

    def text(self) -> str:
        """'MIN_GAIN = 0.01 (set in 35d7515, chosen after ...)'."""
        return f"{self.name} = {self.value:g} (set in {self.commit}; chosen {self.when} {self.data})"


_REPORT_1202 = ("the committed claims report of 2026-12-02 (`git show b4e5768^:docs/CLAIMS.md`: constant "
                "lr, and finding 1 under a tuned lr read against the claim, sqrt rule with a tuned base lr: "
                "no, lr envelope: no)")
PROVENANCE = {
    "EQUIVALENCE_MARGIN": Provenance(
        "EQUIVALENCE_MARGIN", EQUIVALENCE_MARGIN, "b4e5768", "after",
        f"{_REPORT_1202}, and before any run of the recipe report it judges (first generated in full at "
        "1c48ced)"),
    "MIN_GAIN": Provenance(
        "MIN_GAIN", MIN_GAIN, "35d7515", "after",
        f"{_REPORT_1202} and after the recipe's verdict rules (b4e5768, where this threshold was 0) had been "
        "written; before the full recipe report it judges (1c48ced)"),
    "OVERFIT_DROP": Provenance(
        "OVERFIT_DROP", OVERFIT_DROP, "b4e5768", "after",
        f"{_REPORT_1202}, and before any run of the recipe report it judges (1c48ced)"),
}
"""The provenance of every non-zero threshold of the claims rules, from the repository's history: what had
been seen when it was chosen. A rule with a non-zero threshold names its key (`Rule.margin_of`)."""

_ZERO = contextvars.ContextVar("claims_margin_zero", default=False)


@contextlib.contextmanager
def at_margin_zero() -> Iterator[None]:
    """Inside this block `judge` reads every "above" / "below" rule with its thresholds set to 0 (the
    verdict at margin 0, shown beside the declared one); equivalence rules are unchanged."""
    token = _ZERO.set(True)
    try:
        yield
    finally:
        _ZERO.reset(token)


BOOT_REPS = 2000
"""Resamples of the seeds in `seed_bootstrap` (percentile intervals; the statistics are milliseconds)."""


@dataclass(frozen=True)
class Interval:
    """A key quantity's estimate with its 95% and 90% intervals over `k` seeds (`method`: t or bootstrap)."""

    estimate: float
    lo: float
    hi: float
    lo90: float
    hi90: float
    k: int
    method: str = "t"

    @property
    def finite(self) -> bool:
        return bool(np.isfinite([self.estimate, self.lo, self.hi]).all())

    def text(self, digits: int = 4) -> str:
        """'+0.0123 [+0.0040, +0.0206]' (95%), 'n/a' without an interval."""
        if not np.isfinite(self.estimate):
            return "n/a"
        if not self.finite:
            return f"{self.estimate:+.{digits}f} [no interval: {self.k} seed(s)]"
        return f"{self.estimate:+.{digits}f} [{self.lo:+.{digits}f}, {self.hi:+.{digits}f}]"

    def to_dict(self) -> dict:
        return asdict(self)


NAN_INTERVAL = Interval(float("nan"), float("nan"), float("nan"), float("nan"), float("nan"), 0)


def t_interval(values: Sequence[float]) -> Interval:
    """Mean of the finite values with its 95% and 90% t-intervals (k - 1 degrees of freedom)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return NAN_INTERVAL
    m = float(v.mean())
    if v.size < 2:
        return Interval(m, float("nan"), float("nan"), float("nan"), float("nan"), int(v.size))
    se = float(v.std(ddof=1) / np.sqrt(v.size))
    h95 = float(t.ppf(0.5 + LEVEL / 2, v.size - 1)) * se
    h90 = float(t.ppf(0.5 + EQUIVALENCE_LEVEL / 2, v.size - 1)) * se
    return Interval(m, m - h95, m + h95, m - h90, m + h90, int(v.size))


def seed_bootstrap(
    wide: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    reps: int = BOOT_REPS,
    random_state: int = 0,
) -> Interval:
    """Percentile seed-bootstrap interval of `statistic(wide)`, where `wide` has one row per seed (columns:
    that seed's values, e.g. rewards per (n, bp)): rows are drawn with replacement `reps` times; replicates
    where the statistic is not finite are dropped. The estimate is the statistic of `wide` itself.
    Deterministic (`random_state`)."""
    est = float(statistic(wide))
    k = len(wide)
    if k < 2:
        return Interval(est, float("nan"), float("nan"), float("nan"), float("nan"), k, "bootstrap")
    rng = np.random.default_rng(random_state)
    vals = []
    for _ in range(int(reps)):
        v = float(statistic(wide.iloc[rng.integers(0, k, size=k)]))
        if np.isfinite(v):
            vals.append(v)
    if not vals:
        return Interval(est, float("nan"), float("nan"), float("nan"), float("nan"), k, "bootstrap")
    q = np.quantile(vals, [(1 - LEVEL) / 2, (1 + LEVEL) / 2, (1 - EQUIVALENCE_LEVEL) / 2,
                           (1 + EQUIVALENCE_LEVEL) / 2])
    return Interval(est, float(q[0]), float(q[1]), float(q[2]), float(q[3]), k, "bootstrap")


@dataclass(frozen=True)
class Rule:
    """One rule: what is measured (`quantity`), which way the claim points (`kind`: above, below,
    equivalent) and its thresholds (module text)."""

    quantity: str
    kind: str = "above"
    threshold: float = 0.0
    opposite: float | None = None
    """"above": not reproduced when the 95% interval lies below this (default: threshold; must be <= it);
    "below": when it lies above this (must be >= it)."""
    margin: float = EQUIVALENCE_MARGIN
    """"equivalent" only: the TOST margin."""
    margin_of: str | None = None
    """The key of PROVENANCE that the non-zero threshold (or the equivalence margin) comes from; an
    equivalence rule defaults to EQUIVALENCE_MARGIN."""

    def __post_init__(self):
        if self.kind not in ("above", "below", "equivalent"):
            raise ValueError(f"Rule.kind must be above, below or equivalent, got {self.kind!r}")
        opp = self.threshold if self.opposite is None else self.opposite
        if (self.kind == "above" and opp > self.threshold) or (self.kind == "below" and opp < self.threshold):
            raise ValueError(f"Rule {self.quantity!r}: the opposite threshold {opp} would overlap "
                             f"{self.threshold}")
        if self.kind == "equivalent" and not self.margin > 0:
            raise ValueError(f"Rule {self.quantity!r}: an equivalence margin must be > 0, got {self.margin}")
        if self.kind == "equivalent" and self.margin_of is None:
            object.__setattr__(self, "margin_of", "EQUIVALENCE_MARGIN")
        if self.margin_value:
            src = PROVENANCE.get(self.margin_of or "")
            if src is None or src.value != self.margin_value:
                raise ValueError(f"Rule {self.quantity!r}: its threshold {self.margin_value:g} needs a "
                                 f"provenance of that value (margin_of, a key of PROVENANCE), got "
                                 f"{self.margin_of!r}")

    @property
    def margin_value(self) -> float:
        """The rule's margin: the equivalence margin, or the largest absolute threshold (0: none)."""
        if self.kind == "equivalent":
            return float(self.margin)
        return float(max(abs(self.threshold), abs(self.opp)))

    @property
    def provenance(self) -> Provenance | None:
        """Where the rule's non-zero margin comes from (None for a rule at 0)."""
        return PROVENANCE[self.margin_of] if self.margin_value and self.margin_of else None

    def zeroed(self) -> Rule:
        """The same rule with its "above" / "below" thresholds at 0 (an equivalence rule unchanged)."""
        if self.kind == "equivalent" or not self.margin_value:
            return self
        return replace(self, threshold=0.0, opposite=None, margin_of=None)

    @property
    def opp(self) -> float:
        return self.threshold if self.opposite is None else self.opposite

    def text(self) -> str:
        """The rule in words, for the report."""
        if self.kind == "equivalent":
            return (f"{self.quantity}: reproduced when its 90% interval lies inside ±{self.margin:g} (TOST, "
                    f"5% per side), not reproduced when its 95% interval lies outside ±{self.margin:g}")
        side, other = ("above", "below") if self.kind == "above" else ("below", "above")
        return (f"{self.quantity}: reproduced when its 95% interval lies {side} {self.threshold:+g}, not "
                f"reproduced when it lies {other} {self.opp:+g}")


def gain_rule(quantity: str) -> Rule:
    """A "large n wins" rule: `quantity` above MIN_GAIN (with its provenance), not reproduced below it."""
    return Rule(quantity, kind="above", threshold=MIN_GAIN, margin_of="MIN_GAIN")


@dataclass(frozen=True)
class Judgement:
    """A rule applied to an interval: the verdict and both, for the report; `zero`: the verdict of the same
    rule at margin 0 (None for a rule whose margin is 0 or an equivalence rule)."""

    rule: Rule
    interval: Interval
    verdict: str
    zero: str | None = None

    def text(self) -> str:
        """'+0.0123 [+0.0040, +0.0206] (95% t): reproduced' (the 90% bounds too for an equivalence rule; the
        verdict at margin 0 beside where it differs)."""
        iv = self.interval
        at0 = f" (at margin 0: {self.zero})" if self.zero is not None and self.zero != self.verdict else ""
        if self.rule.kind == "equivalent" and iv.finite:
            return (f"{iv.text()} (95% {iv.method}; 90% [{iv.lo90:+.4f}, {iv.hi90:+.4f}]): {self.verdict}"
                    f"{at0}")
        return f"{iv.text()} (95% {iv.method}): {self.verdict}{at0}"


def judge(rule: Rule, iv: Interval) -> Judgement:
    """The verdict of `rule` on `iv` (module text) and, for a rule with a non-zero "above" / "below" margin,
    its verdict at margin 0; inconclusive without a finite interval. Inside `at_margin_zero` the verdict is
    the margin-0 one."""
    zeroed = rule.zeroed()
    if zeroed is not rule:
        zero = _verdict(zeroed, iv)
        return Judgement(rule, iv, zero if _ZERO.get() else _verdict(rule, iv), zero)
    return Judgement(rule, iv, _verdict(rule, iv))


def _verdict(rule: Rule, iv: Interval) -> str:
    """The verdict of `rule` on `iv` (module text)."""
    if not iv.finite:
        return INCONCLUSIVE
    if rule.kind == "above":
        v = REPRODUCED if iv.lo > rule.threshold else NOT_REPRODUCED if iv.hi < rule.opp else INCONCLUSIVE
    elif rule.kind == "below":
        v = REPRODUCED if iv.hi < rule.threshold else NOT_REPRODUCED if iv.lo > rule.opp else INCONCLUSIVE
    else:
        m = rule.margin
        if -m < iv.lo90 and iv.hi90 < m:
            v = REPRODUCED
        elif iv.lo > m or iv.hi < -m:
            v = NOT_REPRODUCED
        else:
            v = INCONCLUSIVE
    return v


def combine(verdicts: Sequence[str]) -> str:
    """The verdict of a claim from its parts': all reproduced -> reproduced; all not reproduced -> not
    reproduced; any inconclusive -> inconclusive; else (some reproduced, some not) -> partly."""
    vs = list(verdicts)
    if not vs or INCONCLUSIVE in vs:
        return INCONCLUSIVE
    if all(v == REPRODUCED for v in vs):
        return REPRODUCED
    if all(v == NOT_REPRODUCED for v in vs):
        return NOT_REPRODUCED
    return PARTLY


def parts_text(parts: Mapping[str, Judgement]) -> str:
    """'label: quantity = est [lo, hi] (95% t): verdict; ...' for the report's verdict line."""
    return "; ".join(f"{k}: {j.text()}" for k, j in parts.items())


def replicate(first: str, second: str) -> str:
    """A verdict stands where two disjoint seed sets agree; otherwise it does not replicate."""
    return first if first == second else NO_REPLICATION


def equivalent(iv: Interval, margin: float = EQUIVALENCE_MARGIN) -> bool:
    """Whether the 90% interval lies inside (-margin, margin): TOST equivalence at 5% per side."""
    return bool(iv.finite and -margin < iv.lo90 and iv.hi90 < margin)


__all__ = ["BOOT_REPS", "EQUIVALENCE_MARGIN", "INCONCLUSIVE", "Interval", "Judgement", "MIN_GAIN",
           "NAN_INTERVAL", "NOT_REPRODUCED", "NO_REPLICATION", "OVERFIT_DROP", "PARTLY", "PROVENANCE",
           "Provenance", "REPRODUCED", "Rule", "at_margin_zero", "combine", "equivalent", "gain_rule",
           "judge", "parts_text", "replicate", "seed_bootstrap", "t_interval"]
