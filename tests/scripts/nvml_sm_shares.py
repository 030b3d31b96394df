"""A second of device samples (ten ticks), then the SM share of every PID on the device and of ours.

python nvml_sm_shares.py PID...
"""

import sys

from nvml_prelude import NvmlSource, clock, emit, pids

ours = pids(sys.argv[1:])
s = NvmlSource()
s.open()
for i in range(10):
    clock(i / 10)
    s.sample(i / 10)
clock(1.0)
every = s.gpu_process_metrics(1.0)
got = s.process_metrics(ours, 1.0)
emit(
    every={str(k): v.gpu_sm_util for k, v in every.items()},
    ours={str(k): v.gpu_sm_util for k, v in got.items()},
)
