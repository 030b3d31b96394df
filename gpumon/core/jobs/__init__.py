"""The jobs gpumon starts or watches: launching them (``launcher``, ``lifeline``, ``interpreter``, ``devices``),
a process it did not start (``beside``), MPS (``mps``, ``mpsguard``) and py-spy (``pyspy``)."""
