"""The one decoder source: every decoder model (a folder, a GGUF file, the bundled SmolLM2) runs here.

A decoder's spec names the module that reads its files (``ModelSpec.reader``): ``hf`` (a
Hugging Face folder, read as it is), ``gguf_file`` (a GGUF file, mapped, its tokenizer cached) or
``smollm2`` (the bundled SmolLM2-135M's GGUF, inside its package). Each defines
``read(spec, progress) -> DecoderModel``, ``available(spec)`` and ``install_hint(spec)``;
everything else here (``Source``: tokens, next tokens, the key/value cache) serves them all.
The forward pass is ``llama.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from ...kernel.types import AttendOptions, Projections
from ...readers import cache, stored
from ...readers.catalog import model_spec, on_change
from ...specs.decoder import LlamaShape
from ...specs.decoder import DecoderModel
from ...specs.spec import READERS, ModelSpec
from ...text.tokenizer_json import wrapped
from ...text.tokens import Tokens
from ..loaded import LOADED
from ..source import ModelSource, unknown_of
from ..wiring import Hook
from .forward import Forward, KVCache, Run, forward
from .parts import head_weights

if TYPE_CHECKING:
    pass


def reader(spec: ModelSpec) -> ModuleType:
    """The module that reads the files of the decoder ``spec`` (imports nothing heavy)."""
    return importlib.import_module(READERS[spec.reader])


def load_model(name: str, progress: cache.Progress | None = None) -> DecoderModel:
    """The model, from memory, else read by its reader (a GGUF: mapped, its tokenizer from the cache or built).

    ``progress(done, total)`` is called during a conversion only.
    """
    return loaded_model(model_spec(name), progress)


def loaded_model(spec: ModelSpec, progress: cache.Progress | None = None) -> DecoderModel:
    """``load_model`` of a spec already resolved."""
    return LOADED.get(spec.name, lambda: reader(spec).read(spec, progress))


def model_tokenize(name: str, sentence: str) -> Tokens:
    """The model's tokens of ``sentence`` (BPE), shown readable; ids are vocabulary ids."""
    return tokenize_with(model_spec(name), sentence)


@functools.lru_cache(maxsize=64)
def tokenize_with(spec: ModelSpec, sentence: str) -> Tokens:
    """``model_tokenize`` of a spec already resolved (kept for the last 64 sentences)."""
    model = loaded_model(spec)
    ids = wrapped(model.tokenizer.encode(sentence, add_special_tokens=False).ids, model.add_bos, model.add_eos)
    return Tokens(tuple(model.vocab[i] for i in ids), tuple(ids), model.vocab)


def compute_dtypes(dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype | None]:
    """(the dtype a forward computes in, the dtype its weight matmuls run in, None: the same) of a config's dtype:
    bfloat16 is float32 throughout with the weight matmuls in bfloat16 on the stored weights (``stored.Upcast``)."""
    return (torch.float32, torch.bfloat16) if dtype == torch.bfloat16 else (dtype, None)


Layers = tuple[AttendOptions, ...]  # each layer's attention options (``engine.model.plan.Plan.layers``)


def version(spec: ModelSpec) -> tuple:
    """What changes when the weights of the model change in place: for a model object registered in memory
    (``memory.register``), every tensor's version counter and storage; () for a file, which is read once."""
    module = reader(spec)
    return module.version(spec) if hasattr(module, "version") else ()


def shaped(spec: ModelSpec, layers: Layers | None) -> LlamaShape:
    """The model's shape with each layer's attention as ``layers`` says (the plan's), or as the model runs it."""
    shape = loaded_model(spec).shape
    return shape if layers is None else shape.with_attention(layers)


