"""Mixture-of-experts layers (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE and every transformers experts class under
``use_experts_implementation``) in a form the ONNX exporters take.

transformers 5 runs the experts by ``grouped_mm`` (a custom operator, ``transformers::grouped_mm_fallback``, and
``aten::histc`` to count the tokens of each expert) or ``eager`` (a loop over the experts that tokens were sent
to, whose length depends on the data): no exporter translates the first, and a trace freezes the second at the
routing of its example. ``dense`` is the same arithmetic written without data-dependent shapes: every token goes
through every expert, and each expert's output is weighted by the router's weight for that token (zero for an
expert the router did not pick), so the sum is the one the sparse forms compute. The cost: ``experts / top_k``
times the experts' arithmetic of the sparse forms (no weight is copied; memory: experts x tokens x intermediate).

Verification compares the export with the model's own implementation (``original``), never with this form."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

DENSE = "hpcfair-dense"
DENSE_NOTE = ("mixture-of-experts layers exported in dense form (every token through every expert, weighted by its "
              "router; the sparse forms' custom operator and data-dependent loop do not export): the same sums, "
              "verified against the model's own experts implementation")


def dense_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """The experts' output for ``hidden_states`` [tokens, hidden] routed to ``top_k_index`` with ``top_k_weights``
    [tokens, top_k]: every expert on every token, weighted by the router (zero where it did not pick it)."""
    import torch

    routing = (torch.nn.functional.one_hot(top_k_index, self.num_experts).to(top_k_weights.dtype)
               * top_k_weights.unsqueeze(-1)).sum(dim=1)  # [tokens, experts]
    up = self.gate_up_proj if self.has_gate else self.up_proj
    out = _linear(hidden_states.unsqueeze(0), up, getattr(self, f"{'gate_up' if self.has_gate else 'up'}_proj_bias",
                                                          None) if self.has_bias else None, self.is_transposed)
    out = self._apply_gate(out) if self.has_gate else self.act_fn(out)
    out = _linear(out, self.down_proj, self.down_proj_bias if self.has_bias else None, self.is_transposed)
    if self.has_post_expert_norm:
        out = self.post_expert_norm(out)
    return (out * routing.t().unsqueeze(-1)).sum(dim=0).to(hidden_states.dtype)  # [experts, tokens, hidden] summed


def _linear(states, weight, bias, transposed: bool):
    """[experts, tokens, in] (or [1, tokens, in]) by each expert's weight [experts, out, in] ([experts, in, out]
    when ``transposed``), plus its bias [experts, out]."""
    out = states @ (weight if transposed else weight.transpose(1, 2))
    return out if bias is None else out + bias.unsqueeze(1)


def has_experts(model) -> bool:
    """Whether ``model`` holds an experts layer that transformers dispatches by implementation."""
    return any(hasattr(module, "_is_expert_parallel") and hasattr(module, "has_gate") for module in model.modules())


def densify(model) -> bool:
    """Switch ``model``'s experts layers to ``dense``; False (nothing changed) when it has none."""
    if not has_experts(model) or not hasattr(model, "set_experts_implementation"):
        return False
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    if DENSE not in ALL_EXPERTS_FUNCTIONS:
        ALL_EXPERTS_FUNCTIONS.register(DENSE, dense_experts_forward)
    model.__dict__["_hpcfair_experts"] = model.config._experts_implementation
    model.set_experts_implementation(DENSE)
    return True


@contextmanager
def original(model) -> Iterator[None]:
    """Inside, ``model`` runs its experts as it was loaded (a densified model's reference outputs)."""
    before = model.__dict__.get("_hpcfair_experts")
    if before is None:
        yield
        return
    model.set_experts_implementation(before)
    try:
        yield
    finally:
        model.set_experts_implementation(DENSE)


def reference(model, run):
    """``run`` (a reference over ``model``) computing with the model's own experts implementation."""
    def original_run(feeds):
        with original(model):
            return run(feeds)

    return original_run


# --- torch.export programs of transformers' experts --------------------------------------------------


def load_program(path):
    """A torch.export program that names transformers' own operators (its experts' ``grouped_mm_fallback``),
    loaded once those are registered (importing transformers' experts module); None when it still does not load."""
    import torch

    try:
        import transformers.integrations.moe  # noqa: F401 - registers the transformers:: operators
    except ImportError:
        return None
    try:
        return torch.export.load(str(path))
    except Exception:  # noqa: BLE001 - the caller reports the file as unreadable
        return None


def _grouped_mm(input, weight, offs):
    """``transformers::grouped_mm_fallback``: rows sorted by expert, ``offs`` each expert's end row; every row by
    its expert's weight [in, out] (a gather and a batched product, no data-dependent shape)."""
    import torch

    rows = torch.arange(input.size(0), device=input.device)
    expert = (rows.unsqueeze(1) >= offs.unsqueeze(0)).sum(1).clamp(max=weight.size(0) - 1)
    return torch.bmm(input.unsqueeze(1), weight[expert]).squeeze(1)


def _histc(x, bins: int = 100, min: float = 0, max: float = 0):  # noqa: A002 - aten's argument names
    """``aten::histc`` with its bounds given (as transformers' experts call it): counts of ``x`` per bin, the
    last bin closed."""
    import torch

    if not min < max:
        raise NotImplementedError("histc without bounds")
    index = ((x - min) * (bins / (max - min))).floor().long().clamp(0, bins - 1)
    inside = ((x >= min) & (x <= max)).to(x.dtype)
    return (torch.nn.functional.one_hot(index, bins).to(x.dtype) * inside.unsqueeze(-1)).sum(0)


PROGRAM_NOTE = ("transformers' grouped expert products (transformers::grouped_mm_fallback) and aten::histc, which "
                "no ONNX exporter translates, were decomposed into gathers, batched products and one-hot counts")


def decompose(program):
    """(``program`` with transformers' experts operators and ``histc`` decomposed, whether any was); the others
    are left for the exporter to name."""
    import torch

    targets = {node.target for node in program.graph.nodes if node.op == "call_function"}
    table = {}
    grouped = getattr(getattr(torch.ops, "transformers", None), "grouped_mm_fallback", None)
    if grouped is not None and grouped.default in targets:
        table[grouped.default] = _grouped_mm
    if torch.ops.aten.histc.default in targets:
        table[torch.ops.aten.histc.default] = _histc
    return (program.run_decompositions(table), True) if table else (program, False)
