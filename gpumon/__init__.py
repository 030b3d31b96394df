"""gpumon: watch, capture and compare co-resident training jobs on a shared GPU."""

__version__ = "0.1.0"
