"""gpumon doctor's checks: can gpumon work here (doctor.py), and can its numbers be trusted here (verify.py)."""
