"""The config is declared once: every option's declaration drives validation, flags and round trips."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import MODELS, model_spec, OPTIONS, AttentionConfig, ConfigError, Dims, Option, UserError
from attn_gui.engine.kernel.reduce import reduce_matrix


def a_valid_other_value(opt: Option):
    """A valid value of ``opt`` other than its default, read from its declaration."""
    if opt.kind == "text":
        return "a different sentence"
    if opt.kind == "bool":
        return not opt.default
    if opt.name == "layer":  # bounded by the model's layers, not the declaration's generous cap
        return max(s.layers for s in MODELS.values()) - 1
    if opt.kind == "int":
        return opt.hi if opt.default != opt.hi else opt.lo
    if opt.kind == "float":
        return float(opt.hi)
    if opt.kind in ("choice", "model"):
        return next(v for v in reversed(opt.values) if v != opt.default)
    if opt.kind == "device":
        return "cuda:1"  # valid as a value; whether this machine has it is compute's question
    if opt.kind == "heads":
        return ((4, 2), (11, 0))
    raise AssertionError(opt.kind)


def with_value(name, value):
    # the most layers
    extra = {"model": max(MODELS, key=lambda m: model_spec(m).layers)} if name in ("layer", "ablate") else {}
    if name == "projections" and value is False:
        extra["heads"] = 1
    if name == "kv_heads" and value == OPTIONS["heads"].hi:  # kv_heads divides heads
        extra["heads"] = value
    return AttentionConfig(**{name: value, **extra})


@pytest.mark.parametrize("name", list(OPTIONS))
def test_every_option_round_trips_through_a_dict_and_json(name):
    opt = OPTIONS[name]
    assert opt.name == name and opt.default == getattr(AttentionConfig(), name)
    assert opt.label and opt.help.endswith(".") and opt.modes and opt.modes <= {"random", "model"}
    cfg = with_value(name, a_valid_other_value(opt))
    assert getattr(cfg, name) != opt.default
    assert AttentionConfig.from_dict(cfg.to_dict()) == cfg
    assert AttentionConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def out_of_range(opt: Option):
    if opt.kind == "int":
        return [opt.lo - 1, opt.hi + 1, 2.5, "3", True]
    if opt.kind == "float":
        return [opt.lo / 2, opt.hi * 2, float("nan"), "1", True]
    if opt.kind == "bool":
        return ["yes", 1, None]
    if opt.kind in ("choice", "model", "device"):
        return ["nope", 3, ["cpu"]]
    if opt.kind == "text":  # None is a nullable text's "none" (source_sentence: self-attention)
        return [*([] if opt.nullable else [None]), 12, "x" * (opt.hi + 1)]
    if opt.kind == "heads":
        return ["5.3", [(0, 0)], ((0,),), ((0, -1),), ((0, 0), (0, 0))]
    raise AssertionError(opt.kind)


@pytest.mark.parametrize("name", list(OPTIONS))
def test_the_declaration_drives_validation(name):
    opt = OPTIONS[name]
    for bad in out_of_range(opt):
        with pytest.raises(ConfigError) as info:
            with_value(name, bad)
        message = str(info.value)
        assert name in message and len(message) < 200, message
        assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)


def test_int_messages_state_the_declared_range():
    with pytest.raises(ConfigError, match=r"^d_model must be between 1 and 8192; got 0$"):
        plan(AttentionConfig(d_model=0))
    with pytest.raises(ConfigError, match=r"heads must be between 1 and 128; got 129"):
        AttentionConfig(heads=129)
    with pytest.raises(ConfigError, match=r"seed must be between 0 and 9223372036854775807"):
        plan(AttentionConfig(seed=2**63))
    with pytest.raises(ConfigError, match=r"got 1000000000000000000000000000000000000\.\.\."):
        AttentionConfig(seed=10**100)  # a hostile value is cut, not printed in full
    plan(AttentionConfig(seed=2**63 - 1, weight_seed=0))


def test_temperature_has_at_most_four_decimals():
    assert AttentionConfig(temperature=0.123).temperature == 0.123
    assert AttentionConfig(temperature=0.01).temperature == 0.01
    assert AttentionConfig(temperature=100).temperature == 100
    with pytest.raises(ConfigError, match="temperature has at most 4 decimals"):
        AttentionConfig(temperature=0.12345)
    with pytest.raises(ConfigError, match="temperature must be between 0.01 and 100"):
        AttentionConfig(temperature=0.001)


@pytest.mark.parametrize("device", ["cpu\n", "cuda:٣", "cuda:", "CUDA", " cpu", "cuda:1\n", "cuda:-1", "cpu:0"])
def test_device_strings_are_matched_strictly(device):
    with pytest.raises(ConfigError, match="device must be cpu, cuda, cuda:N or mps"):
        AttentionConfig(device=device)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "cuda:12", "mps"])
def test_valid_device_strings(device):
    assert AttentionConfig(device=device).device == device


def test_model_mode_never_rewrites_the_users_fields():
    cfg = AttentionConfig(model="minilm-l6", d_model=7, heads=3, projections=False)
    assert (cfg.d_model, cfg.heads, cfg.projections) == (7, 3, False)
    assert cfg.dims == Dims(d_model=384, heads=12, d_k=32, d_v=32, projections=True)
    back = cfg.replace(model=None, heads=1)
    assert back.dims == Dims(7, 1, 7, 7, False)  # without projections d_k = d_v = d_model
    assert AttentionConfig(d_model=6, d_k=2, d_v=4, heads=2).dims == Dims(6, 2, 2, 4, True)


def test_random_mode_still_refuses_heads_without_projections():
    with pytest.raises(ConfigError, match="use 1 head"):
        AttentionConfig(projections=False, heads=3)


def test_flags_and_choices_come_from_the_declaration():
    assert OPTIONS["d_model"].flag == "--d-model"
    assert OPTIONS["weight_seed"].flag == "--weight-seed"
    assert OPTIONS["projections"].flag == "--no-projections"
    assert OPTIONS["scale"].flag == "--no-scale"
    assert OPTIONS["causal"].flag == "--causal"
    assert OPTIONS["positional"].flag == "--positional" and OPTIONS["positional"].bare == "sinusoidal"
    assert OPTIONS["layout"].choices == (("row", "q = x·W   (W is d × d_k)"), ("column", "q = W·x   (W is d_k × d)"))
    assert OPTIONS["weight_seed"].nullable and OPTIONS["model"].nullable and not OPTIONS["seed"].nullable
    assert OPTIONS["layer"].modes == {"model"}
    random_only = {"d_model", "d_k", "d_v", "heads", "seed", "weight_seed", "inputs", "projections",
                   "positional", "init", "tokenizer", "rope_base", "bias", "kv_heads", "source_sentence",
                       "position_offset"}
    assert {n for n, o in OPTIONS.items() if o.modes == {"random"}} == random_only
    assert tuple(OPTIONS) == AttentionConfig.field_names()
    with pytest.raises(dataclass_error()):
        OPTIONS["heads"].hi = 3  # frozen


def dataclass_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_sessions_written_before_still_load():
    # to_dict of the default and of a model-mode config as the app wrote them before this change
    old_default = {"sentence": "When in doubt look intelligent", "tokenizer": "word", "d_model": 5, "d_k": 3,
                   "d_v": 3, "heads": 1, "seed": 123, "weight_seed": None, "inputs": "embedding",
                   "projections": True, "positional": False, "init": "uniform", "layout": "row", "scale": True,
                   "temperature": 1, "causal": False, "similarity": "dot", "device": "cpu",
                   "dtype": "float32", "model": None, "layer": 0}
    # as it was saved: init "uniform" stays uniform (the default is "auto" now, the same draw at d_model 5)
    assert AttentionConfig.from_dict(old_default) == AttentionConfig(inputs="embedding", init="uniform")
    old_model = {**old_default, "d_model": 384, "d_k": 32, "d_v": 32, "heads": 12, "model": "minilm-l6",
                 "layer": 3, "temperature": 0.5}
    cfg = AttentionConfig.from_dict(old_model)
    assert cfg.model == "minilm-l6" and cfg.layer == 3 and cfg.heads == 12


def test_config_construction_does_no_io():
    # a model that is not installed, or a sentence of 600 model tokens, is not the config's business
    code = ("import sys; from attn_gui.engine import AttentionConfig; "
            "AttentionConfig(model='minilm-l6', sentence='word ' * 600, layer=5); "
            "bad = [m for m in ('tokenizers', 'safetensors', 'attn_gui.engine.model.encoder.minilm') "
            "if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def blocks(n, out):
    # adaptive pooling's documented split: block i is [floor(i n / out), ceil((i + 1) n / out))
    return [(math.floor(i * n / out), math.ceil((i + 1) * n / out)) for i in range(out)]


def signed_reference(m: np.ndarray, out_r: int, out_c: int) -> np.ndarray:
    """Each block's value of largest magnitude, sign kept; -inf only where every cell is -inf."""
    res = np.empty((out_r, out_c))
    for i, (r0, r1) in enumerate(blocks(m.shape[0], out_r)):
        for j, (c0, c1) in enumerate(blocks(m.shape[1], out_c)):
            block = m[r0:r1, c0:c1].ravel()
            live = block[~np.isneginf(block)]
            if live.size == 0:
                res[i, j] = -np.inf
            else:
                hi, lo = live.max(), live.min()
                res[i, j] = hi if hi >= -lo else lo
    return res


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("R,C,out_r,out_c", [(10, 10, 3, 3), (37, 23, 5, 7), (64, 64, 8, 8), (9, 100, 9, 11)])
def test_signed_reduction_matches_a_direct_block_computation(seed, R, C, out_r, out_c):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((R, C)) * rng.choice([0.1, 10.0], size=(R, C))
    if seed % 2:  # causal-style masking: the upper triangle is -inf
        m[np.triu(np.ones((R, C), dtype=bool), 1)] = -np.inf
    got = reduce_matrix(torch.from_numpy(m), out_r, out_c, "signed").numpy()
    np.testing.assert_array_equal(got, signed_reference(m, out_r, out_c))
    if seed % 2:
        assert np.isneginf(got).any()  # some blocks lie wholly above the diagonal


def test_signed_reduction_of_a_small_matrix_is_the_matrix():
    m = torch.randn(2, 4, 4)
    assert reduce_matrix(m, 4, 4, "signed") is m
