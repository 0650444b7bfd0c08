"""ONNX translations the TorchScript exporter lacks, for operators that real models use. Registered in
the sandboxed child only, just before ``torch.onnx.export``.

``aten::diff``: transformers 5 calls ``torch.diff`` on the position ids of every decoder (packed
sequence detection), so a traced GPT-2 stops with "aten::diff is not supported" at every opset; the same
code then takes ``cumsum`` of a bool tensor, which the built-in translation passes to ONNX CumSum as bool
(invalid: CumSum takes numbers), hence ``aten::cumsum`` with torch's own promotion of bools to int64.
"""

from __future__ import annotations

FIRST_OPSET = 11  # negative axes for Slice and Concat
_registered = False


def _diff(g, self, n, dim, prepend, append):
    """torch.diff(x, n, dim, prepend, append): x[1:] - x[:-1] along ``dim``, ``n`` times (XOR for bools)."""
    from torch.onnx import symbolic_helper as helper

    steps = helper._get_const(n, "i", "n")
    axis = helper._get_const(dim, "i", "dim")
    parts = [t for t in (prepend, self, append) if not helper._is_none(t)]
    x = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=axis)
    boolean = self.type().scalarType() == "Bool" if hasattr(self.type(), "scalarType") else False
    for _ in range(steps):
        later = helper._slice_helper(g, x, axes=[axis], starts=[1], ends=[2**63 - 1])
        earlier = helper._slice_helper(g, x, axes=[axis], starts=[0], ends=[-1])
        x = g.op("Xor" if boolean else "Sub", later, earlier)
    return x


def _cumsum(g, self, dim, dtype):
    """torch.cumsum(x, dim, dtype): bools and small ints count in int64, as torch does."""
    import torch
    from torch.onnx import symbolic_helper as helper

    try:
        from torch.onnx._internal.torchscript_exporter import _type_utils
    except ImportError:  # torch < 2.9
        from torch.onnx import _type_utils

    axis = g.op("Constant", value_t=torch.tensor(helper._get_const(dim, "i", "dim"), dtype=torch.long))
    if not helper._is_none(dtype):
        target = _type_utils.JitScalarType(helper._get_const(dtype, "i", "dtype"))
    else:
        source = _type_utils.JitScalarType.from_value(self, _type_utils.JitScalarType.UNDEFINED)
        integral = source in (_type_utils.JitScalarType.BOOL, _type_utils.JitScalarType.UINT8,
                              _type_utils.JitScalarType.INT8, _type_utils.JitScalarType.INT16,
                              _type_utils.JitScalarType.INT)
        target = _type_utils.JitScalarType.INT64 if integral else None
    if target is not None:
        self = g.op("Cast", self, to_i=target.onnx_type())
    return g.op("CumSum", self, axis)


def register() -> None:
    """Teach the TorchScript exporter the operators above (once per process)."""
    global _registered
    if _registered:
        return
    from torch.onnx import register_custom_op_symbolic

    register_custom_op_symbolic("aten::diff", _diff, FIRST_OPSET)
    register_custom_op_symbolic("aten::cumsum", _cumsum, FIRST_OPSET)
    _registered = True
