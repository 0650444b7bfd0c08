"""A GGUF model (llama.cpp's format) from a Hugging Face causal LM folder, made by llama.cpp's own tools and
verified: ``convert_hf_to_gguf.py`` writes f32, f16, bf16 or q8_0 (``hpcfair.generate.hf_to_gguf`` runs it), and
``llama-quantize`` makes the 4- to 6-bit types from its f32 file; then ``llama-server`` on the file decodes
``build.PROMPTS`` greedily from transformers' prompt ids, and its tokens must be transformers' (``verify_tokens``;
reduced types may part at a near tie, as the ONNX int8 build may), and its tokenizer must give transformers' ids.
4-bit weights change greedy choices, so a 4-bit file's tokens are reported, not required. Runs in the conversion
sandbox (a ``pytorch_model.bin`` is a pickle); the converter's files are copied into the work folder with the
model (``CONVERTER_FILES``), as the hub stages them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate.build import Runner, Stage, _version, verify_tokens
from hpcfair.generate.families import DECODER, GENAI, architecture_of, read_config, route_of
from hpcfair.generate.hf_to_gguf import UNKNOWN_TOKENIZER

CONVERTER_TYPES = ("f32", "f16", "bf16", "q8_0")  # convert_hf_to_gguf.py's --outtype
QUANTIZED_TYPES = ("q4_0", "q4_k_m", "q5_k_m", "q6_k")  # llama-quantize's, from the f32 file
GGUF_TYPES = CONVERTER_TYPES + QUANTIZED_TYPES
TIES = {"f16": 0.02, "bf16": 0.05, "q8_0": 0.02}  # of a step's logit spread, as build.TIES
CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion", "gguf-py")
CONVERTER = "llama.cpp"  # the converter's folder in the work folder


def type_problem(outtype: str) -> str:
    """Why ``outtype`` is not a GGUF type the hub makes ("" when it is)."""
    if outtype in GGUF_TYPES:
        return ""
    return f"gguf_type must be one of {', '.join(GGUF_TYPES)}, not {outtype!r}."


def stage_converter(folder: Path, dest: Path) -> None:
    """Copy llama.cpp's converter (``CONVERTER_FILES`` of ``folder``) to ``dest``; ``CodedError`` when it is
    not there."""
    if not all((folder / name).exists() for name in CONVERTER_FILES):
        raise CodedError("not_runnable", "This hub has no llama.cpp converter (convert_hf_to_gguf.py): "
                                         "scripts/llama-server.sh installs it beside llama-server, or name its "
                                         "folder in HUB_LLAMA_CONVERT.")
    dest.mkdir(parents=True, exist_ok=True)
    for name in CONVERTER_FILES:
        copy = shutil.copytree if (folder / name).is_dir() else shutil.copyfile
        copy(folder / name, dest / name)


def build_gguf(source: Path, output: Path, converter: Path, *, outtype: str = "q8_0", server: str = "",
               threads: int = 1, stage: Stage = lambda f, w: None) -> dict[str, Any]:
    """Write ``output/model-<outtype>.gguf`` from the folder ``source`` with the converter in ``converter`` and
    verify it; the report says how. A check that fails is ``CodedError("verification_failed")``."""
    config = read_config(source)
    architecture = architecture_of(config)
    if route_of(config) not in (GENAI, DECODER):
        raise CodedError("unsupported_model", f"{architecture or 'This model'} has no GGUF build here: the hub "
                                              "converts causal language models (…ForCausalLM, …LMHeadModel).")
    if problem := type_problem(outtype):
        raise CodedError("invalid", problem)
    output.mkdir(parents=True, exist_ok=True)
    target = output / f"model-{outtype}.gguf"
    started = time.monotonic()
    direct = outtype in CONVERTER_TYPES
    stage(0.1, f"converting {architecture} with llama.cpp's convert_hf_to_gguf.py ("
               + (f"{outtype})" if direct else f"f32), then llama-quantize to {outtype}"))
    write_gguf(source, target, outtype, converter, server=server, threads=threads)
    seconds = time.monotonic() - started
    stage(0.7, "verifying greedy decoding through llama-server against transformers")
    verification = verify(source, target, outtype, server=server, threads=threads)
    report = {"architecture": architecture, "gguf_type": outtype, "file": target.name,
              "size_bytes": target.stat().st_size, "build_seconds": round(seconds, 2),
              "converter": f"llama.cpp convert_hf_to_gguf.py (torch {_version('torch')}, transformers "
                           f"{_version('transformers')})" + ("" if direct else " and llama-quantize"),
              "verification": verification}
    checked(verification, outtype)
    return report


def checked(verification: dict[str, Any], outtype: str) -> bool:
    """True for a check that passed; else ``CodedError("verification_failed")`` naming the first prompt that
    parted."""
    if verification["passed"]:
        return True
    parted = [c["prompt"] for c in verification["prompts"] if not c.get("tokenizer_matches", True)
              or c["matched"] < c["tokens"] and not c.get("near_tie") and outtype in CONVERTER_TYPES]
    raise CodedError("verification_failed", f"The {outtype} GGUF file does not decode as transformers does (greedy, "
                                            "from the same prompt ids; its tokenizer too) on "
                                            f"{len(parted)} of {len(verification['prompts'])} prompts, first "
                                            f"{parted[0]!r}: llama.cpp reads this model otherwise than "
                                            "transformers; nothing was published.")


def write_gguf(source: Path, target: Path, outtype: str, converter: Path, *, server: str = "", threads: int = 1
               ) -> None:
    """``target``, the folder ``source`` as a GGUF file of ``outtype``: the converter's own type, or
    llama-quantize's from an f32 file written beside ``target`` first (and removed)."""
    if outtype in CONVERTER_TYPES:
        _convert(source, target, outtype, converter / "convert_hf_to_gguf.py")
        return
    full = target.with_name(f".{target.stem}-f32.gguf")
    try:
        _convert(source, full, "f32", converter / "convert_hf_to_gguf.py")
        quantize(full, target, outtype, server=server, threads=threads)
    finally:
        full.unlink(missing_ok=True)


