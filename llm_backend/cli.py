"""`isocompute llm ...` commands (placeholder until the LLM backend issue lands)."""

import click


@click.group(help="Real-LLM backend: prepare the model, calibrate difficulty splits.")
def llm() -> None:
    pass
