"""The probe protocol's version: a module of its own, so that the probe (imported by every training process)
takes it without the monitor's decoder and its imports (``probemsg``: dataclasses, about 50 ms on a 2-core VM)."""

PROTOCOL_VERSION = 1
