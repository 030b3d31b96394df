"""How much two jobs slow each other and why: live rates (``live``), the attribution of the extra time
(``attribution``) and its evidence (``evidence``, ``live_cause``), and the verdict in words (``sentence``)."""
