"""The paper's figures regenerated from our runs: a module per figure, a registry, the CLI.

Each figure module holds a `SPEC` (paper_figs.specs.FigureSpec): the studies it needs, `make(tables)` (a
Figure) and `summary(tables)` (numbers for the gallery, paper_figs/README.md). Fits come from `studies` only.
"""
