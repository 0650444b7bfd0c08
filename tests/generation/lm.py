"""Small causal language models of real architectures (random weights from a config) saved as Hugging Face
folders with a byte-level BPE tokenizer trained here, offline, and a chat template."""

from __future__ import annotations

from pathlib import Path

TEXT = ["the hub converts models to onnx and runs them on hpc nodes",
        "scientists share datasets and models with persistent identifiers",
        "a job scheduler runs the container on a cpu or a gpu node"] * 40
CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


def tokenizer():
    """A fast tokenizer (byte-level BPE, 300 tokens) with <s>, </s> and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_lm(folder: Path, family: str = "llama", seed: int = 0, **sizes) -> Path:
    """A random ``family`` (llama, qwen2, mistral) causal LM with this test's tokenizer, saved in ``folder``."""
    import torch
    import transformers

    config_class, model_class = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
    }[family]
    fast = tokenizer()
    torch.manual_seed(seed)
    config = config_class(**{"vocab_size": len(fast), "hidden_size": 64, "intermediate_size": 128,
                             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": 2, **sizes})
    model = model_class(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    return {f"{prefix}{p.name}": p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
