"""hpcfair.convert.spectral's rules against torch.fft itself (in-process, trusted tensors, no sandbox): each
transform in real arithmetic equals torch's on odd and even sizes, with ``n``/``s`` cropping and padding and
every ``norm``; an op on a complex tensor without a rule is refused by name."""

from __future__ import annotations

import pytest
import torch
from hpcfair.convert import spectral
from hpcfair.convert.errors import ConversionError


def _complex(value) -> torch.Tensor:
    return torch.complex(value.re, value.im) if isinstance(value, spectral.Pair) else value


def _run(name: str, *args, **kwargs):
    op = getattr(torch.ops.aten, name).default
    return spectral.call(name, op, args, kwargs)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("size", [7, 8])
def test_one_dimensional_transforms_equal_torch_fft(norm, size):
    torch.manual_seed(0)
    x = torch.randn(3, 5, size)
    z = torch.randn(3, 5, size, dtype=torch.cfloat)
    cases = [
        (spectral.FFT_RULES["fft_rfft"](x, None, -1, norm), torch.fft.rfft(x, norm=norm)),
        (spectral.FFT_RULES["fft_rfft"](x, size + 3, 1, norm), torch.fft.rfft(x, n=size + 3, dim=1, norm=norm)),
        (spectral.FFT_RULES["fft_fft"](spectral.Pair(z.real, z.imag), None, -1, norm), torch.fft.fft(z, norm=norm)),
        (spectral.FFT_RULES["fft_ifft"](spectral.Pair(z.real, z.imag), 4, 1, norm),
         torch.fft.ifft(z, n=4, dim=1, norm=norm)),
    ]
    spectrum = torch.fft.rfft(x)
    for n in (size, size - 1, 2 * size):  # irfft: as is, fewer samples, zero-padded bins
        cases.append((spectral.FFT_RULES["fft_irfft"](spectral.Pair(spectrum.real, spectrum.imag), n, -1, norm),
                      torch.fft.irfft(spectrum, n=n, norm=norm)))
    for got, want in cases:
        torch.testing.assert_close(_complex(got), want, rtol=1e-4, atol=1e-5)


