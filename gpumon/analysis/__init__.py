"""Exclusive vs shared comparison: rates, slowdown, STP, intervals, distribution tests, report.

Importing this package is light: modules import pandas, scipy and matplotlib
inside the functions that need them, and nothing here imports Textual or torch.
"""
