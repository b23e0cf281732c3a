"""Circuit tasks: pairs of a clean and a corrupted prompt of one length, and the metric the circuit carries.

Built-in templates fill single-token names and words from the model's own tokenizer (a word that is two tokens of
this model is left out, so the clean and the corrupted prompt always have as many tokens):

- ioi: "When Mary and John went to the store, John gave a drink to" -> " Mary" against " John" (Wang et al. 2022,
  indirect object identification); the corrupted prompt puts three other names in the three slots (their "ABC"
  distribution), so it says nothing of Mary or John. Metric: logit(IO) - logit(S).
- capital: "The capital of France is" -> " Paris" against the corrupted country's capital (" Rome" for "Italy").
- greater-than: "The war lasted from the year 1732 to the year 17" (Hanna et al. 2023); the corrupted year is
  1701. Metric: p(a year after 1732) - p(a year up to it): over the two-digit tokens "33".."99" and "00".."32"
  where the tokenizer has them (GPT-2), else over the tens digit: "4".."9" against "0".."2" (a tokenizer that
  splits digits, SmolLM2, Llama 3: the tens digit equal to the start's says neither, and is left out).
- induction: a filler token, m random tokens, the same m tokens again. The corrupted prompt shuffles the first
  copy so that no token stays where it was and no token is followed by the one that followed it (a rotation would
  keep every pair but one, and with them what induction predicts), so the same tokens are there but induction
  points at the wrong one. Metric, at each token of the second copy from its second on: the logit of the next
  token (which the first copy says) minus the logit of the token the shuffled copy puts after the current one
  (log p saturates near 0 on a model that has learnt the task, and with it the gradient EAP reads).
- a JSONL file: one pair a line, {"clean": ..., "corrupt": ..., "answer": " Mary", "wrong": " John"}; "wrong" on
  every line gives the logit difference, on none the log p of the answer.

Each pair's metric is the mean over its scored positions; a task's metric is the mean over its pairs.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from ...base.errors import ConfigError
from .pairs_file import read_rows

METRICS = ("logit-diff", "logprob", "prob-diff")
BUILT_IN = ("ioi", "capital", "greater-than", "induction")

NAMES = ("Mary", "John", "Alice", "Bob", "Sarah", "James", "Emma", "David", "Anna", "Michael", "Laura", "Paul",
         "Kate", "Tom", "Lisa", "Mark", "Rachel", "Peter", "Emily", "Daniel", "Jessica", "Chris", "Amy", "Steve",
         "Jane", "Mike", "Susan", "Eric", "Linda", "Frank", "Julia", "Henry", "Grace", "George", "Helen", "Jack",
         "Sophie", "Adam", "Lucy", "Sam", "Kevin", "Karen", "Ryan", "Nancy", "Max", "Claire", "Andrew", "Diana")
PLACES = ("store", "garden", "restaurant", "school", "hospital", "office", "house", "station", "park", "market")
OBJECTS = ("drink", "ring", "kiss", "bone", "computer", "necklace", "snack", "book", "letter", "ball")
IOI_TEMPLATES = (  # Wang et al. 2022's templates, A the indirect object, B the subject said twice
    "When {A} and {B} went to the {place}, {B} gave a {object} to",
    "When {B} and {A} went to the {place}, {B} gave a {object} to",
    "When {A} and {B} got a {object} at the {place}, {B} decided to give it to",
    "When {B} and {A} got a {object} at the {place}, {B} decided to give it to",
    "Then, {A} and {B} went to the {place}. {B} gave a {object} to",
    "Then, {B} and {A} went to the {place}. {B} gave a {object} to",
    "After {A} and {B} went to the {place}, {B} gave a {object} to",
    "After {B} and {A} went to the {place}, {B} gave a {object} to",
)
CAPITALS = (("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Germany", "Berlin"),
            ("Spain", "Madrid"), ("England", "London"), ("Russia", "Moscow"), ("Egypt", "Cairo"),
            ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Ireland", "Dublin"),
            ("Canada", "Ottawa"), ("China", "Beijing"), ("Norway", "Oslo"), ("Sweden", "Stockholm"),
            ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Hungary", "Budapest"), ("Korea", "Seoul"),
            ("Thailand", "Bangkok"), ("Peru", "Lima"), ("Chile", "Santiago"), ("Cuba", "Havana"),
            ("Kenya", "Nairobi"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Turkey", "Ankara"),
            ("Belgium", "Brussels"), ("Denmark", "Copenhagen"), ("Switzerland", "Bern"), ("Australia", "Canberra"))
CAPITAL_TEMPLATES = ("The capital of {country} is", "The capital city of {country} is",
                     "{country} has its government in the city of")
NOUNS = ("war", "expedition", "dynasty", "siege", "voyage", "reign", "drought", "festival", "project", "trial")
YEAR_TEMPLATE = "The {noun} lasted from the year {century}{start} to the year {century}"
INDUCTION_HALF = 7  # m: each copy's tokens (filler + 2 m = 15 tokens: attn-gui train's induction length 16, less one)


@dataclass(frozen=True)
class Pair:
    """One clean prompt and its corrupted twin (token ids, as many), the positions scored and what is measured there.

    answers[p] / wrongs[p]: the token ids whose logits (or p) count for and against at ``positions[p]``.
    """

    clean: tuple[int, ...]
    corrupt: tuple[int, ...]
    positions: tuple[int, ...]
    answers: tuple[tuple[int, ...], ...]
    wrongs: tuple[tuple[int, ...], ...]
    text: str = ""
    corrupt_text: str = ""


@dataclass(frozen=True)
class Batch:
    """Pairs of one length stacked: clean, corrupt (B, n); positions (B, P); answers (B, P, A) and wrongs (B, P, K),
    padded, with their masks; ``index``: the pairs' places in the task."""

    clean: torch.Tensor
    corrupt: torch.Tensor
    positions: torch.Tensor
    answers: torch.Tensor
    answer_mask: torch.Tensor
    wrongs: torch.Tensor
    wrong_mask: torch.Tensor
    index: tuple[int, ...]

    @property
    def size(self) -> int:
        return self.clean.size(0)

    def repeat(self, times: int) -> Batch:
        """The batch ``times`` over, one copy after another (B ``times`` rows): EAP-IG's points in one forward."""
        def rows(t: torch.Tensor) -> torch.Tensor:
            return t.repeat(times, *[1] * (t.dim() - 1))
        return Batch(rows(self.clean), rows(self.corrupt), rows(self.positions), rows(self.answers),
                     rows(self.answer_mask), rows(self.wrongs), rows(self.wrong_mask), self.index * times)

    def part(self, start: int, end: int) -> Batch:
        """Pairs ``start`` to ``end`` of the batch."""
        s = slice(start, end)
        return Batch(self.clean[s], self.corrupt[s], self.positions[s], self.answers[s], self.answer_mask[s],
                     self.wrongs[s], self.wrong_mask[s], self.index[s])


