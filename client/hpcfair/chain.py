"""How a chain of models feeds each model from the one before: the one rule, used by the client
(``modelAPI`` running a chain here), the hub's workers (running a chain, merging one) and the hub's check of
a ``/collaborate`` request.

Each joint between model *i* and model *i+1* has a *link*, ``{input of the next model: output of the one
before}``. A link that is given says everything: every name must exist on its side and every input of the
next model must be fed. A link that is empty or left out means *by position*: the first output feeds the
first input, and so on, so the counts must match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Link = Mapping[str, str]


class ChainError(ValueError):
    """A joint that cannot be fed. ``reason``: ``count`` (by position, the counts differ), ``unknown_input``,
    ``unknown_output`` or ``unmapped`` (an input the link leaves unfed)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def link_at(links: Sequence[Link | None] | None, index: int) -> dict[str, str]:
    """The link of joint ``index`` (from model ``index`` to model ``index + 1``); empty: by position."""
    if not links or index >= len(links) or not links[index]:
        return {}
    return dict(links[index])


def joint(link: Link | None, outputs: Sequence[str] | None, inputs: Sequence[str] | None, *,
          before: str = "the model before", after: str = "the next model", where: str = "the link"
          ) -> list[tuple[str, str]]:
    """(input of the next model, output of the one before) pairs for one joint: the link's, else by position.

    ``outputs``/``inputs``: the names on each side, or None where they are not known here (then they are
    not checked, and by position gives no pairs). ``before``, ``after``, ``where`` name the two models and
    the link in the messages."""
    if link:
        unknown_in = [name for name in link if inputs is not None and name not in inputs]
        if unknown_in:
            raise ChainError("unknown_input", f"{where}: {after} has no input {unknown_in[0]!r} "
                                              f"(it has {', '.join(inputs)}).")
        unknown_out = [name for name in link.values() if outputs is not None and name not in outputs]
        if unknown_out:
            raise ChainError("unknown_output", f"{where}: {before} has no output {unknown_out[0]!r} "
                                               f"(it has {', '.join(outputs)}).")
        unmapped = sorted(set(inputs or ()) - set(link))
        if unmapped:
            raise ChainError("unmapped", f"{where} must feed every input of {after}: {', '.join(unmapped)} "
                                         "unmapped.")
        return list(link.items())
    if outputs is None or inputs is None:
        return []
    if len(outputs) != len(inputs):
        raise ChainError("count", f"{before} has {len(outputs)} output(s) ({', '.join(outputs)}) and {after} "
                                  f"{len(inputs)} input(s) ({', '.join(inputs)}); say which feeds which in {where}.")
    return list(zip(inputs, outputs, strict=True))


def feed(link: Link | None, values: Mapping[str, Any], inputs: Sequence[str], **names: str) -> dict[str, Any]:
    """The next model's feeds from the outputs of the one before (``values``, by name, in output order)."""
    return {target: values[source] for target, source in joint(link, list(values), inputs, **names)}
