"""Exclusive vs shared comparison: rates, slowdown, STP, intervals, distribution tests, report.

Importing this package is light: modules import pandas, scipy and matplotlib
inside the functions that need them, and nothing here imports Textual or torch.
scipy and matplotlib come with the ``analysis`` extra: without scipy the comparison
skips the distribution tests and says so; ``--report`` asks for matplotlib.
"""
