"""One module per subcommand (``gpumon run`` is ``run.py``), each following ``base.Command``: its parser, with light
imports only, and its entry point. ``gpumon/cli.py`` only dispatches."""