# on the CPU each weight is converted as a layer reads it (stored.Upcast); on a GPU the copy
# is kept, one at a time; ``changed`` (``version``) makes a registered model edited in place read again
@functools.lru_cache(maxsize=1)
def _weights_on(spec: ModelSpec, device: str, dtype: torch.dtype, changed: tuple = ()):
    return stored.weights_on(loaded_model(spec).weights, device, *compute_dtypes(dtype))


def weights_on(spec: ModelSpec, device: str, dtype: torch.dtype):
    """The model's weights as a forward on ``device`` in ``dtype`` reads them (kept while the weights are unchanged)."""
    return _weights_on(spec, device, dtype, version(spec))


@functools.lru_cache(maxsize=2)
def _run(spec: ModelSpec, ids: tuple[int, ...], device: str, dtype: torch.dtype, layers: Layers | None,
         changed: tuple = ()) -> Run:
    """The last runs over whole sentences, kept as far as they went (``llama.Run``): another layer or head inside
    what was run is shown without running the model, one beyond goes on from the kept residual. Keyed on the
    plan's attention (``layers``) and on the weights' ``version``: a registered model edited in place is run again."""
    with torch.no_grad():
        return Run(weights_on(spec, device, dtype), torch.tensor(ids, device=device), shaped(spec, layers))


def kept_run(spec: ModelSpec, ids: tuple[int, ...], device: str, dtype: torch.dtype, layers: Layers | None) -> Run:
    """``_run`` keyed on the weights' current ``version``."""
    return _run(spec, ids, device, dtype, layers, version(spec))


@functools.lru_cache(maxsize=1)
def _layer_weights(spec: ModelSpec, layer: int, device: str, dtype: torch.dtype, changed: tuple = ()) -> Projections:
    """The shown layer's projections, kept: another head or token of it reads no weight again (a quantized model's
    are dequantized as they are read, a layer of an 8 B model in about a second). With bfloat16 matmuls they carry
    the forward's own matrices (``Projections.matmuls``), so the shown layer's α is made by the same arithmetic as
    the model view's (one α per layer); the W fields hold the weights in float32, for showing them."""
    w, shape = weights_on(spec, device, dtype), loaded_model(spec).shape
    shown = head_weights(w, layer, shape)
    own = head_weights(w, layer, shape, multiply=True).matmuls if compute_dtypes(dtype)[1] is not None else None
    return shown if own is None else dataclasses.replace(shown, matmuls=own)


_RUN_LOCK = threading.RLock()  # one thread advances the kept runs at a time (``llama.Run`` is not thread-safe)


def prefill(spec: ModelSpec, ids: tuple[int, ...], device: str, dtype: torch.dtype, layers: Layers | None) -> Forward:
    """The whole run over a sentence (the kept one, finished where it stopped). A window's compute thread sees
    its layers and may stop it between them (``engine.progress``): the run stays kept after its last whole layer."""
    run = kept_run(spec, ids, device, dtype, layers)
    with _RUN_LOCK, torch.no_grad():
        return run.finish()


def first_input(spec: ModelSpec, ids: tuple[int, ...], device: str, dtype: torch.dtype, layer: int,
                layers: Layers | None) -> tuple[torch.Tensor, int]:
    """What ``layer`` reads, having run only the layers before it, and how many layers the kept run has run."""
    run = kept_run(spec, ids, device, dtype, layers)
    with _RUN_LOCK, torch.no_grad():
        return run.input_of(layer), run.done


_STREAMED: OrderedDict[tuple, Run] = OrderedDict()  # the last streamed run (each holds L T d of inputs)
STREAMED_KEPT = 1
_STREAMED_LOCK = threading.Lock()


