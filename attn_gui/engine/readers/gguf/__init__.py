"""A .gguf file: its header, its spec, its tensors (kept quantized and dequantized per row as read), its
vocabulary and the load that ties them together."""
