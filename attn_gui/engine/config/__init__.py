"""What a person asks for: ``AttentionConfig`` (every option declared once, plain validated data), the
options' declarations and the presets."""
