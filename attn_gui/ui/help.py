"""Help → How to read the maps: the steps in order, the controls, a pretrained model, mouse and keys."""

from __future__ import annotations

from PySide6 import QtWidgets

STEPS = """
<h3>Self-attention, one map per step</h3>
<p>The maps run left to right in the order the numbers flow. Every row of a token map is one
token of the sentence; hover a map's title for its formula, its shape and what it means.</p>
<ol>
<li><b>X</b>: each token's vector (one row per token, d<sub>model</sub> columns). With stable
inputs (the default) a row depends only on the seed and its token, so a new word changes no
other row.</li>
<li><b>Q = X W<sub>q</sub></b>, <b>K = X W<sub>k</sub></b>, <b>V = X W<sub>v</sub></b>: three learned
matrices turn every token into a <i>query</i> (what it looks for), a <i>key</i> (what it can be
found by) and a <i>value</i> (what it passes on).</li>
<li><b>ω = Q Kᵀ</b>: every query row is compared with every key column; a large score
means a good match.</li>
<li><b>ω′ = ω / √d<sub>k</sub></b>: the scores are scaled down (and divided by the temperature) so the
softmax does not saturate. Masked cells (a causal mask, a window) are hatched grey.</li>
<li><b>α = softmax(ω′)</b>, taken along each row: every row is a set of weights that sums to 1,
drawn on the fixed 0 to 1 scale, so any two α maps compare at a glance.</li>
<li><b>Z = α V</b>: each token's new vector is the values mixed in the proportions of its row of α.</li>
<li><b>Concat(Z<sub>1</sub>…Z<sub>h</sub>) W<sub>O</sub></b>: the heads' outputs side by side, mixed back
to d<sub>model</sub> columns: the output of the attention block.</li>
</ol>
<p>Signed maps use blue for negative, white for 0 and red for positive, scaled to the largest
magnitude in the map. With several heads a strip of every head's α sits on top; heads that share
one key/value head (grouped-query attention) are bracketed together.</p>
"""

CONTROLS = """
<h3>The controls on the left</h3>
<ul>
<li><b>Sentence</b>: the maps recompute as you type. The chips below show the tokens; a long
input shows its first tokens and a link to all of them.</li>
<li><b>Sizes</b>: d<sub>model</sub> (the width of X), d<sub>q</sub> = d<sub>k</sub> (queries and keys),
d<sub>v</sub> (values) and the number of heads h.</li>
<li><b>Inputs and weights</b>: the seeds that draw X and the weights, how X is made (stable: one
row per seed and token; an embedding table; uniform random rows, as the tutorials), positional
encoding, how W is initialised, and biases.</li>
<li><b>Attention</b>: the two weight conventions (q = x·W or q = W·x), projections on or off, the
1/√d<sub>k</sub> scaling, the temperature, a causal mask or a window, dot or cosine similarity,
and key/value heads for grouped-query attention.</li>
<li><b>Compute</b>: the device and the number type.</li>
<li><b>Presets</b> reproduce the tutorials' printed numbers; <b>Re-roll</b> draws new seeds.</li>
</ul>
<p>An impossible value is explained in red under the sentence; the maps keep the last good result.</p>
"""

MODEL = """
<h3>A pretrained model</h3>
<p>Random weights teach the mechanism; a trained model shows what attention learns. Choose a
model under <b>Source → weights</b> and a <b>layer</b>:</p>
<ul>
<li>The tokens become the model's own tokens (with its special tokens, such as [CLS] and [SEP]).</li>
<li><b>X</b> is the hidden state entering the chosen layer; W<sub>q</sub>, W<sub>k</sub>, W<sub>v</sub>,
W<sub>O</sub> and their biases are that layer's real weights, and the sizes are the model's
(shown read-only).</li>
<li>The last map is the attention block's output, before the residual connection and the
normalisation that follow it in the model.</li>
<li><b>View → Model view</b> shows α of every layer (rows) and head (columns) at once; click one to
open it in the maps.</li>
<li><b>hide the special tokens</b> takes them out of the maps (they often soak up attention);
the other numbers do not change.</li>
</ul>
<p>Everything runs offline: the model's files are installed with the program, never downloaded.
<b>File → Open model…</b> lists the models already on this computer (the Hugging Face cache, Ollama,
LM Studio; the ones that cannot be opened greyed, with the reason) and opens one, or a model folder of
your own (Hugging Face layout); <b>File → Open GGUF file…</b> opens a llama.cpp .gguf file
(Llama, Mistral, SmolLM, TinyLlama, Qwen2).</p>
"""

KEYS = """
<h3>Mouse and keyboard</h3>
<table cellpadding="3">
<tr><td><b>Hover a cell</b></td><td>its exact value and meaning, beside the cell</td></tr>
<tr><td><b>Hover a title</b></td><td>what the map is: formula, shape, one sentence</td></tr>
<tr><td><b>Click a row</b></td><td>follow that token through every step (Follow one token, below)</td></tr>
<tr><td><b>Click a head</b></td><td>in the heads strip: show that head in the per-head maps</td></tr>
<tr><td><b>Double-click a map</b></td><td>focus: the map large, its neighbours in the data flow beside it</td></tr>
<tr><td><b>Esc</b></td><td>leave focus: every map again</td></tr>
<tr><td><b>Scroll</b></td><td>zoom a map (labels thinned to fit come back); right-click → Reset zoom</td></tr>
<tr><td><b>Right-click a map</b></td><td>export it as PNG or SVG, or copy it</td></tr>
<tr><td><b>Ctrl+L</b></td><td>edit the sentence</td></tr>
<tr><td><b>Ctrl+E</b></td><td>export every map, the figure and every tensor into a folder</td></tr>
<tr><td><b>Ctrl+O / Ctrl+S</b></td><td>open or save a session (the sentence, every setting and the view)</td></tr>
</table>
"""

PAGES: tuple[tuple[str, str], ...] = (
    ("The steps", STEPS), ("The controls", CONTROLS), ("A pretrained model", MODEL), ("Mouse and keys", KEYS))


class HelpDialog(QtWidgets.QDialog):
    """How to read the maps, one tab per page of ``PAGES``."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("helpDialog")
        self.setWindowTitle("How to read the maps")
        self.tabs = QtWidgets.QTabWidget()
        for title, text in PAGES:
            page = QtWidgets.QTextBrowser()
            page.setOpenExternalLinks(False)
            page.setHtml(text)
            self.tabs.addTab(page, title)
        close = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.close)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(close)
        self.resize(640, 560)


def show_help(parent: QtWidgets.QWidget) -> HelpDialog:
    """Open (or raise) the help window of ``parent``."""
    dialog = parent.findChild(HelpDialog, "helpDialog") or HelpDialog(parent)
    dialog.show()
    dialog.raise_()
    return dialog
