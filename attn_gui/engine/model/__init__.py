"""The model room: the registry of sources by name, the plan, and the forwards that run a model."""
