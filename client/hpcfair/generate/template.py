"""Chat templates (Jinja, as Hugging Face tokenizers and GGUF files carry them) rendered in Jinja's immutable
sandbox: no attribute of Python's internals, no mutation of what it is given, ranges capped. The caller runs it
in a bounded child (the generation engine, the sandbox child), which caps its memory and time."""

from __future__ import annotations

from typing import Any


class TemplateError(Exception):
    """A template that could not be rendered, in words that name no host path."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _raise(message: str) -> None:
    raise TemplateError(f"The chat template refused the conversation: {str(message)[:300]}")


def render_chat(template: str, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "") -> str:
    """``messages`` through ``template``, as transformers' ``apply_chat_template`` renders them."""
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = _raise
    try:
        return environment.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                        bos_token=bos_token, eos_token=eos_token)
    except TemplateError:
        raise
    except (JinjaError, TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError,
            OverflowError, RecursionError) as exc:
        raise TemplateError(f"The chat template could not be rendered ({type(exc).__name__}: "
                            f"{str(exc)[:200]}).") from None
