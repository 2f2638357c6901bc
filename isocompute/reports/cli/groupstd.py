"""`isocompute report groupstd`: the click command over isocompute.reports.claims.groupstd (the study) and
groupstd_report (its report, figure and marked blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from isocompute.reports.claims.groupstd import SIZES, build
from isocompute.reports.claims.groupstd_report import (
    LINK_BEGIN,
    LINK_END,
    README_MARKERS,
    SUMMARY_JSON,
    link_block,
    readme_line,
    render,
    summary,
    write_figure,
)
from isocompute.reports.cli.destinations import docs_option, docs_path
from studies.cli_kit.params import dir_option, file_option, jobs_option
from studies.config import StudiesError
from studies.files import atomic_write_text, check_output_dir, check_output_file, write_marked_block

TINY_REFUSAL = ("the full tiny-LM group-std runs were never committed, so no command regenerates their "
                "report: docs/GROUP_STD.md ('Tiny LM') quotes their result with its source; --backend llm "
                "--quick runs the machinery")
"""The one line `--backend llm` without --quick ends in (exit 2)."""


@click.command("groupstd")
@click.option("--quick", is_flag=True, help="Tiny sizes (CI, seconds): the machinery, not the science.")
@click.option(
    "--backend",
    type=click.Choice(["sim", "llm"]),
    default="sim",
    show_default=True,
    help="sim: the simulator experiment; llm: its machinery on the shipped tiny LM (--lm tiny), with "
    "--quick only (the full tiny-LM runs were never committed: docs/GROUP_STD.md quotes their result).",
)
@dir_option("--results",
            help="Results directory (finished runs are reused; default results/groupstd[-quick|-llm-quick]).")
@file_option("--out",
             help="Markdown report (default results/GROUP_STD-<mode>.md; with --docs docs/GROUP_STD.md).")
@file_option("--fig",
             help="Figure (default beside the report, as .png; with --docs docs/figs/group_std.png; none "
                  "with --quick unless given).")
@file_option("--link",
             help="Markdown file that gets a marked block with the verdict and a link to the report "
                  "(with --docs docs/MECHANISMS.md; none otherwise).")
@docs_option("Write the committed copies (the report and figure in docs/, the block in docs/MECHANISMS.md, "
             "the README's line; run from the repository root) instead of results/.")
@jobs_option()
@click.option("--progress/--no-progress", default=False, help="Progress bars of the runs and the readout.")
def groupstd(
    quick: bool,
    backend: str,
    results: Path | None,
    out: Path | None,
    fig: Path | None,
    link: Path | None,
    to_docs: bool,
    jobs: int,
    progress: bool,
) -> None:
    """Run (or reuse) the group-std study (does dividing advantages by the group's reward std change n*(C)?)
    and write its report and figure."""
    if backend == "llm" and not quick:
        raise click.UsageError(TINY_REFUSAL)
    key = "llm-quick" if backend == "llm" else ("quick" if quick else "full")
    size = SIZES[key]
    default_results = Path("results/groupstd" + ("" if key == "full" else f"-{key}"))
    given_results = results
    results = results or default_results
    if to_docs and key != "full":
        raise click.UsageError("--docs writes the committed full-size report: not with --quick (use --out)")
    if to_docs:
        out = docs_path("docs/GROUP_STD.md", to_docs, out)
        fig = docs_path("docs/figs/group_std.png", to_docs, fig, what="--fig")
        link = link or docs_path("docs/MECHANISMS.md", to_docs, None)
    out = out or Path(f"results/GROUP_STD-{key}.md")
    if fig is None and key == "full":
        fig = out.with_suffix(".png")
    if link is not None and not link.is_file():
        raise click.UsageError(f"--link {link}: no such Markdown file")
    check_output_file(out)
    check_output_dir(results, what="--results")
    if fig is not None:
        check_output_file(fig)
    try:
        x, _, _ = build(size, results, jobs, progress)
    except StudiesError as e:
        raise click.UsageError(str(e)) from None
    cmd = " ".join(
        ["isocompute report groupstd"]
        + (["--quick"] if quick else [])
        + (["--backend llm"] if backend == "llm" else [])
        + ([f"--results {given_results}"] if given_results not in (None, default_results) else [])
        + (["--docs"] if to_docs else [])
    )
    if fig is not None:
        write_figure(x, fig)
    atomic_write_text(out, render(x, cmd, fig, out))
    if link is not None:
        write_marked_block(link, LINK_BEGIN, LINK_END, link_block(x, cmd, out, link))
    if to_docs:  # the numbers README's answer quotes, and the science section's line, from the same data
        atomic_write_text(SUMMARY_JSON, json.dumps(summary(x), indent=1) + "\n")
        if Path("README.md").is_file():
            write_marked_block(Path("README.md"), *README_MARKERS, readme_line(x, cmd, out))
    click.echo(f"verdict: {x['verdict'][0] if 'verdict' in x else 'n/a'}")
    click.echo(f"wrote {out}")
