"""`isocompute report groupstd`: the click command over isocompute.reports.claims.groupstd (the study) and
groupstd_report (its report, figure and marked blocks)."""

from __future__ import annotations

from pathlib import Path

import click

from isocompute.reports.claims.groupstd import SIZES, build
from isocompute.reports.claims.groupstd_report import (
    LLM_STORE,
    link_block,
    link_markers,
    readme_line,
    readme_markers,
    render,
    write_figure,
)
from isocompute.reports.cli.destinations import docs_option, docs_path
from studies.cli_kit.params import dir_option, file_option, jobs_option
from studies.config import StudiesError
from studies.files import atomic_write_text, check_output_dir, check_output_file, write_marked_block


@click.command("groupstd")
@click.option("--quick", is_flag=True, help="Tiny sizes (CI, seconds): the machinery, not the science.")
@click.option(
    "--backend",
    type=click.Choice(["sim", "llm"]),
    default="sim",
    show_default=True,
    help="sim: the simulator experiment; llm: the same experiment on the shipped tiny LM (--lm tiny).",
)
@dir_option("--results",
            help="Results directory (finished runs are reused; default results/groupstd[-quick|-llm-quick], "
                 "--backend llm: docs/group_std_tiny/store, the committed store of docs/GROUP_STD_TINY.md).")
@click.option("--run", "run_missing", is_flag=True,
              help="--backend llm: compute the runs the store lacks (without it the report is regenerated "
              "from the store alone, and a store that lacks runs is refused). Always on for --quick and the "
              "simulator.")
@file_option("--out",
             help="Markdown report (default results/GROUP_STD-<mode>.md; with --docs docs/GROUP_STD.md, "
                  "--backend llm docs/GROUP_STD_TINY.md).")
@file_option("--fig",
             help="Figure (default beside the report, as .png; with --docs docs/figs/group_std.png, "
                  "--backend llm docs/figs/group_std_tiny.png; none with --quick unless given).")
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
    run_missing: bool,
) -> None:
    """Run (or reuse) the group-std study (does dividing advantages by the group's reward std change n*(C)?)
    and write its report and figure."""
    key = ("llm-quick" if quick else "llm") if backend == "llm" else ("quick" if quick else "full")
    size = SIZES[key]
    default_results = (Path(LLM_STORE) if key == "llm" else
                       Path("results/groupstd" + ("" if key == "full" else f"-{key}")))
    run_missing = run_missing or key != "llm"
    given_results = results
    results = results or default_results
    committed = {"full": ("docs/GROUP_STD.md", "docs/figs/group_std.png"),
                 "llm": ("docs/GROUP_STD_TINY.md", "docs/figs/group_std_tiny.png")}  # the committed two
    if to_docs and key not in committed:
        raise click.UsageError("--docs writes the committed full-size reports: not with --quick (use --out)")
    if to_docs:
        out = docs_path(committed[key][0], to_docs, out)
        fig = docs_path(committed[key][1], to_docs, fig, what="--fig")
        link = link or docs_path("docs/MECHANISMS.md", to_docs, None)
    out = out or Path(f"results/GROUP_STD-{key}.md")
    if fig is None and key in committed:
        fig = out.with_suffix(".png")
    if link is not None and not link.is_file():
        raise click.UsageError(f"--link {link}: no such Markdown file")
    check_output_file(out)
    if run_missing:  # a read-only regeneration creates nothing
        check_output_dir(results, what="--results")
    if fig is not None:
        check_output_file(fig)
    try:
        x, _, _ = build(size, results, jobs, progress, run=run_missing)
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
        write_marked_block(link, *link_markers(size.backend), link_block(x, cmd, out, link))
    if to_docs and Path("README.md").is_file():  # the science section's line, from the same data
        write_marked_block(Path("README.md"), *readme_markers(size.backend), readme_line(x, cmd, out))
    click.echo(f"verdict: {x['verdict'][0] if 'verdict' in x else 'n/a'}")
    click.echo(f"wrote {out}")