def test_two_and_n_dimensional_transforms_equal_torch_fft():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 9, 10)
    got = spectral.FFT_RULES["fft_rfft2"](x)
    torch.testing.assert_close(_complex(got), torch.fft.rfft2(x), rtol=1e-4, atol=1e-4)
    back = spectral.FFT_RULES["fft_irfft2"](got, (9, 10))
    torch.testing.assert_close(back, x, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(_complex(spectral.FFT_RULES["fft_rfftn"](x, None, (1, 3), "ortho")),
                               torch.fft.rfftn(x, dim=(1, 3), norm="ortho"), rtol=1e-4, atol=1e-4)
    spectrum = torch.fft.rfftn(x, dim=(1, 2, 3))
    pair = spectral.Pair(spectrum.real, spectrum.imag)
    torch.testing.assert_close(spectral.FFT_RULES["fft_irfftn"](pair, (3, 9, 10), (1, 2, 3)),
                               torch.fft.irfftn(spectrum, s=(3, 9, 10), dim=(1, 2, 3)), rtol=1e-4, atol=1e-4)


def test_complex_arithmetic_on_pairs_equals_torch():
    torch.manual_seed(2)
    a = torch.randn(2, 3, 4, dtype=torch.cfloat)
    w = torch.randn(3, 5, 4, dtype=torch.cfloat)
    pa, pw = spectral.Pair(a.real, a.imag), spectral.Pair(w.real, w.imag)
    torch.testing.assert_close(_complex(_run("einsum", "bix,iox->box", [pa, pw])),
                               torch.einsum("bix,iox->box", a, w))
    torch.testing.assert_close(_complex(spectral.call("mul", torch.ops.aten.mul.Tensor, (pa, pa), {})), a * a)
    torch.testing.assert_close(_complex(spectral.call("div", torch.ops.aten.div.Tensor, (pa, pa), {})),
                               a / a, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(_complex(spectral.call("add", torch.ops.aten.add.Tensor, (pa, a.real), {})),
                               a + a.real)
    torch.testing.assert_close(_run("abs", pa), a.abs())
    # an in-place copy into a slice of a complex zeros tensor (how spectral layers fill their modes)
    out = _run("zeros", [2, 5, 6], dtype=torch.cfloat)
    target = spectral.call("slice", torch.ops.aten.slice.Tensor, (out, 2, 0, 4), {})
    spectral.call("copy_", torch.ops.aten.copy_.default, (target, _run("einsum", "bix,iox->box", [pa, pw])), {})
    want = torch.zeros(2, 5, 6, dtype=torch.cfloat)
    want[:, :, :4] = torch.einsum("bix,iox->box", a, w)
    torch.testing.assert_close(_complex(out), want)


def test_an_op_on_a_complex_tensor_without_a_rule_is_refused_by_name():
    z = torch.randn(2, 3, dtype=torch.cfloat)
    with pytest.raises(ConversionError) as caught:
        spectral.call("exp", torch.ops.aten.exp.default, (spectral.Pair(z.real, z.imag),), {})
    assert caught.value.code == "unsupported_operator" and "exp on a complex tensor" in caught.value.detail


def test_a_traced_spectral_layer_with_real_pair_weights_runs_the_same_in_real_arithmetic():
    """A layer written as neuraloperator's newer code writes it: weights stored real [..., 2] and viewed as
    complex, rfftn/irfftn with ortho norm over two axes, a zeros_like of the spectrum filled in its corner."""

    class Spectral(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weights = torch.nn.Parameter(torch.randn(4, 4, 3, 3, 2) / 4)

        def forward(self, x):
            spectrum = torch.fft.rfftn(x, dim=(-2, -1), norm="ortho")
            out = torch.zeros_like(spectrum)
            out[..., :3, :3] = torch.einsum("bixy,ioxy->boxy", spectrum[..., :3, :3],
                                            torch.view_as_complex(self.weights))
            return torch.fft.irfftn(out, s=x.shape[-2:], dim=(-2, -1), norm="ortho").abs()

    torch.manual_seed(3)
    layer = Spectral().eval()
    traced = torch.jit.trace(layer, torch.randn(2, 4, 10, 14))
    real = spectral.real_module(traced)
    assert not any(buffer.dtype.is_complex for buffer in real.buffers())
    for shape in [(2, 4, 10, 14), (1, 4, 17, 9)]:  # the trace runs at a size it never saw
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(real(x), layer(x), rtol=1e-4, atol=1e-5)


def test_a_scripted_spectral_model_runs_its_branches_and_loops_in_real_arithmetic():
    """Issue 57, point 5: ``torch.jit.script`` keeps Python's control flow in the graph (``prim::If``,
    ``prim::Loop``, lists built by ``append``, a module's int attribute); the rewrite runs those blocks here, so
    both branches of a size test and a loop whose length follows the input's rank give the original's outputs."""

    class Scripted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.modes = 3
            self.weights = torch.nn.Parameter(torch.randn(4, 4, 3, dtype=torch.cfloat) / 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sizes: list[int] = []
            for n in x.shape[1:]:
                sizes.append(n)
            spectrum = torch.fft.rfft(x)
            out = torch.zeros(x.shape[0], x.shape[1], x.size(-1) // 2 + 1, dtype=torch.cfloat)
            out[:, :, :self.modes] = torch.einsum("bix,iox->box", spectrum[:, :, :self.modes], self.weights)
            y = torch.fft.irfft(out, n=sizes[-1])
            if x.size(-1) % 2 == 0:
                y = y * 2.0
            else:
                y = y - 1.0
            i = 0
            while i < len(sizes):
                y = y + 0.5
                i += 1
            return y

    torch.manual_seed(4)
    layer = Scripted().eval()
    scripted = torch.jit.script(layer)
    kinds = {node.kind() for node in scripted.inlined_graph.nodes()}
    assert {"prim::If", "prim::Loop"} <= kinds
    real = spectral.real_module(scripted)
    assert not any(buffer.dtype.is_complex for buffer in real.buffers())
    for shape in [(2, 4, 10), (1, 4, 9)]:  # an even and an odd grid: both branches
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(real(x), layer(x), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.cpu  # traces a torch loop in the sandbox: over 1 s on a quiet machine
def test_a_scripted_loop_that_the_values_decide_is_refused_with_the_way_out():
    class Halving(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weights = torch.nn.Parameter(torch.randn(4, 4, 3, dtype=torch.cfloat))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            spectrum = torch.einsum("bix,iox->box", torch.fft.rfft(x)[:, :, :3], self.weights)
            y = torch.fft.irfft(spectrum, n=x.size(-1))
            while bool(y.abs().max() > 0.01):  # as many halvings as the values need
                y = y * 0.5
            return y

    with pytest.raises(ConversionError) as caught:
        spectral.export(torch.jit.script(Halving()), (torch.randn(2, 4, 10),), 17, ["x"], None, [[0]])
    assert caught.value.code == "unsupported_operator"
    assert "depends on the values of its input" in caught.value.detail and "torch.where" in caught.value.detail
