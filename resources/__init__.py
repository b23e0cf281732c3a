"""Shipped resources: style sheet, example sentences, icons."""
