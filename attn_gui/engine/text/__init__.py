"""Text to tokens: the toy tokenizer, the byte-level and SentencePiece BPE built from a file's vocabulary,
tokenizer.json's special tokens and the child process that builds a tokenizer without torch."""
