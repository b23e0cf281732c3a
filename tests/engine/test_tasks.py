"""The task generators against sequences written out by hand."""

import pytest
import torch

from attn_gui.engine import UserError
from attn_gui.engine.train.tasks import TASKS, Task

X = torch.tensor([[3, 1, 2]])


def test_copy_reverse_sort_put_the_answer_after_the_separator():
    sep = 4
    cases = {"copy": [3, 1, 2], "reverse": [2, 1, 3], "sort": [1, 2, 3]}
    for name, answer in cases.items():
        b = Task(name, symbols=4, length=7).make(X)
        seq = [3, 1, 2, sep] + answer
        assert b.inputs.tolist() == [seq[:-1]]
        assert b.targets.tolist() == [seq[1:]]
        # scored: the predictions from the separator on (the answer's tokens)
        assert b.scored.tolist() == [[False, False, False, True, True, True]]


def test_previous_token_targets_the_token_one_back():
    b = Task("previous", symbols=4, length=4).make(torch.tensor([[3, 1, 2, 0]]))
    assert b.inputs.tolist() == [[3, 1, 2, 0]]
    assert b.targets.tolist()[0][1:] == [3, 1, 2]
    assert b.scored.tolist() == [[False, True, True, True]]


def test_induction_repeats_the_last_period_and_scores_the_second_copy():
    x = torch.tensor([[5, 6, 7, 1, 2, 0, 0, 0]])  # 8 positions, period 3: the last 3 repeat 7 1 2
    b = Task("induction", symbols=8, length=8).make(x, torch.tensor([3]))
    seq = [5, 6, 7, 1, 2, 7, 1, 2]
    assert b.inputs.tolist() == [seq[:-1]] and b.targets.tolist() == [seq[1:]]
    # inputs 5 and 6 (the second copy's 7 and 1) predict 1 and 2 from the first copy
    assert b.scored.tolist() == [[False] * 5 + [True] * 2]


@pytest.mark.parametrize("name", TASKS)
def test_batches_are_seeded_and_follow_the_rule(name):
    task = Task(name, symbols=6, length=12)
    a = task.batch(16, torch.Generator().manual_seed(7))
    b = task.batch(16, torch.Generator().manual_seed(7))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert a.inputs.max() < task.vocab_size and a.scored.any(1).all()
    if name == "sort":  # the scored targets are each row's symbols in order
        t = a.targets[:, -task.source_length:]
        assert torch.equal(t, t.sort(1).values)
    if name == "induction":  # a scored target equals the token one period back
        seq = torch.cat([a.inputs, a.targets[:, -1:]], 1)
        for row, m in zip(range(16), a.period.tolist(), strict=False):
            pos = a.scored[row].nonzero().flatten() + 1
            assert torch.equal(seq[row, pos], seq[row, pos - m])


def test_bad_task_is_a_user_error():
    with pytest.raises(UserError):
        Task("unknown")
    with pytest.raises(UserError):
        Task("copy", symbols=1)


def test_a_sentence_of_the_tasks_words_tokenizes_back_to_its_ids():
    from tokenizers import Tokenizer

    from attn_gui.engine.train.checkpoint import tokenizer_json

    task = Task("copy", 5, 9)
    ids = task.probe().inputs[0]
    assert Tokenizer.from_str(tokenizer_json(task)).encode(task.sentence(ids)).ids == ids.tolist()
    assert task.sentence(torch.tensor([0, 5, 4])) == "0 SEP 4"
