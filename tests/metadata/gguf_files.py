"""Real GGUF files written by the ``gguf`` package's own ``GGUFWriter``: a tiny random Llama (its tensors named as
llama.cpp names them, a tokenizer and a chat template), and hostile variants made by editing its header."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
TOKENS = ["<unk>", "<s>", "</s>", *[f"t{i}" for i in range(61)]]
# with sentencepiece's byte tokens, as llama.cpp needs to tokenize any text (tests/generation serve it)
BYTE_TOKENS = [*TOKENS, "\u2581", *[f"<0x{b:02X}>" for b in range(256)]]


def tiny_llama(path: Path, *, template: str = TEMPLATE, quantized: bool = False, tokens: list[str] = TOKENS) -> dict:
    """A 2-layer Llama of width 16 with random weights (F32, or its matrices in Q8_0); returns what it holds."""
    import gguf

    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(256)
    writer.add_embedding_length(32)
    writer.add_block_count(2)
    writer.add_feed_forward_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([2, 3, 3, *[1] * (len(tokens) - 3 - 256 * (len(tokens) > len(TOKENS))),
                            *[6] * (256 * (len(tokens) > len(TOKENS)))])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(template)
    shapes = {"token_embd.weight": (len(tokens), 32), "output_norm.weight": (32,), "output.weight": (len(tokens), 32)}
    for layer in range(2):
        shapes.update({f"blk.{layer}.attn_norm.weight": (32,), f"blk.{layer}.attn_q.weight": (32, 32),
                       f"blk.{layer}.attn_k.weight": (16, 32), f"blk.{layer}.attn_v.weight": (16, 32),
                       f"blk.{layer}.attn_output.weight": (32, 32), f"blk.{layer}.ffn_norm.weight": (32,),
                       f"blk.{layer}.ffn_gate.weight": (64, 32), f"blk.{layer}.ffn_up.weight": (64, 32),
                       f"blk.{layer}.ffn_down.weight": (32, 64)})
    for name, shape in shapes.items():
        array = rng.normal(size=shape).astype(np.float32)
        if quantized and len(shape) == 2:
            writer.add_tensor(name, gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"parameters": sum(int(np.prod(s)) for s in shapes.values()), "tensors": len(shapes)}


def tensor_count_offset() -> int:
    return 8  # magic, version: then the tensor count (uint64) and the key count


def patched(source: Path, target: Path, offset: int, value: bytes) -> Path:
    data = bytearray(source.read_bytes())
    data[offset:offset + len(value)] = value
    target.write_bytes(bytes(data))
    return target


def first_tensor_offset_field(path: Path) -> int:
    """Where the first tensor's data offset (uint64) sits in ``path``'s header, found by walking it."""
    from hpcfair.gguf_facts import Bounds, _Walker

    data = path.read_bytes()
    walker = _Walker(data, Bounds(), len(data))
    walker.at = 24
    keys = struct.unpack_from("<Q", data, 16)[0]
    for _ in range(keys):
        walker.string("key")
        walker.value(walker.scalar(4, "type"), "value")
    walker.string("name")
    dims = walker.scalar(4, "dims")
    return walker.at + 8 * dims + 4
