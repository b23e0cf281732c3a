"""Toy sequence tasks a tiny decoder learns in seconds, each a seeded batch generator.

A batch is three (B, T) tensors: the input tokens, the target at each position and which
positions are scored (loss and accuracy count those alone). The symbols are 0 ... V - 1;
copy, reverse and sort put a separator token, V, between the source and the answer.

- copy:     x SEP x            scored on the answer
- reverse:  x SEP reversed(x)  scored on the answer
- sort:     x SEP sorted(x)    scored on the answer
- previous: x, the target at position t is x[t - 1]   scored from the second token on
- induction: filler x x, a random sequence x of a random length m (n/2 to n, n = length / 2)
  repeated at the end; the target is the next token, scored on the second copy (each token
  there is predictable from its earlier copy). The period m varies from sequence to sequence,
  so no head can solve it by a fixed offset (which RoPE would make easy); it needs induction.

Every batch comes from a seeded CPU ``torch.Generator``, so every device sees the same data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base.errors import ConfigError

TASKS: tuple[str, ...] = ("copy", "reverse", "previous", "sort", "induction")


@dataclass(frozen=True)
class Batch:
    """inputs, targets (B, T) long and scored (B, T) bool; induction: each sequence's period m (B,)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    scored: torch.Tensor
    period: torch.Tensor | None = None


@dataclass(frozen=True)
class Task:
    """A task over ``symbols`` symbols whose sequences are ``length`` tokens long (the model's T)."""

    name: str
    symbols: int = 16
    length: int = 32

    def __post_init__(self):
        if self.name not in TASKS:
            raise ConfigError(f"unknown task {self.name!r}; choose one of {', '.join(TASKS)}")
        if not 2 <= self.symbols <= 4096:
            raise ConfigError(f"symbols must be 2 to 4096, not {self.symbols}")
        if not 4 <= self.length <= 1024:
            raise ConfigError(f"length must be 4 to 1024, not {self.length}")

    @property
    def vocab_size(self) -> int:
        """The symbols, plus the separator for the tasks that have one."""
        return self.symbols + (self.name in ("copy", "reverse", "sort"))

    @property
    def separator(self) -> int | None:
        return self.symbols if self.vocab_size > self.symbols else None

    def token_names(self) -> list[str]:
        """The vocabulary as words, id order: "0" ... "V-1", then "SEP" where there is one."""
        return [str(i) for i in range(self.symbols)] + (["SEP"] if self.separator is not None else [])

    def sentence(self, ids: torch.Tensor) -> str:
        """Token ids (T,) as the words of ``token_names``, one space apart: what the checkpoint's
        tokenizer reads back to the same ids."""
        names = self.token_names()
        return " ".join(names[i] for i in ids.tolist())

    def batch(self, size: int, generator: torch.Generator) -> Batch:
        """``size`` sequences drawn from ``generator`` (a CPU generator)."""
        x = torch.randint(0, self.symbols, (size, self.source_length), generator=generator)
        if self.name != "induction":
            return self.make(x)
        n = self.source_length // 2
        return self.make(x, torch.randint(max(2, n // 2), n + 1, (size,), generator=generator))

    @property
    def source_length(self) -> int:
        """How many random symbols one sequence is made from."""
        if self.name == "previous":
            return self.length
        if self.name == "induction":
            return self.length // 2 * 2
        return (self.length - 1) // 2  # x SEP answer: the input drops the answer's last token

    def make(self, x: torch.Tensor, period: torch.Tensor | None = None) -> Batch:
        """The batch built from the random symbols ``x`` (B, n): the task's rule, by hand.

        Induction: ``period`` (B,) is each sequence's m; its last m tokens repeat the m before.
        """
        B, n = x.shape
        if self.name == "previous":
            targets = torch.cat([x[:, :1], x[:, :-1]], dim=1)  # x[t - 1]; position 0 has none
            scored = torch.ones_like(x, dtype=torch.bool)
            scored[:, 0] = False
            return Batch(x, targets, scored)
        if self.name == "induction":
            assert period is not None, "the induction task needs each sequence's period"
            j = torch.arange(n)  # positions of the whole sequence
            m = period.unsqueeze(1)  # (B, 1)
            second = j >= n - m  # (B, n): the second copy
            seq = torch.where(second, x.gather(1, (j - m).clamp(min=0)), x)  # x[j - m] there
            scored = second[:, :-1]  # each second-copy token's next token follows its earlier copy
            return Batch(seq[:, :-1], seq[:, 1:], scored, period)
        answer = {"copy": x, "reverse": x.flip(1), "sort": x.sort(dim=1).values}[self.name]
        sep = torch.full((B, 1), self.symbols, dtype=x.dtype)
        seq = torch.cat([x, sep, answer], dim=1)  # (B, 2n + 1)
        scored = torch.zeros(B, 2 * n, dtype=torch.bool)
        scored[:, n:] = True  # from the separator on, each next token is the answer's
        return Batch(seq[:, :-1], seq[:, 1:], scored)

    def probe(self, seed: int = 1234) -> Batch:
        """One fixed sequence of the task, the same at every step (the window's heads show it)."""
        return self.batch(1, torch.Generator().manual_seed(seed))