def _streamed(spec: ModelSpec, ids: tuple[int, ...], device: str, dtype: torch.dtype, reduce_to: int,
              block_bytes: int, layer: int | None, layers: Layers | None = None) -> Forward:
    """The last streamed run (``llama.Run(reduce_to=)``), kept as ``_run``'s are, as far as it went: every layer's
    maps pooled to ``reduce_to`` per side. A run stopped between layers (Esc) goes on from its last whole layer
    when asked again. A run made here keeps ``layer``'s steps (``Forward.shown``); a kept run is given as it is,
    whichever layer it kept."""
    key = (spec, ids, device, dtype, reduce_to, block_bytes, layers, version(spec))
    with _STREAMED_LOCK:
        run = _STREAMED.get(key)
        if run is not None:
            _STREAMED.move_to_end(key)
        else:
            while len(_STREAMED) >= STREAMED_KEPT:  # the older runs go before this one is made
                _STREAMED.popitem(last=False)
    if run is None:
        with torch.no_grad():
            run = Run(weights_on(spec, device, dtype), torch.tensor(ids, device=device), shaped(spec, layers),
                      reduce_to=reduce_to, block_bytes=block_bytes, shown_layer=layer)
        with _STREAMED_LOCK:
            _STREAMED[key] = run
            while len(_STREAMED) > STREAMED_KEPT:
                _STREAMED.popitem(last=False)
    with _RUN_LOCK, torch.no_grad():
        return run.finish()


def _drop_streamed() -> None:
    with _STREAMED_LOCK:
        _STREAMED.clear()


on_change(lambda name: tokenize_with.cache_clear())  # a folder rewritten in place: its tokens read again
LOADED.on_drop(_weights_on.cache_clear)  # a model leaving memory takes its kept runs along
LOADED.on_drop(_run.cache_clear)
LOADED.on_drop(_layer_weights.cache_clear)
LOADED.on_drop(_drop_streamed)


