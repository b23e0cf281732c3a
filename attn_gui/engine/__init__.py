"""The attention engine: pure PyTorch, no Qt.

>>> from attn_gui.engine import AttentionConfig, compute
>>> result = compute(AttentionConfig(sentence="When in doubt look intelligent"))
>>> result.weights.shape
torch.Size([1, 5, 5])
"""

from .compute import AttentionResult, TooLargeError, as_dict, compute, estimate_bytes
from .config import DEFAULT_SENTENCE, PRESETS, AttentionConfig, preset
from .devices import DeviceError, available_devices
from .errors import UserError
from .fields import FIELDS, TENSOR_FIELDS, FieldInfo, formula
from .tokens import Tokens, tokenize

__all__ = [
    "AttentionConfig", "AttentionResult", "compute", "estimate_bytes", "as_dict",
    "PRESETS", "preset", "DEFAULT_SENTENCE", "DeviceError", "TooLargeError",
    "available_devices", "UserError", "FIELDS", "TENSOR_FIELDS", "FieldInfo", "formula", "Tokens", "tokenize",
]
