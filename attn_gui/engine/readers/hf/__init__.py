"""A Hugging Face folder: its config.json read into a spec, its safetensors into a decoder's weights."""
