"""Small causal language models of real architectures (random weights from a config) saved as Hugging Face
folders with a byte-level BPE tokenizer trained here, offline, and a chat template."""

from __future__ import annotations

from pathlib import Path

TEXT = ["the hub converts models to onnx and runs them on hpc nodes",
        "scientists share datasets and models with persistent identifiers",
        "a job scheduler runs the container on a cpu or a gpu node"] * 40
CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


def tokenizer(end: bool = False):
    """A fast tokenizer (byte-level BPE, 300 tokens) with <s>, </s> and a chat template; ``end``: it appends
    </s> to every text, as T5's and BART's do."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if end:
        from tokenizers import processors

        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_lm(folder: Path, family: str = "llama", seed: int = 0, **sizes) -> Path:
    """A random ``family`` (llama, qwen2, mistral, gemma2, gpt2, or a mixture of experts in ``MOE``) causal LM
    with this test's tokenizer, saved in ``folder``."""
    import torch
    import transformers

    if family == "gpt2":  # the general route (onnxruntime-genai does not build it); weights large enough to vary
        return _save(folder, transformers.GPT2LMHeadModel, transformers.GPT2Config(
            vocab_size=len(tokenizer()), n_embd=64, n_layer=2, n_head=4, n_positions=256, bos_token_id=1,
            eos_token_id=2, initializer_range=0.3, **sizes), tokenizer(), seed)
    if family in MOE:  # mixtures of experts: 4 experts, 2 a token (issue 57, point 4)
        sizes = {"intermediate_size": 32, "initializer_range": 0.2, **MOE[family][2], **sizes}  # routing that varies
    config_class, model_class = {
        **{name: (getattr(transformers, c), getattr(transformers, m)) for name, (c, m, _) in MOE.items()},
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM),  # local and global layers
    }[family]
    if family == "gemma2":
        sizes = {"head_dim": 16, "pad_token_id": 0, **sizes}
    fast = tokenizer()
    torch.manual_seed(seed)
    config = config_class(**{"vocab_size": len(fast), "hidden_size": 64, "intermediate_size": 128,
                             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": 2, **sizes})
    model = model_class(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


_EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2}
# Mixture-of-experts families: transformers' config and model class names, and their sizes (4 experts, 2 a token)
MOE: dict[str, tuple[str, str, dict]] = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",  # with a shared expert beside the routed ones
                  {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, **_EXPERTS}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", {"moe_intermediate_size": 32, "head_dim": 16,
                                                           **_EXPERTS}),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", _EXPERTS),
}


def save_seq2seq(folder: Path, family: str = "bart", seed: int = 0) -> Path:
    """A random text encoder-decoder (bart, t5) with this test's tokenizer (ending texts with </s>)."""
    import transformers

    fast = tokenizer(end=True)
    common = {"vocab_size": len(fast), "pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 1}
    if family == "t5":
        config = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                                       num_heads=4, initializer_factor=5.0, **common)
        return _save(folder, transformers.T5ForConditionalGeneration, config, fast, seed)
    config = transformers.BartConfig(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                     max_position_embeddings=256, init_std=0.3, bos_token_id=1,
                                     forced_eos_token_id=None, **common)
    return _save(folder, transformers.BartForConditionalGeneration, config, fast, seed)


def _save(folder: Path, model_class, config, fast, seed: int) -> Path:
    import torch

    torch.manual_seed(seed)
    model_class(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    return {f"{prefix}{p.name}": p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


class Scripted:
    """A generator that gives the tokens it was handed, one a step (the surface ``run.generate`` drives), where
    the model's part is not what a test checks."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens, self.at = tokens, 0

    def is_done(self) -> bool:
        return self.at >= len(self.tokens)

    def generate_next_token(self) -> None:
        self.at += 1

    def get_next_tokens(self) -> list[int]:
        return [self.tokens[self.at - 1]]
