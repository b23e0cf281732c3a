"""``attn-gui effects``: bad input is one line on stderr and exit 2, before any model runs."""

import pytest

from attn_gui.cli import main


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
