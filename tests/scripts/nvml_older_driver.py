"""One PID's metrics and a sample through whatever process-list and memory symbols the library has, and whether
pynvml alone could call the process list.

    python nvml_older_driver.py PID
"""

import sys

from nvml_prelude import NvmlSource, emit, pids, pynvml, row

(pid,) = pids(sys.argv[1:])
s = NvmlSource()
s.open()
metrics = s.process_metrics([pid])[pid]
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
try:
    pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    alone = "ok"
except Exception as err:  # noqa: BLE001 - its type is the answer
    alone = type(err).__name__
emit(mem=metrics.gpu_mem_mib, sm=metrics.gpu_sm_util, sample=row(s.sample(0.0)), alone=alone)
