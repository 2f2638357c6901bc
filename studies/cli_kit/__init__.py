"""What every command line of the project shares, beneath its click commands: parameter types (params),
the output and warning policy (output) and the checks of what a command may ask of this machine (checks).

A CLI module (docs/DESIGN.md arrows): the commands of studies/cli.py, paper_figs/cli.py and
isocompute/reports/cli/ import it, and so does the root group of isocompute/cli.py; no library module does.
Nothing here loads pandas or an engine at start-up.
"""
