"""The one attention pipeline: its records (types), the scores, RoPE, the projections, ``attend`` and the
block loops that stream long inputs, and what those loops reduce and summarise.

It imports only ``engine.base``; every model, analysis and view computes attention here."""
