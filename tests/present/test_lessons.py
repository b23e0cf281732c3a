"""Every step of every lesson on the learner's numbers: placeholders, questions, maps, the seeds' numbers."""

import math

import pytest
import torch

from attn_gui.engine import ModelUnavailable, compute
from attn_gui.present.lessons import (Action, LessonError, action_done, answer, fill, judge, lesson_names,
                                      load_lesson, placeholders)

RANDOM_LESSONS = [name for name in lesson_names()]
# the learner's own sentences and sizes, applied over each lesson's start
VARIANTS = [
    {},
    {"sentence": "the quick brown fox jumps over the lazy dog", "d_model": 8, "d_k": 4, "d_v": 4},
    {"sentence": "attention is all you need today", "d_model": 12, "d_k": 6, "d_v": 5, "seed": 7},
]


def test_the_lessons_in_order():
    assert len(lesson_names()) >= 7
    assert lesson_names()[:6] == ["1-without-weights", "2-qkv", "3-why-scaling", "4-multi-head",
                                  "5-causal-mask", "6-today"]
    assert lesson_names()[6] == "7-induction"


def _independent_answer(result, question):
    """The right column from q, k and the config alone: torch's own softmax of the scaled scores."""
    h = question.head - 1
    g = result.k.shape[0]
    q = result.q[h].double()
    k = result.k[h // (result.heads // g)].double()
    if question.field == "scores":
        row = (q @ k.T)[question.row - 1]
    else:
        scores = q @ k.T
        if result.config.scale:
            scores = scores / math.sqrt(q.shape[-1])
        if result.config.causal:
            T = scores.shape[0]
            scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -math.inf)
        row = torch.softmax(scores, dim=-1)[question.row - 1]
    pick = row.argmax() if question.kind == "argmax" else row.argmin()
    return int(pick) + 1


@pytest.mark.parametrize("variant", VARIANTS, ids=["lesson", "fox", "need"])
@pytest.mark.parametrize("name", RANDOM_LESSONS)
def test_walk_every_step(name, variant):
    lesson = load_lesson(name)
    start = lesson.config().replace(**variant) if variant else lesson.config()
    if variant and lesson.config().heads > 1:  # keep d_k x heads sizes valid: only the sentence changes
        start = lesson.config().replace(sentence=variant["sentence"])
    for number, step in enumerate(lesson.steps, 1):
        config = lesson.config_at(number, start)
        assert all(action_done(s.action, config) for s in lesson.steps[:number]
                   if s.action and "model" not in s.action.when)
        result = compute(config)
        assert step.focus in result.fields(), (name, number, step.focus)
        text = fill(step.text, result)
        assert "{" not in text and "}" not in text, text
        for row, col in step.marks:
            assert 1 <= row <= result.seq_len and (col is None or 1 <= col <= result.key_len)
        if step.question:
            right = answer(step.question, result)
            assert right == _independent_answer(result, step.question), (name, number)
            ok, said = judge(step.question, result, right)
            assert ok and said.startswith("Right")
            wrong = 1 if right != 1 else 2
            ok, said = judge(step.question, result, wrong)
            assert not ok and f"column {right}" in said


def test_lesson_one_prints_seed_004_simplified_numbers():
    # seed 004: simplified self-attention, x3 as the query (the numbers tests/engine/test_tutorials.py pins)
    lesson = load_lesson("1-without-weights")
    result = compute(lesson.config())
    assert fill("{scores[3]}", result) == "[1.3127, 1.1213, 1.5807, 1.3343]"
    assert fill("{alpha_row[3]}", result) == "[0.2407, 0.1987, 0.3146, 0.2459]"
    assert fill("{head_outputs[3]}", result) == "[0.5165, 0.7774, 0.6536]"
    assert fill("{x[3]}", result) == "[0.2566, 0.7936, 0.9408]"


def test_lesson_two_prints_seed_004_scaled_numbers():
    result = compute(load_lesson("2-qkv").config())
    assert fill("{q[3]}", result) == "[1.6442, 1.0264]"
    assert fill("{scores[3]}", result) == "[2.2888, 2.1945, 2.2514, 1.7783]"
    assert fill("{alpha_row[3]}", result) == "[0.2773, 0.2594, 0.2700, 0.1933]"
    assert fill("{head_outputs[3]}", result) == "[0.6762, 0.3120]"
    assert fill("{sqrt_d_k:.4f}", result) == f"{math.sqrt(2):.4f}"


