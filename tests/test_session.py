"""Sessions round-trip, and every malformed or hostile file is refused with a clear message."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attn_gui.engine import AttentionConfig
from attn_gui.present.session import load_session, parse_session, save_session, session_dict
from attn_gui.present.state import ViewState


def test_round_trip(tmp_path):
    cfg = AttentionConfig(sentence="Life is short, eat dessert first", heads=2, causal=True, weight_seed=3,
                          seed=2**40, temperature=0.123)
    state = ViewState(cfg, head=1, token=4, hide_special=True, focus="weights")
    path = tmp_path / "s.json"
    save_session(path, state, {"geometry": "AAAA"})
    assert load_session(path) == (state, {"geometry": "AAAA"})
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temp file left behind


def test_version_1_files_still_load():
    old = {"app": "attn-gui", "version": 1, "config": AttentionConfig(heads=3).to_dict(), "layout": {}}
    state, layout = parse_session(json.dumps(old))
    assert state == ViewState(AttentionConfig(heads=3)) and layout == {}


def without_inputs(config: AttentionConfig) -> dict:
    data = config.to_dict()
    del data["inputs"]
    return data


def test_files_before_stable_inputs_load_as_they_were_saved():
    # made when "embedding" was the default: a config without "inputs" meant it
    v1 = {"app": "attn-gui", "version": 1, "config": without_inputs(AttentionConfig(heads=3))}
    assert parse_session(json.dumps(v1))[0].config == AttentionConfig(heads=3, inputs="embedding")
    v2 = {"app": "attn-gui", "version": 2, "state": {"config": without_inputs(AttentionConfig()), "head": 0}}
    assert parse_session(json.dumps(v2))[0].config == AttentionConfig(inputs="embedding")
    v2_empty = {"app": "attn-gui", "version": 2, "state": {}}
    assert parse_session(json.dumps(v2_empty))[0].config == AttentionConfig(inputs="embedding")
    for inputs in ("embedding", "uniform", "stable"):  # a saved choice stays what it was
        v2 = {"app": "attn-gui", "version": 2, "state": ViewState(AttentionConfig(inputs=inputs)).to_dict()}
        assert parse_session(json.dumps(v2))[0].config.inputs == inputs


def test_version_3_files_mean_the_new_default():
    data = good()
    assert data["version"] == 3
    del data["state"]["config"]["inputs"]
    assert parse_session(json.dumps(data))[0].config == AttentionConfig()
    assert AttentionConfig().inputs == "stable"


def good() -> dict:
    return session_dict(ViewState())


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.update(version=4), "version 4 is not supported"),
    (lambda d: d.update(version=True), "not supported"),
    (lambda d: d.pop("state"), "has no state"),
    (lambda d: d.update(app="other"), "not an Attention Explorer session"),
    (lambda d: d.update(extra=1), "unknown session field"),
    (lambda d: d["state"]["config"].update(d_model=10**30), "d_model must be between"),
    (lambda d: d["state"]["config"].update(d_model="5"), "d_model must be a whole number"),
    (lambda d: d["state"]["config"].update(evil="x"), "unknown config field"),
    (lambda d: d["state"]["config"].update(temperature=10**400), "temperature must be a number between"),
    (lambda d: d["state"].update(config=[1, 2, 3]), "mapping"),
    (lambda d: d.update(state=[1, 2, 3]), "mapping"),
    (lambda d: d["state"].update(head=-1), "head must be"),
    (lambda d: d["state"].update(token="x"), "token must be"),
    (lambda d: d["state"].update(focus="nowhere"), "focus must be"),
    (lambda d: d.update(layout={"geometry": 5}), "layout is not valid"),
    (lambda d: d.update(layout={"other": "x"}), "layout is not valid"),
])
def test_malformed_sessions_are_refused(mutate, message):
    data = good()
    mutate(data)
    with pytest.raises(ValueError, match=message):
        parse_session(json.dumps(data))


@pytest.mark.parametrize("text,message", [
    ("", "not valid JSON"),
    ('{"app": "attn-gui", "vers', "not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "not valid JSON|nested too deeply|not an Attention Explorer"),
    ("x" * 2_000_000, "at most"),
    ("null", "not an Attention Explorer"),
    (b"\xff\xfe\x00garbage", "not valid JSON"),
])
def test_broken_files_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_session(text)


def test_truncated_file_on_disk(tmp_path):
    path = tmp_path / "s.json"
    save_session(path, ViewState())
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ValueError, match="not valid JSON"):
        load_session(path)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(list(good()) + ["x"]), json_values, max_size=5))
def test_fuzzed_sessions_raise_only_value_error(data):
    try:
        parse_session(json.dumps(data))
    except ValueError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(AttentionConfig.field_names() + ("junk",)), json_values, max_size=6))
def test_fuzzed_configs_raise_only_value_error(fields):
    data = good()
    data["state"]["config"] = {**data["state"]["config"], **fields}
    try:
        parse_session(json.dumps(data))
    except ValueError as exc:
        assert str(exc) and len(str(exc)) < 300


def test_layout_that_is_not_base64_is_refused():
    data = good()
    data["layout"] = {"geometry": "AAAA", "splitter": "é"}
    with pytest.raises(ValueError, match="layout is not valid"):
        parse_session(json.dumps(data))


def test_a_fifo_is_refused_at_once_never_waited_on(tmp_path):
    import os

    fifo = tmp_path / "s.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="it is a pipe \\(FIFO\\), not a session"):
        load_session(fifo)  # a blocking read would hang here for ever


@pytest.mark.parametrize("path,message", [
    ("/dev/zero", "it is a device, not a session"),
    ("/", "it is a folder, not a session"),
])
def test_devices_and_folders_are_refused(path, message):
    with pytest.raises(OSError, match=message):
        load_session(path)


def test_a_symlink_loop_is_refused(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OSError, match="symbolic link loop"):
        load_session(tmp_path / "a")


def test_the_size_limit_is_counted_while_reading(tmp_path):
    from attn_gui.present.session import MAX_BYTES

    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_BYTES + 1))
    with pytest.raises(OSError, match="is over .* bytes; a session is at most"):
        load_session(path)


def test_a_number_of_thousands_of_digits_is_refused_in_words():
    data = json.dumps(good()).replace('"seed": 123', '"seed": ' + "7" * 5000)
    with pytest.raises(ValueError, match="a number with thousands of digits; it is not a session"):
        parse_session(data)


@pytest.mark.parametrize("sentence,message", [
    ("word " * 12_000, "the window shows sentences of at most 50,000 characters"),
    ("x" * 20_000, "at most 10,000 characters without a space"),
])
def test_a_sentence_too_long_for_the_window_is_refused(sentence, message):
    data = good()
    data["state"]["config"]["sentence"] = sentence
    with pytest.raises(ValueError, match=message):
        parse_session(json.dumps(data))
