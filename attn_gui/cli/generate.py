"""``attn-gui generate``: continue the sentence with a decoder, the most likely token each step."""

from __future__ import annotations

import argparse

from .common import Command, UsageError, config_from_args, given_options, sentence_note


def add_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument("--steps", type=int, default=8, metavar="N", help="tokens to generate, 1 to 512 (default 8)")


GENERATE_OPTIONS = ("sentence", "model", "device", "dtype", "ablate")  # what changes a generation's numbers


def run_generate(args: argparse.Namespace) -> int:
    """``attn-gui generate``: one line per step (position, token, probability), then the text."""
    from ..engine.run.decoding import check_steps, generate

    from ..engine import OPTIONS

    # generation runs the whole model as it is: an option of the shown attention step changes nothing
    inert = [OPTIONS[name].flag for name in given_options(args) if name not in GENERATE_OPTIONS]
    if inert:
        raise UsageError(f"attn-gui: {', '.join(inert)} {'has' if len(inert) == 1 else 'have'} no effect on "
                         f"generate: it runs the whole model as trained (only --sentence, --model, --ablate, --device "
                         f"and --dtype apply)")
    config = config_from_args(args)
    check_steps(config, args.steps)
    result = generate(config, args.steps)
    note = sentence_note(args, config.sentence)
    if note:
        print(note)
    for step in result.steps:  # positions counted from 1, as the window's x₁ … x_T
        print(f"step {step.position - len(result.prompt.tokens) + 1:>3}  position {step.position + 1:>3}  "
              f"{step.token:<16} p = {step.probability:.4f}  ({step.elapsed_ms:.0f} ms)")
    if result.stopped:
        print("(stopped at the end-of-sequence token)")
    print(config.sentence + result.text)
    return 0


COMMAND = Command("generate", "continue the sentence with a decoder model, the most likely token each step; print "
                              "each step's probability, then the text", add_arguments, run_generate,
                  engine_options=True)
