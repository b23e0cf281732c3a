"""The engine's floor: errors a person can act on, devices, progress and stopping, files on disk.

Nothing here imports another room of the engine."""