def test_lesson_three_turns_one_hot_as_seed_004_says():
    # seed 004: unscaled weights of a 64-dim key are nearly one-hot; scaling brings them back
    lesson = load_lesson("3-why-scaling")
    small = compute(lesson.config())
    large = compute(lesson.config().replace(d_k=64))
    assert large.weights[0, 2].max() > 0.95 > 0.5 > small.weights[0, 2].max()
    scaled = compute(lesson.config().replace(d_k=64, scale=True))
    assert scaled.weights[0, 2].max() < large.weights[0, 2].max()
    assert float(fill("{score_std}", large)) > 4 * float(fill("{score_std}", small))


def test_lesson_four_output_is_concat_times_w_o():
    result = compute(load_lesson("4-multi-head").config())
    assert result.heads == 3 and result.config.d_model == result.heads * result.config.d_k
    concat = torch.cat(list(result.head_outputs), dim=-1)
    assert torch.allclose(result.concat, concat)
    expected = torch.nn.functional.linear(concat, result.w_o, result.b_o[0]) if result.config.layout == "column" \
        else concat @ result.w_o + result.b_o
    assert fill("{output[2]}", result) == "[" + ", ".join(f"{v:.4f}" for v in expected[1].tolist()) + "]"


def test_actions_wait_for_the_state():
    action = Action("raise d_k", {"d_k": {"min": 64}, "scale": False})
    config = load_lesson("3-why-scaling").config()
    assert not action_done(action, config)
    assert action_done(action, config.replace(d_k=64))
    assert not action_done(action, config.replace(d_k=64, scale=True))


def test_the_induction_lesson_waits_for_a_model_trained_as_it_asks(tmp_path):
    """The action is done on a checkpoint the Train dock's settings write (task, layers, heads as asked), not on
    another one, a folder that is no checkpoint or random weights. Those settings are the ones
    tests/engine/test_circuits_induction.py trains for 300 steps and finds the L1H1 -> L2H1 k edge in."""
    from attn_gui.engine.train.loop import Trainer
    from attn_gui.engine.train.model import TrainConfig

    step = load_lesson("7-induction").steps[1]
    assert step.action is not None
    settings = dict(task="induction", symbols=8, length=16, layers=2, d_model=32, lr=0.01, batch=64)
    asked = Trainer(TrainConfig(**settings, heads=1)).save(tmp_path / "asked")  # step 0: the settings are what count
    other = Trainer(TrainConfig(**settings, heads=2)).save(tmp_path / "other")
    config = load_lesson("7-induction").config()
    assert action_done(step.action, config.replace(model=str(asked)))
    assert not action_done(step.action, config.replace(model=str(other)))
    assert not action_done(step.action, config.replace(model=str(tmp_path)))
    assert not action_done(step.action, config)


def test_unknown_names_and_positions_are_user_errors():
    with pytest.raises(LessonError, match="unknown lesson"):
        load_lesson("nope")
    with pytest.raises(LessonError, match="steps 1 to"):
        load_lesson("2-qkv").step(99)
    result = compute(load_lesson("2-qkv").config())
    with pytest.raises(LessonError, match="past the end"):
        fill("{q[9]}", result)
    with pytest.raises(LessonError, match="unknown placeholder"):
        fill("{__import__}", result)
    assert placeholders("a {q[2]} b {scores[2,3]:.2f}") == ["{q[2]}", "{scores[2,3]:.2f}"]


def test_sink_step_on_smollm2_or_a_clear_message():
    lesson = load_lesson("6-today")
    step = lesson.steps[-1]
    try:
        result = compute(lesson.config().replace(model="smollm2-135m", positional="none",
                                                 sentence="the cat sat on the mat"))
    except ModelUnavailable as error:
        assert str(error)
        return
    assert action_done(step.action, result.config)
    text = fill(step.text, result)
    assert "{" not in text
    assert result.weights[:, 4, 0].mean() > 1 / 5  # the sink: token 1 takes more than an even share of row 5
