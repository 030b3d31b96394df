"""The process's freed memory kept for its next allocations (glibc), for a command that reads a run in chunks."""

from __future__ import annotations

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 256 << 20), (M_TOP_PAD, 64 << 20))


def keep_freed_memory() -> bool:
    """Let glibc keep freed memory for the next allocation instead of handing it back to the kernel at once; False
    where the C library has no ``mallopt`` (not glibc) or refuses.

    compare allocates and frees the same arrays of a few MB for every row group of a run's steps. By default glibc
    maps each one afresh or trims its heap when they are freed, and the next row group faults the same pages in again:
    on benchmarks/scale.py's 5 M-step capture that was ~36,000 page faults and 0.96 s of the main process's CPU
    (median of five), against ~20,000 and 0.77 s with these settings (2-core x86_64 VM, loaded). What is freed is
    reused, so the peak memory stays what the read needs (about +8 MB)."""
    try:
        import ctypes  # deferred: gpumon --help imports every command module, and this is compare's alone

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(option, value) == 1 for option, value in SETTINGS)
