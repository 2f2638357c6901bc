"""`isocompute report llm-study`: the click command over isocompute.reports.llm_study (run the real-model
n-vs-m study, or write its generated report)."""

from __future__ import annotations

from pathlib import Path

import click

from isocompute.reports.llm_study import report, run_grid
from studies.cli_kit.params import COUNT, dir_option, jobs_option
from studies.config import StudiesError
from studies.files import check_output_dir


@click.command("llm-study")
@dir_option("--out", help="Results directory to run the study into.")
@click.option("--report", "report_of", type=click.Path(exists=True, path_type=Path), default=None,
              help="Results directory to report on, or the report's own table.csv (the committed "
                   "docs/llm_study/nvm/table.csv); writes --docs and README.md's llm-study paragraph.")
@click.option("--docs", type=click.Path(file_okay=False, path_type=Path), default=Path("docs/llm_study/nvm"),
              show_default=True, help="Directory of the generated report.")
@click.option("--sim-seeds", type=click.IntRange(1), default=8, show_default=True,
              help="Seeds of the simulator frontier shown beside the real one.")
@click.option("--seeds", type=click.IntRange(1), default=3, show_default=True, help="Seeds of the grid.")
@click.option("--budget", type=COUNT, default=512, show_default=True,
              help="Compute cap C in rollouts, e.g. 512 or 2^9.")
@click.option("--bp", type=click.IntRange(1), default=8, show_default=True, help="Problems per step.")
@jobs_option(1)
def llm_study(out: Path | None, report_of: Path | None, docs: Path, sim_seeds: int, seeds: int, budget: int,
              bp: int, jobs: int) -> None:
    """Run the real-model n-vs-m study (SmolLM2 on the easy split; --out) or write its generated report
    (--report)."""
    if report_of is not None:
        check_output_dir(docs, what="--docs")
        click.echo(report(str(report_of), str(docs), sim_seeds)["summary"])
        return
    if out is None:
        raise StudiesError("give --out (run) or --report (report)")
    click.echo(run_grid(check_output_dir(out), seeds, budget, bp, jobs))
