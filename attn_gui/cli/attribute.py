"""``attn-gui attribute``: a decoder's logit of the next token split into each component's direct term."""

from __future__ import annotations

import argparse

from .common import Command, config_from_args, load_model, one_line, sentence_note
from .terminal import Stop, interrupts


def add_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("--token", required=True, metavar="TOKEN", help="the next token whose logit is split, "
                                                                   "e.g. ' Paris' with its leading space")
    a.add_argument("--against", metavar="TOKEN", help="split logit(--token) - logit(this token) instead")
    a.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    a.add_argument("--overwrite", action="store_true", help="write among other files in the folder")


def run_attribute(args: argparse.Namespace) -> int:
    """``attn-gui attribute``: components.csv, heads.csv and dla.png in ``--out``, all or none; Ctrl-C or
    SIGTERM while they are written stops between two (``Cancelled``), the hidden folder removed."""
    from ..export.folder import Cancelled

    with interrupts() as stop:
        try:
            return _attribute(args, stop)
        except KeyboardInterrupt:
            if not stop.writing:
                raise  # during the compute: "interrupted", as before
            raise Cancelled(args.out) from None


def _attribute(args: argparse.Namespace, stop: Stop) -> int:
    from ..engine.analysis.attribution.logit import direct_logit_attribution
    from ..export.folder import Target
    from ..present.attribution import top_heads

    config = config_from_args(args)
    Target(args.out, overwrite=args.overwrite)  # refused before the compute; creates nothing
    if config.model:
        load_model(config.model)
    from ..engine.model.plan import plan

    planned = plan(config)  # the model resolved once: the attribution and its tokens' text read it
    a = direct_logit_attribution(planned, args.token, args.against)
    from ..export.attribution import write_attribution
    from ..render.offscreen import ensure_app

    ensure_app(offscreen=True)
    stop.writing = True
    folder = write_attribution(a, planned.source.token_text, args.out, args.overwrite, cancel=stop.is_set)
    note = sentence_note(args, config.sentence)
    if note:
        print(note)
    best = ", ".join(f"{name} ({value:+.3f})" for name, value in top_heads(a.heads.numpy(), 3))
    print(f"logit {a.logit:.4f}; largest heads {best}; wrote {one_line(str(folder))}")
    return 0


COMMAND = Command("attribute", "split a decoder's logit of the next token into each head's, MLP's and embedding's "
                               "direct term (direct logit attribution); write them as CSV and the head grid as PNG",
                  add_arguments, run_attribute, engine_options=True)
