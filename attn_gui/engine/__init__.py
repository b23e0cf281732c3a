"""The attention engine: pure PyTorch, no Qt.

>>> from attn_gui.engine import AttentionConfig, compute
>>> result = compute(AttentionConfig(sentence="When in doubt look intelligent"))
>>> result.weights.shape
torch.Size([1, 5, 5])
"""

from .kernel.types import AttendOptions, Projections, Steps, Stream
from .kernel.attend import attend
from .analysis.circuits import Circuit, circuit
from .run.result import AttentionResult, as_dict
from .run.compute import compute
from .run.memory import estimate_bytes
from .config.config import DEFAULT_SENTENCE, OPTIONS, AttentionConfig, Dims
from .config.presets import PRESETS, preset
from .run.decoding import DecodeStep, Decoder, Generation, generate
from .base.devices import available_devices
from .base.errors import ConfigError, DeviceError, ModelUnavailable, TooLargeError, UserError
from .run.fields import FIELDS, TENSOR_FIELDS, FieldInfo, formula
from .config.options import Option, format_heads, parse_heads, toggle_head
from .run.inputs import check_tokens, check_tokens_now, tokens_for, unknown_note
from .analysis.metrics import METRICS, causal_visible, head_metrics
from .analysis.rollout import rollout
from .analysis.scaling import EntropySweep, Saturation, entropy_vs_dk, saturation
from .specs.catalog import MODELS
from .specs.spec import ModelSpec
from .readers.catalog import model_spec
from .text.tokens import Tokens, tokenize

__all__ = [
    "AttentionConfig", "AttentionResult", "compute", "estimate_bytes", "as_dict",
    "OPTIONS", "Option", "format_heads", "parse_heads", "toggle_head", "Dims", "PRESETS", "preset", "DEFAULT_SENTENCE",
    "UserError", "ConfigError", "DeviceError", "TooLargeError", "ModelUnavailable",
    "available_devices", "FIELDS", "TENSOR_FIELDS", "FieldInfo", "formula",
    "Tokens", "tokenize", "tokens_for", "check_tokens", "check_tokens_now", "unknown_note",
    "Projections", "AttendOptions", "Stream", "Steps", "attend", "MODELS", "ModelSpec", "model_spec",
    "METRICS", "head_metrics", "causal_visible", "rollout", "Saturation", "saturation",
    "EntropySweep", "entropy_vs_dk", "Decoder", "DecodeStep", "Generation", "generate", "Circuit", "circuit",
]
