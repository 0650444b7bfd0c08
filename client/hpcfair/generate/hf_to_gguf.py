"""llama.cpp's own ``convert_hf_to_gguf.py`` run as it is, with two repairs the hub needs, as its own process:
``python -m hpcfair.generate.hf_to_gguf SCRIPT FOLDER --outfile F --outtype T``.

- A folder without ``tokenizer.model`` needs no ``sentencepiece``: the script imports it before it looks for the
  file (so a Llama with only ``tokenizer.json`` failed where sentencepiece is not installed); the file is looked
  for first, as the script means to.
- A byte-level BPE tokenizer that llama.cpp's table of known tokenizers does not list (one trained for the model,
  not copied from a published one) is written with GPT-2's pre-tokenizer when its ``tokenizer.json`` splits text
  exactly as GPT-2's does (``ByteLevel`` with its regular expression, no normalizer, no prefix space); any other
  stays refused, as llama.cpp refuses it. The build then checks that llama.cpp tokenizes as transformers does."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

UNKNOWN_TOKENIZER = 3  # the exit status for a tokenizer llama.cpp cannot split text like (the job's code)


def gpt2_split(folder: Path) -> bool:
    """Whether ``folder``'s tokenizer.json is a byte-level BPE that splits text exactly as GPT-2's does."""
    try:
        spec = json.loads((folder / "tokenizer.json").read_text())
    except (OSError, ValueError):
        return False
    pre = spec.get("pre_tokenizer") or {}
    return (spec.get("normalizer") is None and (spec.get("model") or {}).get("type") == "BPE"
            and pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space"))


def patch(base) -> None:
    """The two repairs, on llama.cpp's ``conversion.base`` module."""
    spm, pre = base.TextModel._create_vocab_sentencepiece, base.TextModel.get_vocab_base_pre

    def create_vocab_sentencepiece(self):
        if not (self.dir_model / "tokenizer.model").is_file():
            raise FileNotFoundError("no tokenizer.model")
        return spm(self)

    def get_vocab_base_pre(self, tokenizer) -> str:
        try:
            return pre(self, tokenizer)
        except NotImplementedError:
            if gpt2_split(self.dir_model):
                return "gpt-2"
            print("hpcfair: unknown tokenizer", file=sys.stderr)
            sys.exit(UNKNOWN_TOKENIZER)

    base.TextModel._create_vocab_sentencepiece = create_vocab_sentencepiece
    base.TextModel.get_vocab_base_pre = get_vocab_base_pre


def main() -> None:
    script = Path(sys.argv[1]).resolve()
    sys.path[:0] = [str(script.parent), str(script.parent / "gguf-py")]  # its own gguf, as the script takes it
    from conversion import base

    patch(base)
    sys.argv = [str(script), *sys.argv[2:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