class Source(ModelSource):
    """A decoder model (its files read by ``spec.reader``): a source that also predicts and generates.

    Beyond ``ModelSource``: ``load(progress)`` loads (the first time: converts) the model,
    ``next_tokens`` gives the top next tokens, ``forward`` runs the model after a key/value
    cache, and ``decode_text`` turns ids back into text. ``engine.decoding`` builds
    step-by-step decoding and generation on these.
    """

    @property
    def install_hint(self) -> str:
        return reader(self.spec).install_hint(self.spec)

    def available(self) -> bool:
        return reader(self.spec).available(self.spec)

    def load(self, progress: cache.Progress | None = None) -> None:
        load_model(self.spec.name, progress)

    def loaded(self) -> bool:
        return self.spec.name in LOADED

    def parameters(self) -> int | None:
        if not self.loaded():
            return None
        weights = loaded_model(self.spec).weights
        shape = getattr(weights, "shape", None)  # a GGUF's tensors: their shapes without dequantizing them
        return sum(math.prod(shape(key)) if shape is not None else weights[key].numel() for key in weights)

    def tokenize(self, sentence: str) -> Tokens:
        return tokenize_with(self.spec, sentence)

    def unknown_token(self) -> str | None:
        return unknown_of(loaded_model(self.spec).tokenizer)

    def layer_inputs(self, token_ids, device, dtype, layers: Layers | None = None):
        run = prefill(self.spec, tuple(token_ids.tolist()), str(device), dtype, layers)
        return [*run.inputs, run.residual[-1]], run.weights

    def first_input(self, token_ids, device, dtype, layer: int,
                    layers: Layers | None = None) -> tuple[torch.Tensor, int]:
        """What layer ``layer`` reads (X (T, d)), having run only the layers before it: the first maps of a layer need
        no more. The run is kept: a later ``layer_inputs`` (or ``next_tokens``, ``summaries``) of the same tokens and
        ``layers`` goes on from where it stopped, and another layer inside it costs nothing. Returns X and the layers
        run so far."""
        return first_input(self.spec, tuple(token_ids.tolist()), str(device), dtype, layer, layers)

    def streamed_inputs(self, token_ids, device, dtype, reduce_to: int, block_bytes: int,
                        layer: int | None = None, layers: Layers | None = None) -> Forward:
        """The run over ``token_ids`` streamed (no T x T map kept): each layer's X in ``inputs``, the final norm's
        output as ``residual[-1]``, every layer's summaries and pooled maps (``Forward.summaries``); made now,
        it keeps ``layer``'s steps (``Forward.shown``)."""
        return _streamed(self.spec, tuple(token_ids.tolist()), str(device), dtype, reduce_to, block_bytes, layer,
                         layers)

    def summaries(self, token_ids, device, dtype, layers: Layers | None = None):
        """Every layer's and head's summaries of the whole-sentence run (``engine.summaries.Summaries``)."""
        return prefill(self.spec, tuple(token_ids.tolist()), str(device), dtype, layers).summaries

    def layer_weights(self, layer, device, dtype) -> Projections:
        return _layer_weights(self.spec, layer, str(device), dtype, version(self.spec))

    def predicts(self) -> bool:
        """Whether the model has its language-model head: next tokens, generation (loads the model)."""
        return loaded_model(self.spec).predicts

    def ends_text(self) -> str | None:
        """The end token the tokenizer puts after every text (add_eos_token), readable, or None (loads the model)."""
        model = loaded_model(self.spec)
        return None if model.add_eos is None else model.vocab[model.add_eos]

    def next_tokens(self, token_ids, device, dtype, k: int = 5, layers: Layers | None = None):
        if not self.predicts():
            return None
        run = prefill(self.spec, tuple(token_ids.tolist()), str(device), dtype, layers)
        return self.top_tokens(run.logits, k)

    def top_tokens(self, logits: torch.Tensor, k: int = 5) -> tuple[tuple[str, float], ...] | None:
        """The ``k`` most likely tokens of ``logits`` (V,) with their softmax probabilities, highest first
        (all V of them where V < k: a tiny vocabulary); None without a language-model head."""
        if not self.predicts():
            return None
        probs = torch.softmax(logits.double(), dim=-1)
        top = probs.topk(min(k, probs.numel()))
        vocab = loaded_model(self.spec).vocab
        return tuple((vocab[i], float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True))

    def forward(self, token_ids: torch.Tensor, device, dtype, cache: KVCache | None = None, *,
                hooks: Mapping[str, Hook] | None = None, keep: bool = False, reduce_to: int | None = None,
                shown_layer: int | None = None,
                layers: Layers | None = None) -> Forward:
        """Run the model on new ``token_ids`` (n,) after ``cache`` (None: from the start); nothing is kept.

        ``hooks`` change hook points (TransformerLens' names: ``model.wiring``), ``keep`` keeps every point
        (``Forward.activations``); ``reduce_to`` streams, keeping ``shown_layer``'s
        steps (``llama.forward``); ``layers``: each layer's attention options (the plan's), else the model's."""
        with torch.no_grad():
            return forward(weights_on(self.spec, str(device), dtype), token_ids.to(device),
                           shaped(self.spec, layers), cache, hooks=hooks, keep=keep, reduce_to=reduce_to,
                           shown_layer=shown_layer)

    def decoder(self, device, dtype, layers: Layers | None = None) -> tuple[dict[str, torch.Tensor], LlamaShape]:
        """The weights on ``device`` and the shape (each layer's attention as ``layers`` says, else the model's):
        ``llama.decoder_layer`` runs a layer on them."""
        return weights_on(self.spec, str(device), dtype), shaped(self.spec, layers)

    def decode_text(self, token_ids) -> str:
        """The text of ``token_ids`` (special tokens included), as the model's byte-level decoder gives it."""
        return loaded_model(self.spec).tokenizer.decode(list(token_ids), skip_special_tokens=False)

    @property
    def eos_id(self) -> int:
        """The end-of-sequence token's id, where generation stops."""
        return loaded_model(self.spec).eos_id

    def token_text(self, token_id: int) -> str:
        """The readable text of one token (as in the maps)."""
        return loaded_model(self.spec).vocab[token_id]
