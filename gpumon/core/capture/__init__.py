"""A capture: the session that ties sources, listener, launcher and recorder together (``session``), the sampler
thread (``sampler``), the Prometheus endpoint (``metrics``), a run's exit status (``outcome``) and the monitor's list of
probed processes (``probescan``)."""
