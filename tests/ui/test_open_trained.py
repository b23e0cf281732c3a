"""A model trained by ``attn-gui train``, opened with ``attn-gui --model DIR``: the window shows its
task's probe sequence (as the Train dock's "Open in the explorer" does), not the default English
sentence, whose words would all be the unknown token; and layer 2 holds the induction head."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from attn_gui.cli import main
from attn_gui.engine.train.tasks import Task
from attn_gui.engine.train.loop import head_scores

# tests/engine/test_training.py's run that forms a previous-token head, then an induction head
TRAIN = ["train", "--task", "induction", "--symbols", "8", "--length", "16", "--layers", "2", "--heads", "2",
         "--d-model", "32", "--batch", "64", "--lr", "0.01", "--steps", "250"]

CODE = """
import json, sys
import numpy as np
from PySide6 import QtCore
from attn_gui import cli
from attn_gui.ui.main_window import MainWindow

orig = MainWindow.show_frame
def show_frame(self, frame):
    orig(self, frame)
    if frame.result.layer_weights is not None and not getattr(self, "reported", False):
        self.reported = True
        np.save(sys.argv[2], frame.result.layer_weights.cpu().numpy())
        print("TOKENS", json.dumps(list(frame.result.tokens)), flush=True)
        print("MESSAGE", json.dumps(self.panel.messageLabel.text()), flush=True)
        QtCore.QTimer.singleShot(0, self.close)
MainWindow.show_frame = show_frame
sys.exit(cli.main(["--model", sys.argv[1], *sys.argv[3:]]))
"""


def open_in_window(tmp_path, folder, *args) -> tuple[list[str], str, np.ndarray]:
    """The tokens, the message under the sentence and every layer's alpha of the window's first model frame."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_GUI_CONFIG_DIR": str(tmp_path / "config")}
    out = tmp_path / "alphas.npy"
    proc = subprocess.run([sys.executable, "-c", CODE, str(folder), str(out), *args], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("TOKENS", "MESSAGE")))
    return json.loads(lines["TOKENS"]), json.loads(lines["MESSAGE"]), np.load(out)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained") / "ck"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the engine test: the run it checks
    try:
        assert main([*TRAIN, "--out", str(folder)]) == 0
    finally:
        torch.set_num_threads(threads)
    return folder


def test_a_trained_model_opens_on_its_probe_with_the_induction_stripes_in_layer_2(tmp_path, trained):
    import transformers

    tokens, message, alphas = open_in_window(tmp_path, trained)
    probe = Task("induction", 8, 16).probe()
    assert tokens == [str(i) for i in probe.inputs[0].tolist()]  # the task's words: no unknown token
    assert message == ""
    hf = transformers.AutoModelForCausalLM.from_pretrained(trained, attn_implementation="eager").eval()
    with torch.no_grad():
        out = hf(probe.inputs, output_attentions=True)
    peer = torch.cat(out.attentions).numpy()  # (L, h, T, T)
    np.testing.assert_allclose(alphas, peer, atol=1e-5, rtol=0)
    scores = head_scores(torch.from_numpy(peer), probe)
    assert scores["induction"][1].max() > 0.5  # layer 2: alpha from each second-copy token to the one after its
    assert scores["previous"][0].max() > 0.5  # first copy, built on layer 1's previous-token head


def test_a_sentence_of_unknown_words_is_warned_about_under_the_sentence(tmp_path, trained):
    tokens, message, _ = open_in_window(tmp_path, trained, "--sentence", "the cat sat on the mat")
    assert tokens == ["0"] * 6  # the checkpoint's tokenizer maps every word it lacks to "0", its unknown token
    assert "6 of the 6 tokens are the unknown token '0'" in message
