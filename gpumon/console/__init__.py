"""How gpumon behaves in a terminal, whichever front end: colour (NO_COLOR), is it a terminal, the stop signals."""
