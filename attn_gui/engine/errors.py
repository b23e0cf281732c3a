"""The one family of errors a person can act on; anything else is a bug."""


class UserError(ValueError):
    """Bad input, a missing device or model, too large a request: the message says what to do."""
