"""What the newer encoders' config.json fields declare, read once (no heavy imports here).

DeBERTa-v2/v3 (``Family.relative``): disentangled attention, its position terms (``pos_att_type``),
relative position buckets (``position_buckets``, ``max_relative_positions``), shared or own
position projections (``share_att_key``), the relative embeddings' LayerNorm (``norm_rel_ebd``)
and absolute positions or none (``position_biased_input``). ModernBERT (``Family.window ==
"local"``): local layers that see ``local_attention // 2`` keys either side, every
``global_attn_every_n_layers``-th layer global (or as ``layer_types`` says), each kind with its
own RoPE base (``global_rope_theta``, ``local_rope_theta`` or ``rope_parameters``). Every field
here that changes the numbers is honoured or refused in one line naming it, as transformers
reads it (``DebertaV2Config``, ``ModernBertConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError
from .families import Family

# Every config.json field transformers' DebertaV2Model and ModernBertModel read, and what becomes of it here:
# honoured (computed as transformers computes it), refused in one line where it would change the numbers,
# or unused because it changes neither an encoder's hidden states nor its attention (dropout at
# inference, the task heads, initialisation, the ids a tokenizer.json adds). The test reads the list
# from transformers' own modeling files.
UNUSED = ("_attn_implementation", "_name_or_path", "architectures", "dtype", "transformers_version", "id2label",
          "label2id", "num_labels", "problem_type", "return_dict", "output_attentions", "output_hidden_states",
          "is_encoder_decoder", "chunk_size_feed_forward", "tie_word_embeddings", "initializer_range",
          "pad_token_id", "bos_token_id", "eos_token_id", "legacy")
FIELDS = {
    "deberta-v2": dict(
        honoured=("model_type", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                  "vocab_size", "max_position_embeddings", "hidden_act", "layer_norm_eps", "type_vocab_size",
                  "relative_attention", "pos_att_type", "position_buckets", "max_relative_positions", "share_att_key",
                  "norm_rel_ebd", "position_biased_input"),
        refused=("conv_kernel_size", "conv_act", "conv_groups", "embedding_size", "attention_head_size"),
        unused=(*UNUSED, "hidden_dropout_prob", "attention_probs_dropout_prob", "pooler_dropout", "pooler_hidden_act",
                "pooler_hidden_size", "cls_dropout")),
    "modernbert": dict(
        honoured=("model_type", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                  "vocab_size", "max_position_embeddings", "hidden_activation", "norm_eps", "norm_bias",
                  "attention_bias", "mlp_bias", "layer_types", "global_attn_every_n_layers", "local_attention",
                  "sliding_window", "rope_parameters", "global_rope_theta", "local_rope_theta", "head_dim"),
        refused=("rope_scaling",),  # a scaled RoPE, here or in rope_parameters
        unused=(*UNUSED, "attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_activation",
                "classifier_bias", "classifier_dropout", "classifier_pooling", "decoder_bias", "sparse_prediction",
                "sparse_pred_ignore_index", "deterministic_flash_attn", "initializer_cutoff_factor", "cls_token_id",
                "sep_token_id")),
}

POSITION_TERMS = ("c2p", "p2c")  # DeBERTa's terms, in the order the maps show them
THETA = {"full_attention": 160_000.0, "sliding_attention": 10_000.0}  # ModernBertConfig.default_theta
THETA_KEYS = {"full_attention": "global_rope_theta", "sliding_attention": "local_rope_theta"}


@dataclass(frozen=True)
class RelativeShape:
    """DeBERTa's relative positions, as its config declares them."""

    terms: tuple[str, ...]  # "c2p", "p2c": the position terms added to the content scores
    on: bool  # relative_attention: without it no terms are added (the scale still counts them)
    span: int  # s: the relative embeddings have 2s rows; δ(i, j) is clamped to 0 … 2s - 1
    buckets: int  # position_buckets (> 0: log buckets past buckets/2)
    max_position: int  # max_relative_positions
    shared: bool  # share_att_key: the content W_q, W_k (and biases) also project the positions
    norm: bool  # norm_rel_ebd "layer_norm": the relative embeddings are LayerNormed first

    @property
    def scale_factor(self) -> int:
        return 1 + len(self.terms)


