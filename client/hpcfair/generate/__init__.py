"""Text generation for language models: their ONNX form with a KV cache, built and run by onnxruntime-genai
for its families, by ``torch_export`` and ``onnx_loop`` (plain ONNX Runtime) for other causal LMs and text
encoder-decoders (``build``, ``run``). Nothing here imports Django; the hub's workers, its generation
engine, the Slurm node's runner and ``bench/generate.py`` share it."""

from hpcfair.generate.families import GENAI_ARCHITECTURES, architecture_of, supports
from hpcfair.generate.run import GenerateRequest, Piece, generate, open_model

__all__ = ["GENAI_ARCHITECTURES", "GenerateRequest", "Piece", "architecture_of", "generate", "open_model", "supports"]
