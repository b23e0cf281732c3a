"""The analyses: interventions, attribution, circuits, the corpus census, scaling, metrics, rollout."""
