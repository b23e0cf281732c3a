"""Circuits: which heads talk to which, found by edge attribution (``attn_gui.engine.circuit``).

>>> from attn_gui.engine import circuit
>>> found = circuit("smollm2-135m", "ioi", "eap", pairs=50)          # doctest: +SKIP
>>> found.top(5)                                                       # doctest: +SKIP

The graph (``graph.Graph``): the embedding, every head and every MLP write into the residual stream; every head's
query, key and value input, every MLP's input and the logits read it. ``split`` runs the decoder with each reader's
input its own tensor; ``scores`` scores every edge (EAP, EAP-IG), patches edges exactly and measures faithfulness;
``routes`` follows Ferrando and Voita's information-flow routes in one forward; ``tasks`` builds the prompt pairs.
Every decoder the engine runs itself is read the same way (folders, GGUF files, registered objects, ``attn-gui
train`` checkpoints), through its plan (``engine.plan``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...config.config import AttentionConfig
from ...base.errors import ConfigError
from ...model.plan import Plan, as_plan
from .graph import Graph
from .scores import (GRADIENT_AT, Cancelled, Estimate, Faithfulness, Pairs, Progress, edge_scores, exact_edges,
                     faithfulness, ranked)
from .split import Split
from .tasks import BUILT_IN, METRICS, PairTask, make_task

METHODS = ("eap", "eap-ig", "routes")


@dataclass(frozen=True)
class Circuit:
    """What ``circuit`` found.

    Attributes
    ----------
    graph : Graph
        The writers, readers and edges.
    scores : (W, R) float64 tensor
        Each edge's score (0 where there is no edge): EAP's and EAP-IG's in the metric's units (its first-order
        share of m(clean) - m(corrupted)); the routes' a share of the flow, 0 to 1.
    nodes : (W,) float64 tensor
        Each writer's score: the sum of its edges' (attribution patching of the node, for EAP).
    method, task, metric : str
        The method (``METHODS``), the task's name and its metric (``tasks.METRICS``).
    pairs : int
        How many prompt pairs the scores are averaged over.
    clean, corrupt : float
        The mean metric of the clean and of the corrupted prompts.
    faithfulness : Faithfulness or None
        The recovered fraction over k and the smallest circuit recovering 80 % (None when not measured).
    model : str
        The model's label.
    gradient_at : str
        Where EAP took its gradient: "clean" (Syed et al.; Hanna et al.) or "corrupted" (TransformerLens);
        EAP-IG's is averaged over the line between them, routes take none ("clean" then).
    """

    graph: Graph
    scores: torch.Tensor
    nodes: torch.Tensor
    method: str
    task: str
    metric: str
    pairs: int
    clean: float
    corrupt: float
    faithfulness: Faithfulness | None = None
    model: str = ""
    gradient_at: str = "clean"

    def top(self, k: int = 10) -> list[tuple[str, str, float]]:
        """The ``k`` edges of largest |score|, as (writer, reader, score)."""
        order = ranked(self.scores, self.graph.allowed)[:k]
        return [(self.graph.writer_names[u], self.graph.reader_names[r], float(self.scores[u, r]))
                for u, r in order.tolist()]

    def edge(self, writer: str, reader: str) -> float:
        """The score of the edge ``writer`` -> ``reader`` by name ("L1H2", "L2H1 k")."""
        return float(self.scores[self.graph.find_writer(writer), self.graph.find_reader(reader)])

    def rank(self, writer: str, reader: str) -> int:
        """The place of an edge among all by |score|, 1 the largest."""
        order = ranked(self.scores, self.graph.allowed).tolist()
        return order.index([self.graph.find_writer(writer), self.graph.find_reader(reader)]) + 1


def prepare(model: str | AttentionConfig | Plan, task: str | os.PathLike | PairTask = "ioi", *, pairs: int = 50,
            seed: int = 0, metric: str | None = None, device: str = "cpu", dtype: str = "float32",
            batch: int | None = None) -> Pairs:
    """The model's split forward and the task's pairs, checked: what every method runs on.

    ``model``: a model name or path (``model_spec``'s), or a config naming one, or its plan (its what-ifs, its
    device and dtype). ``metric``: the task's own by default (``tasks.METRICS``).
    """
    p = as_plan(model if isinstance(model, (AttentionConfig, Plan)) else
                AttentionConfig(model=str(model), device=device, dtype=dtype))
    config = p.config
    if config.ablate:
        raise ConfigError("circuits read the whole model: clear the struck heads (ablate) first")
    on, torch_dtype = p.exact_device()  # bfloat16 refused in one line: attribution's gradients are float32's
    src = p.runner("intervene")
    w, shape = src.decoder(on, torch_dtype)
    built = make_task(task, src, pairs, seed)
    if metric is not None:
        if metric not in METRICS:
            raise ConfigError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")
        if metric in ("logit-diff", "prob-diff") and not all(any(p.wrongs) for p in built.pairs):
            raise ConfigError(f"{metric} needs a wrong answer in every pair; {built.name} gives none")
        built = PairTask(built.name, metric, built.pairs)
    limit = src.spec.max_tokens
    longest = max(len(p.clean) for p in built.pairs)
    if longest > min(limit, 512):
        raise ConfigError(f"a prompt of {longest} tokens: circuits read at most {min(limit, 512)}")
    split = Split(w, shape, built.metric)
    ids = torch.tensor(built.pairs[0].clean, device=w["model.embed_tokens.weight"].device)
    split.check(ids, src.forward(ids, config.device, torch_dtype).logits, src.spec.label)
    return Pairs(split, built, batch, src.spec.label)


def circuit(model: str | AttentionConfig | Plan, task: str | os.PathLike | PairTask = "ioi", method: str = "eap", *,
            pairs: int = 50, steps: int = 10, seed: int = 0, metric: str | None = None, faithful: bool = True,
            ks: tuple[int, ...] | None = None, device: str = "cpu", dtype: str = "float32",
            progress: Progress | None = None, cancelled: Callable[[], bool] | None = None,
            prepared: Pairs | None = None, estimate: Estimate | None = None, gradient_at: str = "clean") -> Circuit:
    """Find the circuit of ``model`` on ``task``: every edge's score, each node's, and the faithfulness curve.

    Parameters
    ----------
    model : str, AttentionConfig or Plan
        A decoder the engine runs (a name, a folder, a .gguf, a registered object, an ``attn-gui train``
        checkpoint), or a config naming one, or its plan (the plan's layers, device and dtype).
    task : "ioi", "capital", "greater-than", "induction", a .jsonl file of pairs, or a ``tasks.PairTask``
    method : "eap", "eap-ig" (``steps`` points) or "routes" (information-flow routes, no corrupted prompt)
    pairs, seed : how many pairs a built-in task makes, and from which seed
    metric : "logit-diff", "logprob" or "prob-diff"; None: the task's own
    faithful : measure the faithfulness curve over ``ks`` (default: 0, 1, 2, 3, 5, 10, 20, 50, ..., every edge)
    progress : called as progress(done, total, what); the curve counts its points
    cancelled : returns True to stop: ``scores.Cancelled`` raised while the edges are scored; once they are, the
        circuit with the curve's points measured by then (``Faithfulness.complete`` False)
    estimate : called once as estimate(seconds, points) with what the rest of the curve should take, after its
        first point
    prepared : ``prepare``'s result, to run several methods on one model and task
    gradient_at : where EAP takes its gradient, "clean" (Syed et al. 2023, Hanna et al. 2024) or "corrupted"
        (TransformerLens' attribution patching); EAP only

    Raises
    ------
    ConfigError
        In one line: not a decoder run here, a norm after attention (Gemma 2 and 3, OLMo 2), a bad task or metric.
    """
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "eap-ig" and not 1 <= steps <= 100:
        raise ConfigError(f"steps must be 1 to 100, not {steps}")
    if gradient_at not in GRADIENT_AT:
        raise ConfigError(f"the gradient is taken at one of {', '.join(GRADIENT_AT)}; got {gradient_at!r}")
    if gradient_at != "clean" and method != "eap":
        raise ConfigError(f"the gradient point is EAP's; {method} takes "
                          f"{'none' if method == 'routes' else 'the mean over the line from corrupted to clean'}")
    found = prepared or prepare(model, task, pairs=pairs, seed=seed, metric=metric, device=device, dtype=dtype)
    graph = found.split.graph
    if method == "routes":
        from .routes import route_scores

        scores = route_scores(found, progress, cancelled)
    else:
        scores = edge_scores(found, steps if method == "eap-ig" else 0, progress, cancelled,
                             gradient_at if method == "eap" else "clean")
    curve = faithfulness(found, scores, ks, progress=progress, cancelled=cancelled,  # cancelled: the points so far
                         estimate=estimate) if faithful else None
    clean, corrupt = (curve.clean, curve.corrupt) if curve is not None else found.metrics()
    return Circuit(graph, scores, scores.sum(1), method, found.task.name, found.task.metric, found.count, clean,
                   corrupt, curve, found.label, gradient_at if method == "eap" else "clean")


__all__ = ["BUILT_IN", "GRADIENT_AT", "METHODS", "METRICS", "Cancelled", "Circuit", "Estimate", "Faithfulness",
           "Graph", "PairTask", "Pairs", "circuit", "exact_edges", "make_task", "prepare"]
