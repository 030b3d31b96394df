"""Built-in training workloads (fcn, vgg19, resnet50, lstm, h2d, gemm) and the harness that runs them.

Importing this package (or ``gpumon.workloads.spec``) never imports torch: the parent validates
specs with it. The training code runs in the child, ``python -m gpumon.workloads``.
"""

from gpumon.workloads.spec import (
    OPTIONS,
    PRESETS,
    WORKLOADS,
    WorkloadSpec,
    parse_workload_spec,
    to_argv,
)

__all__ = ["OPTIONS", "PRESETS", "WORKLOADS", "WorkloadSpec", "parse_workload_spec", "to_argv"]
