"""The experiment runner: specs (the shipped ones: the repository's top-level ``experiments/``, in a wheel
``gpumon/experiments/specs/``) expanded into cells, run one at a time or on Ray, resumed, recorded."""