def verify(source: Path, path: Path, outtype: str, *, server: str = "", threads: int = 1) -> dict[str, Any]:
    """``verify_tokens`` with llama-server on the GGUF file ``path`` as the built model; a 4-bit file passes on
    its tokenizer alone (its tokens are reported)."""
    from hpcfair.generate.llama import LlamaServer

    running = LlamaServer(path, threads=threads, binary=server, context=512)
    try:
        report = verify_tokens(source, path, threads=threads, tie=TIES.get(outtype, 0.0),
                               runner=Runner(running.greedy_ids, lambda text: running.tokenize(text)))
    finally:
        running.close()
    if outtype not in CONVERTER_TYPES:
        report["passed"] = all(case["tokenizer_matches"] for case in report["prompts"])
        report["method"] += " (reported, not required: 4- to 6-bit weights change greedy choices)"
    report["method"] = report["method"].replace("greedy tokens", "greedy tokens of llama-server", 1)
    return report


def _convert(source: Path, out: Path, outtype: str, script: Path) -> None:
    argv = [sys.executable, "-m", "hpcfair.generate.hf_to_gguf", str(script), str(source), "--outfile", str(out),
            "--outtype", outtype]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode == UNKNOWN_TOKENIZER:
        raise CodedError("unsupported_model", "llama.cpp does not know this tokenizer (its pre-tokenizer is not "
                                              "one llama.cpp implements, nor GPT-2's byte-level split), so it "
                                              "would split text otherwise than transformers: no GGUF file.")
    if done.returncode != 0 or not out.is_file():
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(("INFO", "WARN"))]
        last = said[-1] if said else f"status {done.returncode}"
        if "MemoryError" in last or "Cannot allocate memory" in done.stderr:
            raise CodedError("memory_limit", "llama.cpp's converter ran out of memory: raise the build's memory "
                                             "limit (HUB_CONVERT_MEMORY_MB on the hub).")
        if "not supported" in last:
            raise CodedError("unsupported_model", f"llama.cpp's converter does not take this model: {_clean(last)}")
        raise CodedError("conversion_failed", f"llama.cpp's convert_hf_to_gguf.py failed: {_clean(last)}")


def quantize(source: Path, out: Path, outtype: str, *, server: str = "", threads: int = 1) -> None:
    """llama-quantize (beside llama-server) of the GGUF file ``source`` to ``outtype`` in ``out``."""
    from hpcfair.generate.llama import server_binary

    tool = server_binary(server).with_name("llama-quantize")
    if not tool.is_file():
        raise CodedError("not_runnable", f"{outtype} is made by llama.cpp's llama-quantize, which this hub does not "
                                         "have beside llama-server; ask for f32, f16, bf16 or q8_0.")
    done = subprocess.run([str(tool), str(source), str(out), outtype.upper(), str(max(1, threads))],
                          capture_output=True, text=True)
    if done.returncode != 0 or not out.is_file():
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise CodedError("conversion_failed", f"llama-quantize failed: {_clean(lines[-1] if lines else '')}")


def _clean(line: str) -> str:
    """A tool's last words without host paths, at most 300 characters."""
    from hpcfair.convert.errors import HOST_PATH

    return HOST_PATH.sub("<path>", line.strip())[-300:] or "no message"
