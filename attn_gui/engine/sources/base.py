"""What the engine asks of a pretrained model: its tokens, its layer inputs and its weights."""

from __future__ import annotations

import abc

import torch

from ..attention import Projections
from ..tokens import Tokens
from .spec import ModelSpec


class ModelSource(abc.ABC):
    """One pretrained model, run by our own code so every intermediate can be shown.

    A subclass lives in its own module of ``attn_gui.engine.sources`` as ``Source`` and
    is registered with one ``ModelSpec`` line in ``sources.MODELS``.

    Attributes
    ----------
    spec : ModelSpec
        The model's fixed facts (sizes, layers, token limit), known without loading it.
    install_hint : str
        The command that installs what ``available()`` looks for.
    """

    install_hint: str = ""

    def __init__(self, spec: ModelSpec):
        self.spec = spec

    @abc.abstractmethod
    def available(self) -> bool:
        """Whether the model's files and libraries are installed here (imports nothing)."""

    @abc.abstractmethod
    def tokenize(self, sentence: str) -> Tokens:
        """The model's tokens of ``sentence`` (special tokens included); ids are vocabulary ids.

        Raises ``ModelUnavailable`` when the model is not installed.
        """

    @abc.abstractmethod
    def layer_inputs(self, token_ids: torch.Tensor, device: torch.device | str,
                     dtype: torch.dtype) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Run the whole model on ``token_ids`` (T,).

        Returns
        -------
        hidden : list of L + 1 tensors (T, d)
            hidden[l] enters layer l; the last is the model's output.
        weights : (L, h, T, T)
            Every layer's attention weights.
        """

    @abc.abstractmethod
    def layer_weights(self, layer: int, device: torch.device | str, dtype: torch.dtype) -> Projections:
        """Layer ``layer``'s attention projections per head, in column layout (q_i = W x_i + b)."""
