"""The bottom layer: the records every layer passes around (``model``, ``bus``, ``clock``) and the one vocabulary
that names what they measure (``rates``, ``units``, ``share``). Imports nothing else of gpumon but ``errors``."""
