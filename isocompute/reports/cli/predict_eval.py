"""`isocompute report predict`: the click command over isocompute.reports.predict_eval (evaluate `isocompute
predict` against swept n*(C), write docs/PREDICT.md)."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from isocompute.reports.predict_eval import CASES, evaluate_cases, evaluation_markdown
from studies.cli_kit.params import dir_option, file_option, jobs_option
from studies.config import StudiesError
from studies.files import atomic_write_text, check_output_dir, check_output_file


@click.command("predict")
@click.option("--cases", default=",".join(CASES), show_default=True, metavar="LIST",
              help="Comma list of the evaluation's simulator cases.")
@dir_option("--results", default=Path("results/predict"), show_default=True,
            help="Results directory of the pilots and truth runs (resumable).")
@file_option("--out", default=Path("docs/PREDICT.md"), show_default=True, help="Markdown report to write.")
@jobs_option()
def predict_eval(cases: str, results: Path, out: Path, jobs: int) -> None:
    """Evaluate `isocompute predict` against swept n*(C) on simulator cases and write docs/PREDICT.md."""
    names = [c for c in cases.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if not names or unknown:
        raise StudiesError(f"--cases: unknown case(s) {unknown or names}; have {', '.join(CASES)}")
    check_output_file(out)
    check_output_dir(results, what="--results")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate_cases(names, results, jobs)
    atomic_write_text(out, evaluation_markdown(res))
    click.echo(f"wrote {out}")
