"""The circuit graph of a decoder: who writes into the residual stream, who reads it, and which edges exist.

Writers (nodes that add to the residual stream): the embedding (the token embedding, times √d for Gemma, plus
GPT-2's learned positions), every head (its Z_i W_O,i) and every MLP. Readers (each a separate input): every head's
query, key and value input, every MLP's input and the logits (the final residual, through the final norm and the
unembedding). An edge u -> r exists where u writes before r reads: into layer l's heads from the embedding and
every head and MLP of the layers below; into layer l's MLP from those and layer l's own heads (not where attention
and the MLP read one residual side by side: GPT-NeoX's parallel block); into the logits from every writer.

Grouped-query attention: a key/value head's input is one tensor, read by the h / g query heads that share it.
Patching it changes all of them at once, so it is one reader (named "L3H1-3 k": the key input shared by heads 1 to
3 of layer 3), not h / g readers with copies of the same edge. With g = h every head has its own ("L3H1 k").
Names count layers and heads from 1, as the maps and ``attribution.trace`` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

KINDS = ("q", "k", "v")  # a head's three inputs, each its own reader


@dataclass(frozen=True)
class Graph:
    """The writers, readers and edges of a decoder with ``layers`` layers of ``heads`` query heads and ``kv_heads``
    key/value heads; ``parallel``: attention and the MLP read the same residual (GPT-NeoX).

    Writer order: "embed", then per layer its heads and its MLP. Reader order: per layer its h query inputs, g key
    inputs, g value inputs and its MLP input, then "logits".
    """

    layers: int
    heads: int
    kv_heads: int
    parallel: bool = False

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def per_layer(self) -> int:
        """Readers per layer: h queries, g keys, g values, the MLP."""
        return self.heads + 2 * self.kv_heads + 1

    # writers
    def head(self, layer: int, head: int) -> int:
        """Writer index of head ``head`` of ``layer`` (0-based)."""
        return 1 + layer * (self.heads + 1) + head

    def mlp(self, layer: int) -> int:
        """Writer index of ``layer``'s MLP."""
        return 1 + layer * (self.heads + 1) + self.heads

    @property
    def n_writers(self) -> int:
        return 1 + self.layers * (self.heads + 1)

    def writers_before(self, layer: int) -> int:
        """How many writers write before ``layer``'s attention reads (the embedding and the layers below)."""
        return 1 + layer * (self.heads + 1)

    # readers
    def reader(self, layer: int, kind: str, index: int = 0) -> int:
        """Reader index of ``layer``'s "q" (query head ``index``), "k" / "v" (key/value head ``index``) or "mlp"."""
        base = layer * self.per_layer
        if kind == "q":
            return base + index
        if kind == "k":
            return base + self.heads + index
        if kind == "v":
            return base + self.heads + self.kv_heads + index
        return base + self.heads + 2 * self.kv_heads

    @property
    def logits(self) -> int:
        """Reader index of the logits."""
        return self.layers * self.per_layer

    @property
    def n_readers(self) -> int:
        return self.layers * self.per_layer + 1

    def reader_layer(self, reader: int) -> int:
        """The layer a reader belongs to (``layers`` for the logits)."""
        return min(reader // self.per_layer, self.layers)

    def writer_layer(self, writer: int) -> int:
        """The layer a writer belongs to (-1 for the embedding)."""
        return -1 if writer == 0 else (writer - 1) // (self.heads + 1)

    def writer_head(self, writer: int) -> int | None:
        """The head a writer is (0-based), None for the embedding and the MLPs."""
        if writer == 0:
            return None
        head = (writer - 1) % (self.heads + 1)
        return None if head == self.heads else head

    def reader_kind(self, reader: int) -> tuple[str, int]:
        """("q", head), ("k", kv head), ("v", kv head), ("mlp", 0) or ("logits", 0)."""
        if reader == self.logits:
            return "logits", 0
        i = reader % self.per_layer
        if i < self.heads:
            return "q", i
        if i < self.heads + self.kv_heads:
            return "k", i - self.heads
        if i < self.heads + 2 * self.kv_heads:
            return "v", i - self.heads - self.kv_heads
        return "mlp", 0

    def reader_heads(self, reader: int) -> range:
        """The query heads a reader feeds (0-based): one for a query input, the group sharing a key/value input,
        none for an MLP and the logits."""
        kind, index = self.reader_kind(reader)
        if kind == "q":
            return range(index, index + 1)
        if kind in ("k", "v"):
            return range(index * self.group, (index + 1) * self.group)
        return range(0)

    @cached_property
    def writer_names(self) -> tuple[str, ...]:
        names = ["embed"]
        for layer in range(self.layers):
            names += [f"L{layer + 1}H{i + 1}" for i in range(self.heads)] + [f"L{layer + 1} mlp"]
        return tuple(names)

    @cached_property
    def reader_names(self) -> tuple[str, ...]:
        names = []
        for reader in range(self.n_readers):
            kind, _ = self.reader_kind(reader)
            layer = self.reader_layer(reader)
            if kind in KINDS:
                heads = self.reader_heads(reader)
                span = f"{heads[0] + 1}" if len(heads) == 1 else f"{heads[0] + 1}-{heads[-1] + 1}"
                names.append(f"L{layer + 1}H{span} {kind}")
            else:
                names.append("logits" if kind == "logits" else f"L{layer + 1} mlp")
        return tuple(names)

    @cached_property
    def allowed(self) -> torch.Tensor:
        """(W, R) bool: which writer feeds which reader (u writes before r reads)."""
        mask = torch.zeros(self.n_writers, self.n_readers, dtype=torch.bool)
        for layer in range(self.layers):
            before = self.writers_before(layer)
            start = layer * self.per_layer
            mask[:before, start:start + self.per_layer - 1] = True  # q, k, v of the layer's heads
            mlp_reads = before if self.parallel else before + self.heads  # the layer's heads too, in sequence
            mask[:mlp_reads, self.reader(layer, "mlp")] = True
        mask[:, self.logits] = True
        return mask

    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(writers, readers): the E edges' indices, reader-major then writer order (long tensors)."""
        readers, writers = self.allowed.T.nonzero(as_tuple=True)
        return writers, readers

    @property
    def n_edges(self) -> int:
        return int(self.allowed.sum())

    def edge_name(self, writer: int, reader: int) -> str:
        return f"{self.writer_names[writer]} -> {self.reader_names[reader]}"

    def find_writer(self, name: str) -> int:
        """The index of a writer by name ("L2H1", "L1 mlp", "embed")."""
        return self.writer_names.index(name)

    def find_reader(self, name: str) -> int:
        """The index of a reader by name ("L2H1 k", "L5H1-3 k", "L1 mlp", "logits")."""
        return self.reader_names.index(name)
