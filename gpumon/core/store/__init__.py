"""Run directories: writing one (``recorder``), reading it (``trace``), finding one (``runstore``), its runner
(``runner``) and the other processes it saw (``others``)."""
