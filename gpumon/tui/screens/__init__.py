"""Screens: monitor (live, replay), launch, stack, help, runs, compare."""
