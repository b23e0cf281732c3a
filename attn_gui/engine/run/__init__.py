"""The run room: one request computed into an AttentionResult, its inputs, draws, decoding and fields."""
