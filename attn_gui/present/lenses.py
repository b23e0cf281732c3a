"""What the Why dock's Lenses view shows of ``engine.analysis.lens``: the logit lens and the Jacobian lens of one
sentence as two tables, layer by position, Qt-free.

Row r is layer ``readout.layers[r]`` (0-based, the output of that block, counted from 1 in the labels); the last
row is the last block's output, read by both lenses alike as the model's own next-token distribution. A cell is
the top token and its p; its tooltip the top k with p to three places.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.analysis.lens.readout import LensReadout

NO_LENS = ("<b>No Jacobian lens loaded.</b> The logit lens reads each layer's residual through the final norm and "
           "the unembedding; the Jacobian lens first carries it to the last layer by a matrix J_l fitted over a "
           "corpus (Gurnee et al. 2026), and so shows what the model is disposed to say at each depth. <b>Load "
           "lens…</b> opens a folder written by <code>attn-gui lens fit</code> or a TransformerLens lens .pt file; "
           "<b>Fit on a corpus…</b> fits one here, off the window's thread (resumable).")


@dataclass(frozen=True)
class LensCell:
    """One cell: ``text`` the top token and its p, ``tooltip`` the top k, ``top`` the top token alone."""

    text: str
    tooltip: str
    top: str


@dataclass(frozen=True)
class LensTable:
    """One lens as a table: rows are layers (``layers``, 0-based), columns the sentence's positions."""

    title: str
    layers: list[int]
    rows: list[str]
    columns: list[str]
    cells: list[list[LensCell]]  # [row][position]

    def row_of(self, layer: int) -> int | None:
        """The row of model layer ``layer`` (0-based), None if the lens does not read it."""
        return self.layers.index(layer) if layer in self.layers else None


def _cells(tokens: list[list[list[str]]], probs) -> list[list[LensCell]]:
    out = []
    for row, per_layer in enumerate(tokens):
        cells = []
        for pos, top in enumerate(per_layer):
            p = probs[row, pos].tolist()
            cells.append(LensCell(f"{top[0]} {p[0]:.2f}", "\n".join(f"{t}  {q:.3f}" for t, q in
                                                                     zip(top, p, strict=True)), top[0]))
        out.append(cells)
    return out


def lens_tables(r: LensReadout) -> tuple[LensTable, LensTable]:
    """The logit lens's table and the Jacobian lens's, rows and columns alike."""
    last = r.layers[-1]
    rows = [f"layer {layer + 1}" + (" (output)" if layer == last else "") for layer in r.layers]
    columns = [f"{i + 1} {t}" for i, t in enumerate(r.tokens)]
    return (LensTable("Logit lens: W_U norm(h_l)", list(r.layers), rows, columns,
                      _cells(r.logit_tokens, r.logit_probs)),
            LensTable("Jacobian lens: W_U norm(J_l h_l)", list(r.layers), rows, columns,
                      _cells(r.jacobian_tokens, r.jacobian_probs)))


def about_lens(metadata: dict, n_prompts: int, where: str) -> str:
    """One line on a lens: where it came from and what it was fitted on, as far as its metadata says."""
    found = metadata.get("attn_gui")
    ours: dict = found if isinstance(found, dict) else {}
    model = ours.get("model") or metadata.get("model_name") or "a model it does not name"
    corpus = metadata.get("corpus")
    over = f" over {corpus}" if corpus else ""
    return f"Jacobian lens {where}: fitted on {model}{over}, {n_prompts:,} prompts"
