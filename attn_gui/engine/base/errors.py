"""The one family of user-facing errors: a message a person can act on.

Everything the engine raises for a bad input or an unusable machine is a
``UserError``; anything else escaping the engine is a bug and should be reported
as one. ``UserError`` subclasses ``ValueError`` so code that caught ``ValueError``
before keeps working.
"""

from __future__ import annotations


class UserError(ValueError):
    """A problem the user can fix: the message says what and, where possible, how."""


class ConfigError(UserError):
    """A config value is invalid (out of range, wrong type, no tokens, too many tokens)."""


class DeviceError(UserError):
    """The chosen device cannot run the compute (absent, gone away, out of memory)."""


class TooLargeError(UserError):
    """The compute would need more memory than the device has free, or more tokens than allowed."""


class ModelUnavailable(UserError):
    """A pretrained model's package (or safetensors / tokenizers) is not installed."""
