"""The probe: its child side (``probe``, and ``autoprobe/`` for unmodified scripts), the per-user runtime directory
(``userdir``), the rendezvous of probed processes no monitor launched (``rendezvous``) and the parent side that reads
every probe and output pipe (``listener``).

Nothing here may import more than the standard library at import time in a child: ``probe`` runs inside training jobs."""
