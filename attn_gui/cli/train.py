"""``attn-gui train``: a tiny decoder trained on a toy task, saved as a Hugging Face checkpoint."""

from __future__ import annotations

import argparse
import sys

from .common import Command, UsageError
from .terminal import interrupts


def add_arguments(t: argparse.ArgumentParser) -> None:
    """One flag per field of ``TrainConfig`` that a person sets."""
    from ..engine.train.tasks import TASKS

    t.add_argument("--task", default="induction", choices=TASKS, help="the task (default induction)")
    t.add_argument("--layers", type=int, default=2, metavar="N", help="1 to 4 (default 2)")
    t.add_argument("--heads", type=int, default=4, metavar="N", help="1 to 8 (default 4)")
    t.add_argument("--d-model", type=int, default=64, metavar="N", help="16 to 256 (default 64)")
    t.add_argument("--mlp", action="store_true", help="add the MLP, SwiGLU or GPT-2's GELU (default: attention only)")
    t.add_argument("--positions", default="rope", choices=("rope", "learned"),
                   help="rope: a Llama checkpoint (default); learned: a GPT-2 checkpoint (learned position "
                        "embeddings, LayerNorm, biases, tied head)")
    t.add_argument("--symbols", type=int, default=16, metavar="N", help="the task's symbols (default 16)")
    t.add_argument("--length", type=int, default=32, metavar="N", help="sequence length (default 32)")
    t.add_argument("--batch", type=int, default=32, metavar="N", help="sequences per step (default 32)")
    t.add_argument("--lr", type=float, default=3e-3, help="AdamW's learning rate (default 0.003)")
    t.add_argument("--steps", type=int, default=2000, metavar="N", help="training steps (default 2000)")
    t.add_argument("--seed", type=int, default=0, help="seeds the weights and the batches (default 0)")
    t.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU threads for the model's products (default 1: at these sizes more threads mostly wait "
                        "on each other, 20 times slower on a busy CPU)")
    t.add_argument("--out", required=True, metavar="DIR",
                   help="the checkpoint folder: new, empty, or one train wrote (replaced whole)")


def run_train(args: argparse.Namespace) -> int:
    """``attn-gui train``: a progress bar with the loss on stderr; Ctrl-C stops after the step
    in progress and saves that whole checkpoint (with log.csv) before exiting 130."""
    import torch

    from ..engine.train.model import TrainConfig
    from ..engine.train.checkpoint import check_checkpoint_folder

    if not 1 <= args.steps <= 10_000_000:
        raise UsageError(f"attn-gui train: --steps must be 1 to 10000000, not {args.steps}")
    if not 1 <= args.threads <= 1024:
        raise UsageError(f"attn-gui train: --threads must be 1 to 1024, not {args.threads}")
    config = TrainConfig(task=args.task, symbols=args.symbols, length=args.length, layers=args.layers,
                         heads=args.heads, d_model=args.d_model, mlp=args.mlp, batch=args.batch, lr=args.lr,
                         seed=args.seed, positions=args.positions)
    check_checkpoint_folder(args.out)  # before step 1: a folder the save would refuse costs no training
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _train(args, config)
    finally:
        torch.set_num_threads(threads)


def _train(args: argparse.Namespace, config) -> int:
    from ..engine import UserError
    from ..engine.train.loop import Trainer
    from ..present.formats import time_left

    trainer = Trainer(config)
    with interrupts() as stop:
        stop.writing = True  # a signal asks to stop between steps: the weights stay whole
        for record in trainer.run(args.steps):
            if record.step % max(1, args.steps // 100) == 0 or record.step == args.steps or stop.is_set():
                done = record.step / args.steps
                bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
                left = time_left(record.time, record.step, args.steps)
                print(f"\rtrain [{bar}] {record.step}/{args.steps}  loss {record.loss:.4f}  "
                      f"accuracy {record.accuracy:.3f}  {record.time:.1f} s, {left}  ", end="", file=sys.stderr,
                      flush=True)
            if stop.is_set():
                break
        print(file=sys.stderr)
        try:
            trainer.save(args.out, log=True)
        except OSError as exc:  # a full disk, the folder gone meanwhile: the previous checkpoint is kept
            raise UserError(f"cannot write the checkpoint to {args.out}: {exc.strerror or exc}; "
                            "a previous checkpoint there is kept") from None
    print(f"wrote {args.out} (step {trainer.steps}, loss {trainer.records[-1].loss:.4f}, "
          f"accuracy {trainer.records[-1].accuracy:.3f})")
    return 130 if stop.is_set() else 0


COMMAND = Command("train", "train a tiny decoder on a toy task; write a Hugging Face checkpoint and log.csv",
                  add_arguments, run_train)
