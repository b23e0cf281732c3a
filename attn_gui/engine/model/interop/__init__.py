"""Models run by other libraries: transformers, a model object in memory, TransformerLens' bridge, the lens."""
