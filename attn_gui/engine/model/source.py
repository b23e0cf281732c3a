"""What the engine asks of a pretrained model: its tokens, its layer inputs and its weights."""

from __future__ import annotations

import abc
from collections.abc import Callable

import torch

from ..kernel.types import AttendOptions, Projections
from ..text.tokens import Tokens
from ..specs.spec import ModelSpec


class ModelSource(abc.ABC):
    """One pretrained model, run by our own code so every intermediate can be shown.

    A subclass lives in its own module of ``attn_gui.engine.model.registry`` as ``Source`` and
    is registered with one ``ModelSpec`` line in ``specs.catalog.MODELS``.

    Attributes
    ----------
    spec : ModelSpec
        The model's fixed facts (sizes, layers, token limit), known without loading it.
    install_hint : str
        The command that installs what ``available()`` looks for.
    """

    def __init__(self, spec: ModelSpec):
        self.spec = spec

    @property
    def install_hint(self) -> str:
        return ""

    @abc.abstractmethod
    def available(self) -> bool:
        """Whether the model's files and libraries are installed here (imports nothing)."""

    def load(self, progress: Callable[[int, int], None] | None = None) -> None:  # noqa: B027 (optional hook)
        """Load the model now, so the first compute does not wait for it.

        A source that converts its files on the first load (and caches them) calls
        ``progress(done, total)`` meanwhile; later loads are quick and report nothing.
        Raises ``ModelUnavailable`` when the model is not installed.
        """

    def loaded(self) -> bool:
        """Whether the model is in memory already (then tokenizing and computing start at once)."""
        return True

    def parameters(self) -> int | None:
        """How many numbers the model's weights hold (a GGUF's quantized ones counted as values), read from the
        weights' shapes; None where the model is not in memory (nothing is loaded to answer) or not counted."""
        return None

    @abc.abstractmethod
    def tokenize(self, sentence: str) -> Tokens:
        """The model's tokens of ``sentence`` (special tokens included); ids are vocabulary ids.

        Raises ``ModelUnavailable`` when the model is not installed.
        """

    def unknown_token(self) -> str | None:
        """The token that stands for any text the vocabulary lacks ([UNK]), or None when there is none
        (a byte-level vocabulary spells every text). Called once the model is loaded."""
        return None

    @abc.abstractmethod
    def layer_inputs(self, token_ids: torch.Tensor, device: torch.device | str, dtype: torch.dtype,
                     layers: tuple[AttendOptions, ...] | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Run the whole model on ``token_ids`` (T,), each layer's attention with ``layers``' options (the plan's,
        ``engine.model.plan.Plan.layers``), else as the model runs it.

        Returns
        -------
        hidden : list of L + 1 tensors (T, d)
            hidden[l] is what layer l's attention reads (X): the hidden state entering it,
            normalised first in a pre-norm model (Llama's RMSNorm); the last is the model's
            output (after its final norm, where it has one).
        weights : (L, h, T, T)
            Every layer's attention weights.
        """

    def next_tokens(self, token_ids: torch.Tensor, device: torch.device | str, dtype: torch.dtype,
                    k: int = 5, layers: tuple[AttendOptions, ...] | None = None
                    ) -> tuple[tuple[str, float], ...] | None:
        """The ``k`` most likely tokens after ``token_ids`` (readable text, probability), highest first, from the
        forward whose layers run with ``layers``' options (else the model's own).

        None for a model that predicts no next token (an encoder); a decoder overrides it.
        """
        return None

    def layer_options(self, options: AttendOptions, layer: int, T: int, device: torch.device | str,
                      dtype: torch.dtype) -> AttendOptions:
        """The plan's ``options`` of layer ``layer`` with what only the loaded model holds, for ``T`` tokens:
        DeBERTa's ``relative`` position terms (tensors); ``options`` itself for most models."""
        return options

    @abc.abstractmethod
    def layer_weights(self, layer: int, device: torch.device | str, dtype: torch.dtype) -> Projections:
        """Layer ``layer``'s attention projections per head, in column layout (q_i = W x_i + b)."""


def unknown_of(tokenizer) -> str | None:
    """The unknown token of a ``tokenizers.Tokenizer`` (its WordPiece, WordLevel or BPE model's), else None."""
    return getattr(getattr(tokenizer, "model", None), "unk_token", None) or None
