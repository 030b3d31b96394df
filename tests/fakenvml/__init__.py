"""The scripted fake libnvidia-ml.so.1 (C source) and the helper that builds it."""
