"""TransformerLens 4 bridges around the tiny random decoders of ``tiny_decoders`` (made by transformers, nothing
downloaded): each from its own model and its own tokenizer, as a bridge's boot edits the tokenizer it is given."""

from pathlib import Path

import torch
import transformers

from tiny_decoders import tiny_decoder  # tests/

KINDS = ("llama", "gpt2")  # two families: RMSNorm, RoPE, grouped-query; LayerNorm, learned positions, biases


def tiny_folder(kind: str, folder: Path, layers: int = 2) -> str:
    """A tiny random decoder of ``kind`` (``layers`` layers) saved in ``folder`` with a transformers tokenizer (BOS
    added) around its word-level tokenizer.json; returns the folder as a string. GPT-2's matrices are scaled by 10: at
    transformers' initial 0.02 its attention is near uniform and a head's ablation moves a logit by 1e-4."""
    hf = tiny_decoder(kind, folder, layers)
    if kind == "gpt2":
        with torch.no_grad():
            for p in hf.parameters():
                if p.dim() == 2:
                    p.mul_(10.0)
        hf.save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), unk_token="<unk>",
                                               bos_token="<s>", eos_token="</s>")
    tok.save_pretrained(folder)
    return str(folder)


def boot(folder: str, compat: bool = False, **processing):
    """A fresh bridge around the model saved in ``folder`` (its own model and tokenizer); ``compat``: in
    compatibility mode (HookedTransformer's folded LayerNorm and centred weights), ``processing`` its options."""
    from transformer_lens.model_bridge import TransformerBridge

    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    bridge = TransformerBridge.boot_transformers(folder, hf_model=hf, tokenizer=tokenizer)
    if compat:
        bridge.enable_compatibility_mode(disable_warnings=True, **processing)
    return bridge
