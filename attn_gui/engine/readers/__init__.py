"""Files in, specs and tensors out: Hugging Face folders, GGUF files, the bundled models' files, the cache,
the weights read from storage as they are used, the checks every file passes, and discovery of the models
on this machine."""
