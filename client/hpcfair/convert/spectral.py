"""Complex-valued spectral layers (Fourier Neural Operators) in real arithmetic, so that they export to ONNX.

Neither torch exporter translates ``torch.fft`` on complex tensors with complex weights, and ONNX Runtime
runs no complex tensors. ``real_module`` re-runs a loaded model's own graph (a TorchScript module's inlined
graph, or a torch.export program's) op by op, carrying every complex tensor as a ``Pair`` of real tensors:

- ``rfft``/``fft``/``irfft``/``ifft`` (1-D, 2-D, n-D) become matrix products with cos/sin tables built from
  the input's size at run time (so the grid stays dynamic), with torch's ``norm`` conventions;
- einsums, products and sums of complex tensors are expanded into their real and imaginary parts;
- slices, views and in-place copies act on both parts; complex weights are stored as two real buffers.

The result is an ``nn.Module`` of real operations that ``torch.onnx.export`` (dynamo) takes. An op on a
complex tensor that has no rule here stops with ``unsupported_operator`` naming it. Runs in the sandbox only.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcfair.convert.errors import ConversionError

FFT_OPS = ("fft_rfft", "fft_irfft", "fft_fft", "fft_ifft", "_fft_r2c", "_fft_c2r", "_fft_c2c")
# TorchScript's ScalarType numbering (c10/core/ScalarType.h), for the dtypes a graph passes as ints
_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32", "complex64",
           "complex128", "bool")


@dataclass
class Pair:
    """A complex tensor as its real and imaginary parts."""

    re: Any
    im: Any

    @property
    def shape(self):
        return self.re.shape

    def dim(self) -> int:
        return self.re.dim()

    def size(self, dim: int | None = None):
        return self.re.shape if dim is None else self.re.shape[dim]


def uses_spectral(ops: list[str], tensors) -> bool:
    """Whether a graph with these op names, or a model holding these tensors, needs the real rewrite."""
    return (any(name.startswith(FFT_OPS) for name in ops)
            or any(getattr(getattr(t, "dtype", None), "is_complex", False) for t in tensors))


# --- the discrete Fourier transform as matrix products ----------------------------------------------


def _table(n_in, n_out, size):
    """cos and sin of 2*pi*t*k/size for t < n_in (rows) and k < n_out (columns), in float64 then float32."""
    import torch

    t = torch.arange(n_in, dtype=torch.int64).unsqueeze(1)
    k = torch.arange(n_out, dtype=torch.int64).unsqueeze(0)
    period = torch.scalar_tensor(size, dtype=torch.int64)  # a tensor: the ONNX exporter's remainder takes no
    angle = torch.remainder(t * k, period).to(torch.float64) * (2 * math.pi) / period.to(torch.float64)  # SymInt
    return torch.cos(angle).to(torch.float32), torch.sin(angle).to(torch.float32)


def _fit(x, dim: int, n):
    """``x`` cropped or zero-padded to ``n`` along ``dim``, as torch.fft does with its ``n``/``s``."""
    import torch

    have = x.shape[dim]
    if n is None or have == n:
        return x
    if have > n:
        return x.narrow(dim, 0, n)
    pad = list(x.shape)
    pad[dim] = n - have
    return torch.cat([x, x.new_zeros(pad)], dim)


def _scale(norm: str | None, n, inverse: bool):
    if norm == "ortho":
        return 1 / math.sqrt(n) if isinstance(n, int) else n ** -0.5
    if (norm == "forward") != inverse:  # backward norm scales the inverse, forward norm the forward
        return 1.0 / n
    return None


def _along(x, dim: int, matrix):
    """``x`` times ``matrix`` along ``dim`` (the transform's axis)."""
    return (x.movedim(dim, -1) @ matrix).movedim(-1, dim)


def _cast(x, like):
    return x.to(like.dtype) if like.dtype != x.dtype else x


def _dft(value, dim: int, n, norm: str | None, inverse: bool) -> Pair:
    """The complex DFT of ``value`` (a Pair or a real tensor) along ``dim``."""
    value = value if isinstance(value, Pair) else Pair(value, None)
    re = _fit(value.re, dim, n)
    im = _fit(value.im, dim, n) if value.im is not None else None
    size = re.shape[dim]
    cos, sin = _table(size, size, size)
    cos, sin = _cast(cos, re), _cast(sin, re)
    sign = 1 if inverse else -1  # e^{sign * i * theta}
    out_re, out_im = _along(re, dim, cos), _along(re, dim, sin) * sign
    if im is not None:
        out_re = out_re - sign * _along(im, dim, sin)
        out_im = out_im + _along(im, dim, cos)
    factor = _scale(norm, size, inverse)
    return Pair(out_re * factor, out_im * factor) if factor is not None else Pair(out_re, out_im)


def _rdft(x, dim: int, n, norm: str | None) -> Pair:
    """The one-sided DFT of a real tensor (torch.fft.rfft) along ``dim``."""
    x = _fit(x, dim, n)
    size = x.shape[dim]
    cos, sin = _table(size, size // 2 + 1, size)
    cos, sin = _cast(cos, x), _cast(sin, x)
    factor = _scale(norm, size, inverse=False)
    re, im = _along(x, dim, cos), -_along(x, dim, sin)
    return Pair(re * factor, im * factor) if factor is not None else Pair(re, im)


def _irdft(value, dim: int, n, norm: str | None):
    """The real inverse of a one-sided spectrum (torch.fft.irfft) along ``dim``: ``n`` samples out."""
    import torch

    value = value if isinstance(value, Pair) else Pair(value, torch.zeros_like(value))
    bins = value.re.shape[dim]
    size = n if n is not None else 2 * (bins - 1)
    used = torch.sym_min(bins, size // 2 + 1)
    re, im = value.re.narrow(dim, 0, used), value.im.narrow(dim, 0, used)
    cos, sin = _table(used, size, size)  # rows: bins k, columns: samples t
    k = torch.arange(used, dtype=torch.int64).unsqueeze(1)
    weight = torch.where((k == 0) | (2 * k == size), 1.0, 2.0).to(re.dtype)  # Hermitian halves counted twice
    cos, sin = _cast(cos, re) * weight, _cast(sin, re) * weight
    out = _along(re, dim, cos) - _along(im, dim, sin)
    factor = _scale(norm, size, inverse=True)
    return out * factor if factor is not None else out


def _dims(x, s, dim, default_all: bool) -> tuple[list[int], list]:
    """torch.fft.*fftn's (s, dim) rule: the axes transformed and their sizes (None: as they are)."""
    rank = x.dim()
    if dim is None:
        dims = list(range(rank - len(s), rank)) if s is not None else (
            list(range(rank)) if default_all else [rank - 2, rank - 1])
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [d % rank for d in dims]
    sizes = list(s) if s is not None else [None] * len(dims)
    return dims, sizes


def _fftn(x, s, dim, norm, inverse: bool, default_all: bool = True) -> Pair:
    dims, sizes = _dims(x, s, dim, default_all)
    for axis, size in zip(dims, sizes, strict=True):
        x = _dft(x, axis, size, norm, inverse)
    return x


def _rfftn(x, s, dim, norm, default_all: bool = True) -> Pair:
    dims, sizes = _dims(x, s, dim, default_all)
    out = _rdft(x, dims[-1], sizes[-1], norm)
    for axis, size in zip(dims[:-1], sizes[:-1], strict=True):
        out = _dft(out, axis, size, norm, inverse=False)
    return out


def _irfftn(x, s, dim, norm, default_all: bool = True):
    dims, sizes = _dims(x, s, dim, default_all)
    for axis, size in zip(dims[:-1], sizes[:-1], strict=True):
        x = _dft(x, axis, size, norm, inverse=True)
    return _irdft(x, dims[-1], sizes[-1], norm)


def _private_norm(normalization: int, inverse: bool) -> str | None:
    if normalization == 1:
        return "ortho"
    if normalization == 2:  # 1/n on this call
        return None if inverse else "forward"
    return "forward" if inverse else None  # no scaling on this call


FFT_RULES: dict[str, Callable] = {
    "fft_rfft": lambda x, n=None, dim=-1, norm=None: _rdft(x, dim, n, norm),
    "fft_irfft": lambda x, n=None, dim=-1, norm=None: _irdft(x, dim, n, norm),
    "fft_fft": lambda x, n=None, dim=-1, norm=None: _dft(x, dim, n, norm, inverse=False),
    "fft_ifft": lambda x, n=None, dim=-1, norm=None: _dft(x, dim, n, norm, inverse=True),
    "fft_rfft2": lambda x, s=None, dim=(-2, -1), norm=None: _rfftn(x, s, dim, norm),
    "fft_irfft2": lambda x, s=None, dim=(-2, -1), norm=None: _irfftn(x, s, dim, norm),
    "fft_fft2": lambda x, s=None, dim=(-2, -1), norm=None: _fftn(x, s, dim, norm, inverse=False),
    "fft_ifft2": lambda x, s=None, dim=(-2, -1), norm=None: _fftn(x, s, dim, norm, inverse=True),
    "fft_rfftn": lambda x, s=None, dim=None, norm=None: _rfftn(x, s, dim, norm),
    "fft_irfftn": lambda x, s=None, dim=None, norm=None: _irfftn(x, s, dim, norm),
    "fft_fftn": lambda x, s=None, dim=None, norm=None: _fftn(x, s, dim, norm, inverse=False),
    "fft_ifftn": lambda x, s=None, dim=None, norm=None: _fftn(x, s, dim, norm, inverse=True),
    "_fft_r2c": lambda x, dim, normalization, onesided: (
        _rfftn(x, None, dim, _private_norm(normalization, False)) if onesided
        else _fftn(x, None, dim, _private_norm(normalization, False), inverse=False)),
    "_fft_c2r": lambda x, dim, normalization, last_dim_size: _irfftn(
        x, [None] * (len(dim) - 1) + [last_dim_size], dim, _private_norm(normalization, True)),
    "_fft_c2c": lambda x, dim, normalization, forward: _fftn(
        x, None, dim, _private_norm(normalization, not forward), inverse=not forward),
}


# --- complex arithmetic on pairs ---------------------------------------------------------------------


def _pair(value):
    """``value`` as a Pair (a real tensor or number has no imaginary part)."""
    import torch

    if isinstance(value, Pair):
        return value
    if isinstance(value, complex):
        return Pair(value.real, value.imag)
    if isinstance(value, torch.Tensor) and value.dtype.is_complex:
        return Pair(value.real.clone(), value.imag.clone())
    zero = torch.zeros_like(value) if isinstance(value, torch.Tensor) else 0.0
    return Pair(value, zero)


def _product(fn: Callable, a, b, *rest, **kwargs) -> Pair:
    """A bilinear op (mul, matmul, einsum's two operands) on complex operands: (ar + i ai)(br + i bi)."""
    if not isinstance(b, Pair):
        a = _pair(a)
        return Pair(fn(a.re, b, *rest, **kwargs), fn(a.im, b, *rest, **kwargs))
    if not isinstance(a, Pair):
        return Pair(fn(a, b.re, *rest, **kwargs), fn(a, b.im, *rest, **kwargs))
    return Pair(fn(a.re, b.re, *rest, **kwargs) - fn(a.im, b.im, *rest, **kwargs),
                fn(a.re, b.im, *rest, **kwargs) + fn(a.im, b.re, *rest, **kwargs))


def _einsum(equation: str, operands, path=None) -> Pair:
    import torch

    operands = list(operands)
    result = operands[0]
    if len(operands) > 2:
        raise ConversionError("unsupported_operator", "an einsum of more than two complex operands has no real "
                                                      "rewrite here; write it as a chain of two-operand einsums.")
    if len(operands) == 1:
        one = _pair(result)
        return Pair(torch.einsum(equation, one.re), torch.einsum(equation, one.im))
    return _product(lambda x, y: torch.einsum(equation, x, y), operands[0], operands[1])


def _linear(fn: Callable, a, b, *rest, **kwargs) -> Pair:
    """add/sub of complex operands, with torch's ``alpha``."""
    a, b = _pair(a), _pair(b)
    return Pair(fn(a.re, b.re, *rest, **kwargs), fn(a.im, b.im, *rest, **kwargs))


def _divide(a, b, **kwargs) -> Pair:
    a = _pair(a)
    if not isinstance(b, Pair):
        return Pair(a.re / b, a.im / b)
    norm = b.re * b.re + b.im * b.im
    return Pair((a.re * b.re + a.im * b.im) / norm, (a.im * b.re - a.re * b.im) / norm)


def _copy(dst, src, non_blocking: bool = False):
    src = _pair(src)
    dst.re.copy_(src.re)
    dst.im.copy_(src.im)
    return dst


def _cat(fn: Callable, tensors, *rest, **kwargs) -> Pair:
    pairs = [_pair(t) for t in tensors]
    return Pair(fn([p.re for p in pairs], *rest, **kwargs), fn([p.im for p in pairs], *rest, **kwargs))


def _each(fn: Callable, value, *rest, **kwargs):
    """An op that acts on both parts alike (a view, a reshape, a slice, a sum); list results stay lists."""
    re, im = fn(value.re, *rest, **kwargs), fn(value.im, *rest, **kwargs)
    if isinstance(re, list | tuple):
        return [Pair(r, i) for r, i in zip(re, im, strict=True)]
    return Pair(re, im)


def _drop_complex_dtype(kwargs: dict) -> dict:
    import torch

    dtype = kwargs.get("dtype")
    if dtype is not None and getattr(dtype, "is_complex", False):
        return {**kwargs, "dtype": torch.float64 if dtype == torch.complex128 else torch.float32}
    return kwargs


SAME_ON_BOTH = {
    "slice", "select", "view", "reshape", "_reshape_alias", "permute", "transpose", "t", "unsqueeze", "squeeze",
    "expand", "expand_as", "contiguous", "clone", "flatten", "unflatten", "movedim", "moveaxis", "narrow",
    "index_select", "repeat", "detach", "alias", "lift_fresh_copy", "roll", "flip", "constant_pad_nd", "pad",
    "chunk", "split", "split_with_sizes", "unbind", "sum", "mean", "index", "gather", "squeeze_", "unsqueeze_",
    "_unsafe_view", "as_strided", "tile", "diagonal", "dropout", "feature_dropout", "to", "type_as", "_to_copy",
}
CREATORS = {"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "new_zeros",
            "new_ones", "new_empty", "new_full", "tensor", "scalar_tensor"}


def _linspace(start, end, steps, dtype=None, layout=None, device=None, pin_memory=None, **_):
    """torch.linspace with a size known only at run time (its ``steps`` is an int, which export would fix): a
    grid built from both ends, as torch builds it."""
    import torch

    index = torch.arange(steps, dtype=torch.float64, device=device)
    step = (end - start) / torch.clamp(torch.scalar_tensor(steps, dtype=torch.float64) - 1, min=1)
    values = torch.where(index < steps // 2, start + step * index, end - step * (steps - 1 - index))
    return values.to(dtype or torch.get_default_dtype())


def _filled(name: str, made, args: tuple) -> Pair:
    """A complex tensor that a creator (``made``: its real-typed twin) fills: zeros, ones or one value."""
    import torch

    if name in {"ones", "ones_like", "new_ones"}:
        return Pair(made, torch.zeros_like(made))
    if name in {"full", "full_like", "new_full"}:
        value = complex(args[-1])
        return Pair(made * 0 + value.real, made * 0 + value.imag)
    return Pair(made, torch.zeros_like(made))  # zeros, and empty (whose contents are undefined anyway)


def call(name: str, fn: Callable, args: tuple, kwargs: dict):
    """Run op ``name`` (``fn``) with complex values carried as Pairs."""
    import torch

    pairs = any(isinstance(value, Pair) for value in _leaves((args, kwargs)))
    if name in FFT_RULES:
        return FFT_RULES[name](*args, **kwargs)
    if name == "view_as_complex":  # real weights stored as [..., 2] (neuraloperator's newer layers)
        return view_as_complex(args[0])
    if name == "linspace" and isinstance(args[2] if len(args) > 2 else kwargs.get("steps"), torch.SymInt):
        return _linspace(*args, **kwargs)
    if name in CREATORS and args and isinstance(args[0], Pair):  # zeros_like(a complex tensor), new_zeros ...
        return _filled(name, fn(args[0].re, *args[1:], **_drop_complex_dtype(kwargs)), args)
    if not pairs:
        if name in CREATORS and getattr(kwargs.get("dtype"), "is_complex", False):
            return _filled(name, fn(*args, **_drop_complex_dtype(kwargs)), args)
        result = fn(*args, **kwargs)
        return _pair(result) if isinstance(result, torch.Tensor) and result.dtype.is_complex else result
    value = args[0] if args else None
    if name in {"to", "_to_copy", "type_as"}:
        kwargs = _drop_complex_dtype(kwargs)
        args = tuple(a for a in args if not getattr(a, "is_complex", False))
        if name == "to" and len(args) > 1 and isinstance(args[1], torch.dtype):
            args = args[:1]  # to(dtype): a complex dtype is kept as a Pair
    if name in SAME_ON_BOTH and isinstance(value, Pair):
        return _each(fn, value, *args[1:], **kwargs)
    if name in {"cat", "stack", "concat", "concatenate"}:
        return _cat(fn, *args, **kwargs)
    if name in {"mul", "matmul", "bmm", "mm"}:
        return _product(fn, *args, **kwargs)
    if name in {"add", "sub"}:
        return _linear(fn, *args, **kwargs)
    if name in {"div", "true_divide"}:
        return _divide(*args, **kwargs)
    if name == "neg":
        return Pair(-value.re, -value.im)
    if name == "einsum":
        return _einsum(*args, **kwargs)
    if name in {"copy_", "copy"}:
        return _copy(*args, **kwargs)
    if name in {"conj", "conj_physical", "resolve_conj", "_conj"}:
        return Pair(value.re, -value.im) if name != "resolve_conj" else value
    if name == "real":
        return value.re
    if name == "imag":
        return value.im
    if name == "abs":
        return torch.sqrt(value.re * value.re + value.im * value.im)
    if name == "angle":
        return torch.atan2(value.im, value.re)
    if name == "view_as_real":
        return torch.stack([value.re, value.im], -1)
    if name in {"zero_", "fill_"}:
        fill = _pair(args[1] if len(args) > 1 else 0.0)
        value.re.fill_(fill.re)
        value.im.fill_(fill.im)
        return value
    raise ConversionError("unsupported_operator",
                          f"the operator {name} on a complex tensor has no rewrite in real arithmetic here; the "
                          "spectral rewrite covers torch.fft, einsum, products, sums, slices and views.")


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def view_as_complex(t) -> Pair:
    """A real tensor [..., 2] as the complex tensor torch.view_as_complex makes of it."""
    return Pair(t.select(-1, 0), t.select(-1, 1))


# --- running a TorchScript graph ---------------------------------------------------------------------

_SCALAR_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
               "floor_divide": operator.floordiv, "remainder": operator.mod, "floordiv": operator.floordiv}


DATA_DEPENDENT = ("the scripted model's control flow (a loop or a branch) depends on the values of its input, not "
                  "only on its sizes, which no exporter can record. Rewrite that loop to run a number of times a size "
                  "or a constant decides, or compute both branches and pick with torch.where, then save the model "
                  "again (torch.jit.script or torch.jit.trace)")


def _decided(condition) -> bool:
    """A branch's or a loop's condition as a Python bool; one that the input's values decide is refused."""
    try:
        return bool(condition)
    except Exception as exc:  # noqa: BLE001 - torch.export's data-dependent guard, in its words only logged
        if "data" in str(exc).lower() and "depend" in str(exc).lower():
            raise ConversionError("unsupported_operator", DATA_DEPENDENT + ".", cause=exc) from None
        raise


def _appended(items: list, item):
    items.append(item)
    return items


# A scripted graph's operations on lists (sizes, layers): run in Python
_LIST_OPS: dict[str, Callable] = {"append": _appended, "len": len, "list": list, "add": operator.add,
                                  "slice": lambda items, start=None, end=None, step=1: items[start:end:step],
                                  "eq": operator.eq, "ne": operator.ne}


def _number(value):
    """A 0-d tensor constant of a size computation as the Python number it stands for."""
    import torch

    return value.item() if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad else value


def _is_number(value) -> bool:
    import torch

    return isinstance(value, int | float | torch.SymInt | torch.SymFloat) and not isinstance(value, bool)


_ENUMS: dict[str, Callable] = {
    "dtype": lambda value: __import__("torch").__dict__[_DTYPES[value]],
    "layout": lambda value: __import__("torch").strided,
    "memory_format": lambda value: (__import__("torch").contiguous_format, __import__("torch").preserve_format,
                                    __import__("torch").channels_last, __import__("torch").channels_last_3d)[value],
}


class _ScriptRunner:
    """Runs a TorchScript module's inlined graph with ``call``: a traced graph, or a scripted one whose
    ``prim::If`` and ``prim::Loop`` blocks run here in Python (under torch.export a loop over the model's
    layers or a tensor's dimensions unrolls; a branch on a size becomes a guard)."""

    def __init__(self, module, tensors: Callable[[str], Any]) -> None:
        self.graph = module.inlined_graph
        self.root = module
        self.tensors = tensors
        for node in self.graph.findAllNodes("prim::CallMethod") + self.graph.findAllNodes("prim::CallFunction"):
            raise ConversionError("unsupported_operator",
                                  f"the spectral rewrite runs inlined TorchScript graphs (this one keeps "
                                  f"{node.kind()}): save the model with torch.jit.trace, or as torch.export (.pt2).")

    def __call__(self, *args):
        inputs = list(self.graph.inputs())
        env: dict[Any, Any] = {inputs[0].unique(): ("", self.root)}
        for value, arg in zip(inputs[1:], args, strict=True):
            env[value.unique()] = arg
        self._block(self.graph, env)
        results = [env[v.unique()] for v in self.graph.outputs()]
        return results[0] if len(results) == 1 else tuple(results)

    def _block(self, block, env: dict) -> None:
        for node in block.nodes():
            kind = node.kind()
            got = [env[v.unique()] for v in node.inputs()]
            outs = list(node.outputs())
            if kind == "prim::If":
                chosen = list(node.blocks())[0 if _decided(got[0]) else 1]
                self._block(chosen, env)
                for value, result in zip(outs, chosen.outputs(), strict=True):
                    env[value.unique()] = env[result.unique()]
                continue
            if kind == "prim::Loop":
                self._loop(node, got, env)
                continue
            if kind in ("prim::ListUnpack", "prim::TupleUnpack"):
                for value, item in zip(outs, got[0], strict=True):
                    env[value.unique()] = item
                continue
            if kind == "prim::RaiseException":
                raise ConversionError("unsupported_operator", "the scripted model raised an exception of its own "
                                                              "on the conversion's inputs (check the inputs).")
            env[outs[0].unique()] = self._node(node, kind, got)

    def _loop(self, node, got: list, env: dict) -> None:
        """``prim::Loop``: (trip count, condition, *carried) in; the body block takes (index, *carried) and gives
        (condition, *carried)."""
        trips, going, carried = got[0], got[1], got[2:]
        body = next(iter(node.blocks()))
        params = list(body.inputs())
        index = 0
        while _decided(going) and index < trips:
            for param, value in zip(params, [index, *carried], strict=True):
                env[param.unique()] = value
            self._block(body, env)
            going, *carried = [env[v.unique()] for v in body.outputs()]
            index += 1
        for value, result in zip(node.outputs(), carried, strict=True):
            env[value.unique()] = result

    def _node(self, node, kind: str, got: list):
        import torch

        if kind == "prim::Constant":
            result = node.output().toIValue() if node.output().type().kind() != "NoneType" else None
            return _pair(result) if isinstance(result, torch.Tensor) and result.dtype.is_complex else result
        if kind == "prim::GetAttr":
            path, owner = got[0]
            path = f"{path}.{node.s('name')}" if path else node.s("name")
            attr = getattr(owner, node.s("name"))
            if isinstance(attr, torch.Tensor):
                return self.tensors(path)
            return (path, attr) if isinstance(attr, torch.nn.Module) else attr  # a scripted module's int, list…
        if kind in ("prim::ListConstruct", "prim::TupleConstruct"):
            return list(got) if kind == "prim::ListConstruct" else tuple(got)
        if kind in ("prim::NumToTensor", "prim::unchecked_cast"):
            return got[0]
        if kind == "aten::Bool":
            return _decided(got[0])
        if kind in ("aten::Int", "aten::Float", "aten::ScalarImplicit"):
            result = _number(got[0])
            return torch.sym_int(result) if kind == "aten::Int" and isinstance(result, float | torch.SymFloat) \
                else result
        if kind == "aten::size":
            return got[0].shape[got[1]] if len(got) > 1 else list(got[0].shape)
        if kind in ("prim::TupleIndex", "aten::__getitem__"):
            return got[0][got[1]]
        if kind in ("prim::device", "prim::dtype"):
            target = got[0].re if isinstance(got[0], Pair) else got[0]
            return target.device if kind == "prim::device" else target.dtype
        if kind.startswith("aten::") and got and isinstance(got[0], list) and kind[6:] in _LIST_OPS:
            return _LIST_OPS[kind[6:]](*got)
        if kind.startswith("aten::"):
            return self._aten(node, kind[6:], got)
        raise ConversionError("unsupported_operator", f"the spectral rewrite cannot run {kind}.")

    def _aten(self, node, name: str, got: list):
        import torch

        if name in _SCALAR_OPS and got and _is_number(got[0]):
            other = _number(got[1])
            if _is_number(other):
                if name == "div" and len(got) > 2 and got[2] in ("trunc", "floor"):  # sizes: int division
                    return got[0] // other
                return _SCALAR_OPS[name](got[0], other * (got[2] if len(got) > 2 and name in ("add", "sub") else 1))
        if name == "_convolution":  # TorchScript's private form; its last four flags only pick a backend
            return torch.ops.aten.convolution.default(*got[:9])
        schema = torch._C.parse_schema(node.schema())
        args, kwargs = [], {}
        for argument, value in zip(schema.arguments, got, strict=True):
            if isinstance(value, int) and argument.name in _ENUMS:  # the graph holds these enums as ints
                value = _ENUMS[argument.name](value)
            if argument.kwarg_only:
                kwargs[argument.name] = value
            else:
                args.append(value)
        packet = getattr(torch.ops.aten, name)
        overload = getattr(packet, schema.overload_name or "default")
        return call(name, overload, tuple(args), kwargs)


# --- the real module ---------------------------------------------------------------------------------


def _buffer_name(path: str) -> str:
    return "t_" + path.replace(".", "__")


class _Real:
    """Holds the model's tensors as real buffers of ``owner`` (a complex one as two) and hands them back as
    the runner asks for them by path."""

    def __init__(self, owner, named) -> None:
        import torch

        self.owner = owner
        for path, tensor in named:
            tensor = tensor.detach()
            if tensor.dtype.is_complex:
                owner.register_buffer(_buffer_name(path) + "_re", tensor.real.clone())
                owner.register_buffer(_buffer_name(path) + "_im", tensor.imag.clone())
            elif isinstance(tensor, torch.Tensor):
                owner.register_buffer(_buffer_name(path), tensor.clone())

    def __call__(self, path: str):
        name = _buffer_name(path)
        if hasattr(self.owner, name + "_re"):
            return Pair(getattr(self.owner, name + "_re"), getattr(self.owner, name + "_im"))
        return getattr(self.owner, name)


def real_module(source):
    """A real-valued ``nn.Module`` that computes what ``source`` does: a TorchScript module (traced) or a
    ``torch.fx.GraphModule`` (a torch.export program's ``module()``)."""
    import torch

    class RealSpectral(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            named = dict(source.named_parameters())
            named.update(dict(source.named_buffers()))
            if isinstance(source, torch.fx.GraphModule):
                for node in source.graph.nodes:
                    if node.op == "get_attr" and node.target not in named:
                        found = _attr(source, node.target)
                        if isinstance(found, torch.Tensor):
                            named[node.target] = found
            self.tensors = _Real(self, named.items())
            if isinstance(source, torch.fx.GraphModule):
                self.run = _fx_runner(source, self.tensors)
            else:
                self.run = _ScriptRunner(source, self.tensors)

        def forward(self, *args):
            out = self.run(*args)
            return tuple(o.re if isinstance(o, Pair) else o for o in out) if isinstance(out, tuple) else (
                out.re if isinstance(out, Pair) else out)

    return RealSpectral().eval()


def _attr(owner, path: str):
    for part in path.split("."):
        owner = getattr(owner, part)
    return owner


def _fx_runner(module, tensors: Callable[[str], Any]) -> Callable:
    import torch

    class Runner(torch.fx.Interpreter):
        def get_attr(self, target, args, kwargs):
            found = _attr(module, target)
            return tensors(target) if isinstance(found, torch.Tensor) else found

        def call_function(self, target, args, kwargs):
            if isinstance(target, torch._ops.OpOverload):
                return call(target._opname, target, args, kwargs)
            if any(isinstance(v, Pair) for v in _leaves((args, kwargs))) and target is not operator.getitem:
                raise ConversionError("unsupported_operator", f"the spectral rewrite cannot run {target} on a "
                                                              "complex tensor.")
            return target(*args, **kwargs)

        def call_module(self, target, args, kwargs):
            if any(isinstance(v, Pair) for v in _leaves((args, kwargs))):
                raise ConversionError("unsupported_operator", "the spectral rewrite runs flat torch.export graphs "
                                                              "only.")
            return super().call_module(target, args, kwargs)  # the program's guards

    def run(*args):
        flat = Runner(module).run(*args)
        return flat

    return run


# --- exporting ---------------------------------------------------------------------------------------


def export(source, args: tuple, opset: int, input_names: list[str], output_names: list[str] | None,
           dynamic: list[list[int]]):
    """The ONNX model of ``source`` (a traced TorchScript module or a program's ``module()``) rewritten in real
    arithmetic; ``dynamic`` lists each input's dynamic axes (kept dynamic where the graph allows)."""
    import torch

    auto = torch.export.Dim.AUTO
    # torch.export fixes a dynamic axis of size 1 (broadcasting): trace with such axes repeated to size 2
    args = tuple(_grown(arg, axes) for arg, axes in zip(args, dynamic, strict=True))
    shapes = (tuple({axis: auto for axis in axes} or None for axes in dynamic),)
    try:
        program = torch.onnx.export(real_module(source), args, dynamo=True, external_data=False,
                                    opset_version=opset, input_names=input_names, output_names=output_names,
                                    dynamic_shapes=shapes, verbose=False)
    except Exception as exc:  # noqa: BLE001 - a refusal of the rewrite's own, raised inside the exporter
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ConversionError):
            cause = cause.__cause__ or cause.__context__
        raise (cause or exc) from None
    return program.model_proto


def _grown(tensor, axes: list[int]):
    import torch

    for axis in axes:
        if tensor.shape[axis] == 1:
            tensor = torch.cat([tensor, tensor], axis)
    return tensor


def script_ops(module) -> list[str]:
    """The aten op names of a TorchScript module's inlined graph."""
    return [node.kind()[6:] for node in module.inlined_graph.nodes() if node.kind().startswith("aten::")]


def program_ops(module) -> list[str]:
    """The aten op names of a torch.export program's graph module."""
    return [getattr(node.target, "_opname", "") for node in module.graph.nodes if node.op == "call_function"]
