"""`isocompute report readme`: the click command over isocompute.reports.readme (rewrite README.md's
generated blocks)."""

from __future__ import annotations

import click

from isocompute.reports.readme import update


@click.command("readme")
def readme() -> None:
    """Regenerate README.md's answer, claims-summary paragraph, headline caption and llm-rollout paragraph
    from docs/CLAIMS.json, docs/GROUP_STD.json, the tiny-LM study's store and the rollout benchmark JSONs."""
    update()
    click.echo("README.md: answer, claims-summary, headline-caption and llm-rollout blocks regenerated")
