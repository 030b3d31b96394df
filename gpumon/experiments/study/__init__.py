"""The study: what the cells measured, answered per question (Q1-Q4: sweeps, pairs, operators, contention), and
the report. It reads what the runner recorded and never runs a cell."""
