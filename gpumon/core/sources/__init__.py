"""Where samples come from: the hardware boundary (``nvml``, ``gpm``, ``pcie``, ``host``) and run directories played
back (``replay``) or followed as they grow (``follow``)."""