def relative_shape(cfg: dict, folder: Path) -> RelativeShape:
    """DeBERTa's relative-position facts; ``ConfigError`` naming a field read here no way."""
    for key, off in (("conv_kernel_size", 0), ("embedding_size", cfg.get("hidden_size"))):
        if cfg.get(key, off) not in (off, None):
            raise ConfigError(f"{folder.name}: {key} = {cfg[key]!r} is not supported (the convolution and the "
                              "embedding projection of DeBERTa are not computed here)")
    heads, d = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if heads and d and cfg.get("attention_head_size") not in (None, d // heads):
        raise ConfigError(f"{folder.name}: attention_head_size = {cfg['attention_head_size']!r} is not supported "
                          "(only hidden_size / num_attention_heads)")
    kinds = cfg.get("pos_att_type") or []
    if isinstance(kinds, str):  # DebertaV2Config reads "c2p|p2c"
        kinds = [k.strip() for k in kinds.lower().split("|")]
    unknown = [k for k in kinds if k not in POSITION_TERMS]
    if unknown:
        raise ConfigError(f"{folder.name}: pos_att_type {unknown[0]!r} is not supported; supported: c2p, p2c")
    norms = [x.strip() for x in str(cfg.get("norm_rel_ebd", "none")).lower().split("|")]
    if set(norms) - {"none", "layer_norm"}:
        raise ConfigError(f"{folder.name}: norm_rel_ebd {cfg['norm_rel_ebd']!r} is not supported; "
                          "supported: none, layer_norm")
    max_position = int(cfg.get("max_relative_positions", -1))
    if max_position < 1:
        max_position = int(cfg.get("max_position_embeddings", 512))
    buckets = int(cfg.get("position_buckets", -1))
    return RelativeShape(tuple(k for k in POSITION_TERMS if k in kinds), bool(cfg.get("relative_attention")),
                         buckets if buckets > 0 else max_position, buckets, max_position,
                         bool(cfg.get("share_att_key")), "layer_norm" in norms)


def local_layers(cfg: dict, folder: Path, layers: int) -> tuple[tuple[int | None, ...], tuple[float, ...]]:
    """ModernBERT's window of each layer (None: global) in the engine's terms (|i - j| < window) and
    each layer's RoPE base; ``ConfigError`` for a scaled RoPE."""
    every = int(cfg.get("global_attn_every_n_layers", 3))
    kinds = cfg.get("layer_types") or ["sliding_attention" if i % every else "full_attention" for i in range(layers)]
    params = cfg.get("rope_parameters") or {}
    bases = {}
    for kind in ("full_attention", "sliding_attention"):
        own = params.get(kind) or cfg.get("rope_scaling") or {}
        scaling = own.get("rope_type", own.get("type", "default"))
        if scaling != "default":
            raise ConfigError(f"{folder.name} uses RoPE scaling {scaling!r}, which attn-gui does not apply yet")
        bases[kind] = float(own.get("rope_theta", cfg.get(THETA_KEYS[kind], THETA[kind])))
    unknown = sorted(set(kinds) - set(bases))
    if unknown or len(kinds) != layers:
        raise ConfigError(f"{folder.name}: layer_types must name {layers} layers, each full_attention or "
                          f"sliding_attention; got {kinds!r:.80}")
    # transformers: |i - j| <= local_attention // 2; a config's sliding_window sets local_attention = 2 sliding_window
    # (ModernBertConfig.sliding_window's setter), whichever of the two config.json lists first
    local = 2 * int(cfg["sliding_window"]) if cfg.get("sliding_window") is not None else \
        int(cfg.get("local_attention", 128))
    window = local // 2 + 1
    return (tuple(window if kind == "sliding_attention" else None for kind in kinds),
            tuple(bases[kind] for kind in kinds))


def spec_facts(cfg: dict, family: Family, folder: Path, layers: int) -> dict:
    """The ``ModelSpec`` fields an encoder of ``family`` adds to BERT's: per-layer windows and RoPE
    bases (ModernBERT), the position terms and scale factor (DeBERTa), its biases."""
    if family.relative:
        rel = relative_shape(cfg, folder)
        return dict(score_terms=rel.terms if rel.on else (), scale_factor=rel.scale_factor)
    if family.window == "local":
        windows, bases = local_layers(cfg, folder, layers)
        return dict(layer_windows=windows, layer_rope_bases=bases, rope_base=bases[0],
                    has_bias=bool(cfg.get("attention_bias", False)),
                    x_is="LayerNorm of the residual stream entering the layer (layer 1: the normed embeddings)",
                    about=("output is the attention block's output, before the residual",))
    return {}
