"""`python -m isocompute` is the `isocompute` command."""

from isocompute.cli import main

main()
