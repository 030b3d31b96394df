"""What runs a command line: plan validation, the headless front end and the detached runner (the TUI is ``gpumon.tui``)."""
