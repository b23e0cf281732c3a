"""``attn-gui effects``: each head of a decoder ablated (or patched) alone, its effect on the next token."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import Command, config_from_args, load_model


def add_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
    e.add_argument("--corrupt", metavar="TEXT", help="patch each head from --sentence into this sentence (same "
                                                      "token count) and write the recovered fraction instead")
    e.add_argument("--target", metavar="TOKEN", help="the next token whose log p is measured (default: the top one)")
    e.add_argument("--mode", choices=("zero", "mean"), default="zero", help="ablation: zero, or mean over positions")


def run_effects(args: argparse.Namespace) -> int:
    """``attn-gui effects``: the (layers x heads) grid as effects.csv and effects.png in ``--out``."""
    from ..engine.analysis import interventions

    from ..engine.model.plan import plan
    from ..export.folder import Target

    config = config_from_args(args)
    Target(args.out, overwrite=True)  # a file in its place, a name too long: refused before the measuring
    if config.model:
        load_model(config.model)
    planned = plan(config)  # the model resolved once: the effects and the target's text read it
    if args.corrupt is None:
        grids = interventions.head_effects(planned, args.target, args.mode)
    else:
        grids = interventions.patch_effects(config, config.replace(sentence=args.corrupt))
    grid = None
    for grid in grids:
        print(f"attn-gui effects: layer {grid.done} of {grid.total}", file=sys.stderr, flush=True)
    assert grid is not None  # a grid after each layer, and a model has a layer at least
    if args.corrupt is None:  # name the token measured: --target's, else the top next one
        token = f'"{planned.source.token_text(grid.target)}"'
        token = token if args.target is not None else f"top next token {token}"
        symbol, what = "Δ log p", f"change in log p({token}) when the head alone is ablated ({args.mode})"
    else:
        symbol, what = "recovered", "fraction of the logit difference recovered by patching the head alone"
    values = grid.values.numpy()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [f"layer {i + 1}" for i in range(values.shape[0])]
    cols = [f"head {j + 1}" for j in range(values.shape[1])]
    with open(out / "effects.csv", "w", encoding="utf-8") as f:
        f.write(f"# {what}\n" + ",".join(["layer", *cols]) + "\n")
        for i, row in enumerate(values):
            f.write(",".join([str(i + 1), *(f"{v:.6g}" for v in row)]) + "\n")
    from ..export.images import export_image
    from ..present.maps import MapData
    from ..render.offscreen import dispose, render_map

    view = render_map(MapData(values, f"{symbol}: {what}", "signed", rows, cols, symbol=symbol))
    try:
        export_image(view, out / "effects.png")
    finally:
        dispose(view)
    print(f"wrote {out / 'effects.csv'} and {out / 'effects.png'}")
    return 0


COMMAND = Command("effects", "ablate (or, with --corrupt, patch) each head of a decoder alone; write the layer x head "
                             "grid of its effect on the next token as CSV and PNG", add_arguments, run_effects,
                  engine_options=True)
