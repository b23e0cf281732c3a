"""Training a tiny decoder on a synthetic task, and saving it as a checkpoint the app opens."""
