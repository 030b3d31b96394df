"""Our two PIDs' GPU memory and SM share, the utilisation timestamps asked for, every PID on the device.

python nvml_process_metrics.py A B
"""

import ctypes
import dataclasses
import sys
import time

from nvml_prelude import NvmlSource, clock, emit, fake, pids

a, b = pids(sys.argv[1:])
s = NvmlSource()
s.open()
opened_us = time.time_ns() // 1000
first = s.process_metrics([a, b, 999999])
seen = [fake("fakenvml_last_utilization_timestamp")]
held = s.process_metrics([a, b])
seen.append(fake("fakenvml_last_utilization_timestamp"))
clock(0.25)
s.process_metrics([a])
s.process_metrics([a])
seen.append(fake("fakenvml_last_utilization_timestamp"))
every = s.gpu_process_metrics()
emit(
    first={str(k): dataclasses.asdict(v) for k, v in first.items()},
    held={str(k): v.gpu_sm_util for k, v in held.items()},
    seen=seen,
    init=fake("fakenvml_init_timestamp", ctypes.c_longlong),
    opened=opened_us,
    all=sorted(s.all_gpu_pids()),
    every={str(k): dataclasses.asdict(v) for k, v in every.items()},
)
