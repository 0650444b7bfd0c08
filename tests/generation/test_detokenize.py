"""Issue 57, point 2: streamed text equals the tokenizer's own decode of the same ids (transformers'
``decode``), with characters split over tokens, invalid and unfinished UTF-8, byte-fallback tokens and spaces
at token boundaries: a property test over random byte-level and sentencepiece-style vocabularies, real
``tokenizers`` tokenizers compared with transformers' ``PreTrainedTokenizerFast.decode``."""

from __future__ import annotations

import random

import pytest
from hpcfair.generate.detokenize import IncrementalText, byte_tokens, stream_text

TEXTS = ["naïve café — 東京 🙂 résumé", "Ωmega ünïcödé  spaces   here", "MQ ion aets=lu the ✓ → ∑", "a b  c\t\nd"]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table (what a byte-level BPE vocabulary is written in)."""
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = visible[:], 0
    for byte in range(256):
        if byte not in visible:
            visible.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(visible, map(chr, chars), strict=True))


def _pieces(rng: random.Random, count: int) -> list[bytes]:
    """Random byte strings: slices of UTF-8 text (cut anywhere, mid-character too) and stray bytes."""
    found: set[bytes] = set()
    while len(found) < count:
        data = rng.choice(TEXTS).encode()
        start = rng.randrange(len(data))
        found.add(data[start:start + rng.randint(1, 5)] if rng.random() < 0.85 else bytes([rng.randrange(128, 256)]))
    return sorted(found)


def byte_level(seed: int):
    """A byte-level BPE tokenizer (GPT-2/Qwen style) with a random vocabulary: every byte, and random pieces."""
    from tokenizers import Tokenizer, decoders, models

    table = _bytes_to_unicode()
    words = [bytes([b]) for b in range(256)] + _pieces(random.Random(seed), 300)
    vocab = {}
    for piece in words:
        vocab.setdefault("".join(table[b] for b in piece), len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def sentencepiece_style(seed: int):
    """A Llama-style tokenizer: ``▁`` for spaces, ``<0xNN>`` byte-fallback tokens, pieces of random text."""
    from tokenizers import Tokenizer, decoders, models

    rng = random.Random(seed)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for _ in range(300):
        text = rng.choice(TEXTS)
        start = rng.randrange(len(text))
        vocab.setdefault(text[start:start + rng.randint(1, 4)].replace(" ", "▁"), len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           decoders.Strip(" ", 1, 0)])
    return tokenizer


@pytest.mark.parametrize("build", [byte_level, sentencepiece_style])
@pytest.mark.parametrize("seed", range(4))
def test_streamed_pieces_join_to_transformers_decode(build, seed):
    from transformers import PreTrainedTokenizerFast

    tokenizer = build(seed)
    reference = PreTrainedTokenizerFast(tokenizer_object=tokenizer)

    def decode(ids) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=True)

    rng = random.Random(100 + seed)
    size = tokenizer.get_vocab_size()
    for trial in range(60):
        if trial % 2:  # text encoded by the tokenizer itself: characters split over byte tokens
            ids = tokenizer.encode(rng.choice(TEXTS)[rng.randrange(5):]).ids
        else:  # random ids: unfinished and invalid sequences anywhere
            ids = [rng.randrange(3 if build is sentencepiece_style else 0, size) for _ in range(rng.randint(1, 40))]
        whole = reference.decode(ids, skip_special_tokens=True)
        pieces = stream_text(decode, ids, byte_tokens(tokenizer.get_vocab()))
        assert "".join(pieces) == whole, (ids, pieces, whole)
        sent = ""
        for piece in pieces[:-1]:  # what was sent is never taken back: always a prefix of the whole text
            sent += piece
            assert whole.startswith(sent)


def test_an_unfinished_character_is_held_and_a_finished_one_sent():
    """The failure of issue 57: after an incomplete UTF-8 sequence the next characters were dropped."""
    tokenizer = byte_level(0)
    table = _bytes_to_unicode()
    vocab = tokenizer.get_vocab()
    euro = "€".encode()
    ids = [vocab[table[euro[0]]], vocab[table[euro[1]]], vocab[table[euro[2]]], vocab["M"], vocab[table[0xE2]],
           vocab["Q"]]
    stream = IncrementalText(lambda i: tokenizer.decode(list(i)))
    assert [stream.push(token) for token in ids] == ["", "", "€", "M", "", "\ufffdQ"]
    assert stream.rest() == ""
    stream = IncrementalText(lambda i: tokenizer.decode(list(i)))
    assert [stream.push(token) for token in ids[:2]] == ["", ""] and stream.rest() == "\ufffd"


@pytest.mark.parametrize("build", ["lm", "sentencepiece_style"])
def test_generate_streams_the_tokenizers_own_decode_on_every_route(tmp_path, monkeypatch, build):
    """``run.generate`` on random ids (any route: the text comes from the folder's tokenizer.json, not from
    onnxruntime-genai's stream): the pieces join to transformers' decode of the same ids, stop strings or not."""
    from hpcfair.generate import run
    from hpcfair.generate.onnx_loop import KvTokenizer
    from hpcfair.generate.run import GenerateRequest
    from transformers import PreTrainedTokenizerFast

    from tests.generation.lm import Scripted, tokenizer

    fast = tokenizer() if build == "lm" else PreTrainedTokenizerFast(tokenizer_object=sentencepiece_style(1))
    fast.save_pretrained(tmp_path)
    rng = random.Random(5)
    for _ in range(12):
        tokens = [rng.randrange(3, len(fast)) for _ in range(rng.randint(1, 30))]
        monkeypatch.setattr(run, "start", lambda loaded, prompt, tokens=tokens, **options: Scripted(tokens))
        loaded = run.LoadedModel(model=None, tokenizer=KvTokenizer(tmp_path), context_length=64, folder=tmp_path)
        for stop in ((), ("zzq",)):
            request = GenerateRequest.parse({"prompt": "a", "stop": list(stop)}, max_tokens=64)
            pieces = list(run.generate(loaded, request))
            assert "".join(p.text for p in pieces) == fast.decode(tokens, skip_special_tokens=True)
