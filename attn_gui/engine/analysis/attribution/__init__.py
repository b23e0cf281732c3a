"""Why a head attends: a traced forward, logit and score attribution, QK/OV circuits, head detectors."""
