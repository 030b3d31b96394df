"""Two PIDs' SM shares read at 0 s and 1 s, and whether a read half a second later asked the driver again.

python nvml_sm_util_mean.py A B
"""

import sys

from nvml_prelude import NvmlSource, clock, emit, fake, pids

ours = pids(sys.argv[1:])
s = NvmlSource()
s.open()
s.process_metrics(ours, 0.0)
clock(1.0)
got = {k: v.gpu_sm_util for k, v in s.process_metrics(ours, 1.0).items()}
seen = fake("fakenvml_last_utilization_timestamp")
clock(1.5)
s.process_metrics(ours, 1.5)  # half a second later: the driver's buffer is not read again
emit(
    got={str(k): v for k, v in got.items()},
    seen=seen,
    again=fake("fakenvml_last_utilization_timestamp"),
)