def _padded(rows: list[tuple[tuple[int, ...], ...]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(1, max(len(ids) for row in rows for ids in row))
    values = torch.zeros(len(rows), len(rows[0]), width, dtype=torch.long)
    mask = torch.zeros(len(rows), len(rows[0]), width, dtype=torch.bool)
    for b, row in enumerate(rows):
        for p, ids in enumerate(row):
            values[b, p, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[b, p, :len(ids)] = True
    return values, mask


@dataclass(frozen=True)
class PairTask:
    """A task: its name, its metric (``METRICS``) and its pairs."""

    name: str
    metric: str
    pairs: tuple[Pair, ...]

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ConfigError(f"metric must be one of {', '.join(METRICS)}; got {self.metric!r}")
        if not self.pairs:
            raise ConfigError(f"task {self.name}: no pairs")

    def batches(self, size: int) -> list[Batch]:
        """The pairs in batches of at most ``size``, each of one token length and one count of scored positions."""
        groups: dict[tuple[int, int], list[int]] = {}
        for i, pair in enumerate(self.pairs):
            groups.setdefault((len(pair.clean), len(pair.positions)), []).append(i)
        out = []
        for members in groups.values():
            for start in range(0, len(members), size):
                chosen = [self.pairs[i] for i in members[start:start + size]]
                answers, answer_mask = _padded([p.answers for p in chosen])
                wrongs, wrong_mask = _padded([p.wrongs for p in chosen])
                out.append(Batch(torch.tensor([p.clean for p in chosen]), torch.tensor([p.corrupt for p in chosen]),
                                 torch.tensor([p.positions for p in chosen]), answers, answer_mask, wrongs,
                                 wrong_mask, tuple(members[start:start + size])))
        return out


def metric_values(logits: torch.Tensor, batch: Batch, metric: str) -> torch.Tensor:
    """Each pair's metric (B,) from the logits at its scored positions (B, P, V), averaged over the positions.

    logit-diff: the mean logit of the answers minus the mean logit of the wrong tokens; logprob: log p of the answers
    (log Σ p over a set); prob-diff: Σ p(answers) - Σ p(wrong tokens).
    """
    if metric == "logit-diff":
        def mean_logit(ids, mask):
            return (logits.gather(-1, ids) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        values = mean_logit(batch.answers, batch.answer_mask) - mean_logit(batch.wrongs, batch.wrong_mask)
    else:
        logp = torch.log_softmax(logits, -1)
        picked = logp.gather(-1, batch.answers).masked_fill(~batch.answer_mask, float("-inf"))
        if metric == "logprob":
            values = torch.logsumexp(picked, -1)
        else:
            against = logp.gather(-1, batch.wrongs).masked_fill(~batch.wrong_mask, float("-inf"))
            values = picked.exp().sum(-1) - against.exp().sum(-1)
    return values.mean(-1)


# building the tasks from a model's tokenizer


class Words:
    """A decoder's tokenizer as the tasks use it: a text's ids (with the tokens the model adds around every text),
    and whether a word is one token of its own."""

    def __init__(self, src):
        self.src = src
        self.wrap = tuple(src.tokenize("").token_ids)  # what the tokenizer puts around every text (BOS, EOS)

    def ids(self, text: str) -> tuple[int, ...]:
        return tuple(self.src.tokenize(text).token_ids)

    def single(self, word: str) -> int | None:
        """The id of ``word`` (" Mary", with its space) if it is one token of its own, else None."""
        ids = self.ids(word)
        inner = ids[len(self.wrap):len(ids) - max(0, len(self.wrap) - 1)] if self.wrap else ids
        return inner[0] if len(inner) == 1 else None

    def one(self, word: str) -> int:
        """``single(word)`` of a word known to be one token."""
        found = self.single(word)
        assert found is not None
        return found

    def usable(self, words) -> list[str]:
        """The words that are one token each with a leading space."""
        return [w for w in words if self.single(" " + w) is not None]


def _need(found: list, want: int, what: str, label: str) -> None:
    if len(found) < want:
        raise ConfigError(f"{label}'s tokenizer has {len(found)} {what} of one token each; the task needs {want}")


def ioi(words: Words, n: int, seed: int) -> PairTask:
    """``n`` IOI pairs (module docstring)."""
    rng = random.Random(seed)
    label = words.src.spec.label
    names = words.usable(NAMES)
    _need(names, 5, "of its names", label)
    places, objects = words.usable(PLACES), words.usable(OBJECTS)
    _need(places, 1, "of its places", label)
    _need(objects, 1, "of its objects", label)
    pairs: list[Pair] = []
    for _ in range(n * 20):
        if len(pairs) == n:
            break
        template = rng.choice(IOI_TEMPLATES)
        a, b, c, d, e = rng.sample(names, 5)
        fill = dict(place=rng.choice(places), object=rng.choice(objects))
        clean = template.format(A=a, B=b, **fill)
        head, tail = template.rsplit("{B}", 1)  # the subject's second mention gets a third name
        corrupt = head.format(A=c, B=d, **fill) + e + tail.format(**fill)
        ids, bad = words.ids(clean), words.ids(corrupt)
        if len(ids) == len(bad):
            pairs.append(Pair(ids, bad, (len(ids) - 1,), ((words.one(" " + a),),), ((words.one(" " + b),),),
                              clean, corrupt))
    return PairTask("ioi", "logit-diff", tuple(pairs))


def capital(words: Words, n: int, seed: int) -> PairTask:
    """``n`` capital-country pairs: the corrupted prompt names another country; the metric is the clean capital's
    logit minus the other's."""
    rng = random.Random(seed)
    label = words.src.spec.label
    known = [(c, k) for c, k in CAPITALS if words.single(" " + k) is not None]
    _need(known, 2, "capitals", label)
    pairs: list[Pair] = []
    for _ in range(n * 20):
        if len(pairs) == n:
            break
        (country, city), (other, other_city) = rng.sample(known, 2)
        template = rng.choice(CAPITAL_TEMPLATES)
        clean, corrupt = template.format(country=country), template.format(country=other)
        ids, bad = words.ids(clean), words.ids(corrupt)
        if len(ids) == len(bad):
            pairs.append(Pair(ids, bad, (len(ids) - 1,), ((words.one(" " + city),),),
                              ((words.one(" " + other_city),),), clean, corrupt))
    return PairTask("capital", "logit-diff", tuple(pairs))


def greater_than(words: Words, n: int, seed: int) -> PairTask:
    """``n`` greater-than pairs (module docstring): two-digit year tokens where the tokenizer has them, else the
    tens digit."""
    rng = random.Random(seed)
    probe = words.ids(YEAR_TEMPLATE.format(noun="war", century="17", start="32") + "32")
    two = [words.single(f"{i:02d}") for i in range(100)]
    two_digit = all(t is not None for t in two) and words.ids("17") != words.ids("1") and len(probe) > 0 \
        and probe[-1] == two[32]
    digits = [words.single(str(i)) for i in range(10)]
    if not two_digit and any(d is None for d in digits):
        raise ConfigError(f"{words.src.spec.label}'s tokenizer has neither two-digit nor one-digit number tokens: "
                          "greater-than needs one of them")
    pairs: list[Pair] = []
    for _ in range(n * 20):
        if len(pairs) == n:
            break
        century, noun = str(rng.randint(11, 18)), rng.choice(NOUNS)
        start = rng.randint(2, 98) if two_digit else rng.randint(10, 89)
        clean = YEAR_TEMPLATE.format(noun=noun, century=century, start=f"{start:02d}")
        corrupt = YEAR_TEMPLATE.format(noun=noun, century=century, start="01")
        ids, bad = words.ids(clean), words.ids(corrupt)
        if len(ids) != len(bad):
            continue
        if two_digit:
            after = tuple(two[i] for i in range(start + 1, 100))
            before = tuple(two[i] for i in range(start + 1))
        else:
            tens = start // 10
            after, before = tuple(digits[tens + 1:]), tuple(digits[:tens])
        pairs.append(Pair(ids, bad, (len(ids) - 1,), (after,), (before,), clean, corrupt))  # type: ignore[arg-type]
    return PairTask("greater-than", "prob-diff", tuple(pairs))


def _plain_tokens(src, limit: int = 4000) -> list[int]:
    """Ordinary tokens of the vocabulary (letters or digits after the space marker), not special ones."""
    vocab = src.tokenize("").vocab
    special = set(src.tokenize("").token_ids)
    out = []
    for i, text in enumerate(vocab):
        word = text.lstrip("␣").strip()
        if i not in special and word.isalnum() and not text.startswith("<") and text not in ("[UNK]", "<unk>"):
            out.append(i)
        if len(out) >= limit:
            break
    return out


def _scrambled(x: list[int], rng: random.Random) -> list[int]:
    """``x`` shuffled (``rng``) so that no token stays where it was and no neighbour pair of ``x`` survives."""
    pairs = set(zip(x, x[1:], strict=False))
    while True:
        y = rng.sample(x, len(x))
        if all(a != b for a, b in zip(x, y, strict=True)) and not pairs & set(zip(y, y[1:], strict=False)):
            return y


def induction(words: Words, n: int, seed: int, half: int = INDUCTION_HALF) -> PairTask:
    """``n`` induction pairs (module docstring): filler, x (``half`` tokens), x again; corrupted: the first copy
    shuffled so that no token stays where it was and no token keeps its successor."""
    if half < 4:
        raise ConfigError(f"induction needs copies of at least 4 tokens, not {half}")  # 3: no such shuffle
    rng = random.Random(seed)
    pool = _plain_tokens(words.src)
    if len(pool) < half + 1:
        raise ConfigError(f"induction needs {half + 1} ordinary tokens; {words.src.spec.label} has {len(pool)}")
    prefix = words.wrap[:1] if words.wrap and words.ids("x")[:1] == words.wrap[:1] else ()  # a BOS it adds
    pairs: list[Pair] = []
    for _ in range(n):
        chosen = rng.sample(pool, half + 1)
        filler, x = chosen[0], chosen[1:]
        shuffled = _scrambled(x, rng)
        clean = (*prefix, filler, *x, *x)
        corrupt = (*prefix, filler, *shuffled, *x)
        second = len(prefix) + 1 + half  # where the second copy starts
        positions = tuple(range(second, len(clean) - 1))  # each predicts clean[p + 1], known from the first copy
        follows = (*shuffled, x[0])  # the shuffled copy, then the second copy's first token
        after = {follows[i]: follows[i + 1] for i in range(half)}  # what follows a token in the corrupted prompt
        pairs.append(Pair(clean, corrupt, positions, tuple((clean[p + 1],) for p in positions),
                          tuple((after[clean[p]],) for p in positions),
                          words.src.decode_text(clean), words.src.decode_text(corrupt)))
    return PairTask("induction", "logit-diff", tuple(pairs))


def read_pairs(path: str | os.PathLike, words: Words) -> PairTask:
    """A JSONL file of pairs (module docstring); refused in one line naming the line (and field) that is wrong."""
    file = Path(path)
    pairs, with_wrong = [], set()
    for where, clean, corrupt, answer, wrong in read_rows(file):
        ids, bad = words.ids(clean), words.ids(corrupt)
        if len(ids) != len(bad):
            raise ConfigError(f"{where}: the clean prompt has {len(ids)} tokens, the corrupted "
                              f"one {len(bad)}; a pair needs as many")
        if not ids:
            raise ConfigError(f"{where}: the prompts are no tokens of {words.src.spec.label}")
        a = words.single(answer)
        w = None if wrong is None else words.single(wrong)
        if a is None or (wrong is not None and w is None):
            bad_word = answer if a is None else wrong
            raise ConfigError(f"{where}: {bad_word!r:.40} is not one token of "
                              f"{words.src.spec.label} (give it with its leading space: ' Paris')")
        with_wrong.add(wrong is not None)
        pairs.append(Pair(ids, bad, (len(ids) - 1,), ((a,),), (() if w is None else (w,),), clean, corrupt))
    if not pairs:
        raise ConfigError(f"{file.name} holds no pairs")
    if len(with_wrong) > 1:
        raise ConfigError(f"{file.name}: give 'wrong' on every line (logit difference) or on none (log p)")
    return PairTask(file.stem, "logit-diff" if with_wrong == {True} else "logprob", tuple(pairs))


BUILDERS = {"ioi": ioi, "capital": capital, "greater-than": greater_than, "induction": induction}


def make_task(task: str | os.PathLike | PairTask, src, n: int = 50, seed: int = 0) -> PairTask:
    """A built-in task's ``n`` pairs from ``src``'s tokenizer (seeded), a JSONL file's pairs, or ``task`` itself."""
    if isinstance(task, PairTask):
        return task
    words = Words(src)
    if str(task) in BUILDERS:
        if not 1 <= n <= 10_000:
            raise ConfigError(f"pairs must be 1 to 10000, not {n}")
        built = BUILDERS[str(task)](words, n, seed)
        if len(built.pairs) < n:
            raise ConfigError(f"{task}: only {len(built.pairs)} of {n} pairs have prompts of one length in "
                              f"{src.spec.label}'s tokenizer")
        return built
    if str(task).endswith(".jsonl") or Path(task).is_file():
        return read_pairs(task, words)
    raise ConfigError(f"task must be one of {', '.join(BUILT_IN)} or a .jsonl file of pairs; got {str(task)!r:.60}")
