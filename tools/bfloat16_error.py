"""What dtype "bfloat16" (bfloat16 matmuls) gives against float32, measured: every layer's α and the next-token
logits of the bundled SmolLM2-135M (its Q4_1 GGUF) and of tiny random Llama files in Q4_0, Q8_0 and Q4_K (written by
tests/gguf_writing.py as tests/engine/test_packed.py writes them), over the 20 sentences below.

    .venv/bin/python tools/bfloat16_error.py            # prints the markdown table of docs/benchmarks.md

Per model: α's largest absolute difference (over heads, rows and keys) in the first, the middle and the last layer and
in any layer, the logits' largest difference relative to the largest float32 logit (each over the 20 sentences), and
in how many sentences the top next token is float32's. The figure the CLI help and the window state
(``attn_gui.engine.config.config.BFLOAT16_ERROR``) is the largest of these.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

SENTENCES = (
    "The cat sat on the mat and looked at the dog.",
    "When Mary and John went to the store, John gave a drink to",
    "Paris is the capital of France, and Berlin is the capital of",
    "The quick brown fox jumps over the lazy dog.",
    "1, 2, 3, 4, 5, 6, 7, 8,",
    "def add(a, b):\n    return a +",
    "She opened the door slowly, afraid of what she might find inside.",
    "In 1969, Neil Armstrong became the first person to walk on the",
    "The keys to the cabinet are on the table.",
    "I love reading books about history, especially about ancient Rome.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The weather today is sunny with a chance of rain in the afternoon.",
    "He said that he would come tomorrow, but nobody believed him.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The dog ran across the park and the cat sat on the wall.",
    "Once upon a time, in a small village by the sea, there lived an old fisherman.",
    "The stock market fell sharply after the announcement.",
    "To be or not to be, that is the question.",
    "My favourite colours are blue, green and",
    "The students who the teacher praised were happy.",
)


def errors(path: str) -> dict:
    """Per-layer α errors, the logits' relative error and the top-1 agreement of bfloat16 against float32."""
    from attn_gui.engine.model.registry import source

    model = source(path)
    model.load()
    per_layer = [0.0] * model.forward(torch.tensor([0]), "cpu", torch.float32).weights.shape[0]
    logits, same = 0.0, 0
    for sentence in SENTENCES:
        ids = torch.tensor(model.tokenize(sentence).token_ids)
        exact = model.forward(ids, "cpu", torch.float32)
        bf16 = model.forward(ids, "cpu", torch.bfloat16)
        for layer, (a, b) in enumerate(zip(exact.weights, bf16.weights, strict=True)):
            err = float((a.float() - b.float()).abs().max())
            per_layer[layer] = max(per_layer[layer], err)
        logits = max(logits, float((exact.logits - bf16.logits).abs().max() / exact.logits.abs().max()))
        same += int(exact.logits.argmax() == bf16.logits.argmax())
    return {"layers": per_layer, "logits": logits, "same": same}


def tiny_files(folder: Path) -> dict[str, str]:
    """Tiny random Llama GGUF files (d 256, 2 layers), one per type: test_packed.py's, with a trained model's spread."""
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests"),
                    str(Path(__file__).resolve().parents[1] / "tests" / "engine")]
    from gguf.constants import GGMLQuantizationType as Q
    from test_packed import _model  # type: ignore[import-not-found]

    files = {}
    for name, kind in (("tiny Q4_0", Q.Q4_0), ("tiny Q8_0", Q.Q8_0), ("tiny Q4_K", Q.Q4_K)):
        (folder / name.split()[1]).mkdir()
        path, _ = _model(folder / name.split()[1], {"": kind})
        files[name] = str(path)
    return files


def table(rows: dict[str, dict]) -> str:
    head = ("| model | layers | α, first layer | α, middle layer | α, last layer | α, any layer | logits (of the "
            "largest) | same top-1 next token |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    for name, r in rows.items():
        L = r["layers"]
        lines.append(f"| {name} | {len(L)} | {L[0]:.1e} | {L[len(L) // 2]:.1e} (layer {len(L) // 2}) | "
                     f"{L[-1]:.1e} | {max(L):.1e} (layer {L.index(max(L))}) | {100 * r['logits']:.1f} % | "
                     f"{r['same']} of {len(SENTENCES)} |")
    return "\n".join(lines)


def main() -> None:
    torch.manual_seed(0)
    rows = {"SmolLM2-135M Q4_1 (bundled)": errors("smollm2-135m")}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in tiny_files(Path(tmp)).items():
            rows[name] = errors(path)
    print(table(rows))


if __name__ == "__main__":
    main()
