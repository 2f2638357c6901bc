"""paper_figs"""
