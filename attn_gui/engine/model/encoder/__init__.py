"""BERT-family encoders run by attn-gui's own forward."""
