"""A GGUF file's metadata (llama.cpp's model format): architecture, context length, quantization, parameter
count, tokenizer and chat template, read in the sandbox child (``hpcfair.convert.child``, task ``gguf``).

The header is first walked here against ``Bounds`` from its bytes alone: every count, string and array
length, tensor shape, type and offset is checked against the bounds and the file's real size before anything
is built from it, so a file that lies (a billion tensors, a string of 2**60 bytes, a tensor past the end of
the file, two tensors on the same bytes) is refused with a code (``gguf_invalid``, ``gguf_too_large``). The
key-value metadata is then read by the ``gguf`` package's own ``GGUFReader`` from the checked header (its
tensor table, already checked, left out: the reader maps tensors' data, which the header copy does not
hold). The chat template is rendered on an example conversation by ``hpcfair.generate.template``, the
sandboxed renderer generation uses."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
MAX_DIMS = 4  # GGML_MAX_DIMS
TEMPLATE_CHARS = 65_536  # a chat template kept in the metadata up to this length
EXAMPLE = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello!"}]


class GGUFRefused(Exception):
    """A GGUF file refused, with its code (``gguf_invalid``, ``gguf_too_large``) and a message."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass
class Bounds:
    """What one GGUF header may hold."""

    max_keys: int = 4096
    max_tensors: int = 100_000
    max_string: int = 1 << 20  # bytes of one string (a chat template, a token)
    max_array: int = 1 << 21  # elements of one array (a tokenizer's vocabulary, its merges)
    max_elements: int = 1 << 23  # array elements in the whole header


def is_gguf(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) is a GGUF file's."""
    return head[:4] == MAGIC


class _Walker:
    def __init__(self, data: bytes, bounds: Bounds, size: int) -> None:
        self.data, self.bounds, self.size, self.at, self.elements = data, bounds, size, 0, 0

    def take(self, count: int, what: str) -> bytes:
        if self.at + count > len(self.data):
            if len(self.data) < self.size:
                raise GGUFRefused("gguf_too_large", f"The GGUF header runs past the first {len(self.data)} bytes "
                                                    f"the hub reads ({what}); its metadata is too large.")
            raise GGUFRefused("gguf_invalid", f"The GGUF file ends inside its header ({what}).")
        chunk = self.data[self.at:self.at + count]
        self.at += count
        return chunk

    def scalar(self, kind: int, what: str) -> Any:
        form = SCALARS[kind]
        return struct.unpack(form, self.take(struct.calcsize(form), what))[0]

    def string(self, what: str) -> str:
        length = self.scalar(10, what)
        if length > self.bounds.max_string:
            raise GGUFRefused("gguf_too_large", f"{what} is a string of {length} bytes; the hub reads strings of up "
                                                f"to {self.bounds.max_string}.")
        return self.take(length, what).decode("utf-8", errors="replace")

    def value(self, kind: int, what: str, depth: int = 0) -> Any:
        if kind in SCALARS:
            return self.scalar(kind, what)
        if kind == STRING:
            return self.string(what)
        if kind != ARRAY or depth > 1:
            raise GGUFRefused("gguf_invalid", f"{what} has an unknown value type ({kind}).")
        inner, count = self.scalar(4, what), self.scalar(10, what)
        self.elements += count
        if count > self.bounds.max_array or self.elements > self.bounds.max_elements:
            raise GGUFRefused("gguf_too_large", f"{what} is an array of {count} elements; the hub reads arrays of up "
                                                f"to {self.bounds.max_array} ({self.bounds.max_elements} in all).")
        if inner in SCALARS:  # checked in one piece: the file must hold them all
            width = struct.calcsize(SCALARS[inner])
            self.take(width * count, what)
            return count
        for _ in range(count):
            self.value(inner, what, depth + 1)
        return count


def walk(data: bytes, size: int, bounds: Bounds) -> dict[str, Any]:
    """Check the header in ``data`` (the first bytes of a file of ``size`` bytes): counts, lengths, tensor
    shapes, types and offsets. Returns the version, key count, the header's length up to the tensor table,
    and the tensors (name, shape, type)."""
    import gguf

    walker = _Walker(data, bounds, size)
    if walker.take(4, "magic") != MAGIC:
        raise GGUFRefused("gguf_invalid", "The file does not start with GGUF's magic bytes.")
    version = walker.scalar(4, "version")
    if version not in (2, 3):
        raise GGUFRefused("gguf_invalid", f"GGUF version {version} is not one the hub reads (2 and 3).")
    tensors, keys = walker.scalar(10, "the tensor count"), walker.scalar(10, "the key count")
    if keys > bounds.max_keys or tensors > bounds.max_tensors:
        raise GGUFRefused("gguf_too_large", f"The header announces {tensors} tensors and {keys} keys; the hub reads "
                                            f"up to {bounds.max_tensors} and {bounds.max_keys}.")
    if tensors * 28 > size:  # a tensor's entry takes at least 28 bytes: a count the file cannot hold
        raise GGUFRefused("gguf_invalid", f"The header announces {tensors} tensors, more than a file of {size} "
                                          "bytes can describe.")
    alignment = gguf.GGUF_DEFAULT_ALIGNMENT
    for _ in range(keys):
        key = walker.string("a key")
        kind = walker.scalar(4, key[:80])
        value = walker.value(kind, key[:80])
        if key == "general.alignment":
            if kind != 4 or value == 0 or value & (value - 1):
                raise GGUFRefused("gguf_invalid", "general.alignment is not a power of two (uint32).")
            alignment = value
    end_of_keys = walker.at
    table = []
    for _ in range(tensors):
        name = walker.string("a tensor's name")
        dims = walker.scalar(4, name[:80])
        if not 1 <= dims <= MAX_DIMS:
            raise GGUFRefused("gguf_invalid", f"Tensor {name[:80]} has {dims} dimensions (1 to {MAX_DIMS}).")
        shape = [walker.scalar(10, name[:80]) for _ in range(dims)]
        kind, offset = walker.scalar(4, name[:80]), walker.scalar(10, name[:80])
        try:
            quant = gguf.GGMLQuantizationType(kind)
            block, width = gguf.GGML_QUANT_SIZES[quant]
        except (ValueError, KeyError):
            raise GGUFRefused("gguf_invalid", f"Tensor {name[:80]} has an unknown type ({kind}).") from None
        count = 1
        for extent in shape:
            count *= extent
        if count == 0 or shape[0] % block or count > size * 8:
            raise GGUFRefused("gguf_invalid", f"Tensor {name[:80]}'s shape {shape} does not fit its type {quant.name} "
                                              "or the file.")
        table.append((name, shape, quant.name, offset, count // block * width))
    start = -(-walker.at // alignment) * alignment
    taken = 0
    for name, _, _, offset, length in sorted(table, key=lambda t: t[3]):
        if offset % alignment or offset < taken or start + offset + length > size:
            raise GGUFRefused("gguf_invalid", f"Tensor {name[:80]}'s data (offset {offset}, {length} bytes) lies "
                                              "outside the file, overlaps another's or is not aligned.")
        taken = offset + length
    return {"version": version, "keys": keys, "end_of_keys": end_of_keys,
            "tensors": [(name, shape, kind) for name, shape, kind, _, _ in table]}


def _field(reader, key: str) -> Any:
    field = reader.get_field(key)
    if field is None:
        return None
    try:
        return field.contents()
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


def describe(path: Path, size: int, bounds: Bounds, work: Path) -> dict[str, Any]:
    """The facts of the GGUF file whose first bytes are ``path`` (its real size: ``size``)."""
    import gguf

    data = path.read_bytes()
    checked = walk(data, size, bounds)
    header = work / "keys.gguf"  # the checked key-value part, with no tensors: what GGUFReader reads here
    header.write_bytes(data[:8] + struct.pack("<QQ", 0, checked["keys"]) + data[24:checked["end_of_keys"]])
    try:
        reader = gguf.GGUFReader(header)
    except (ValueError, IndexError, KeyError, OverflowError) as exc:
        raise GGUFRefused("gguf_invalid", f"gguf's reader refused the header ({type(exc).__name__}).") from None
    if len(reader.fields) != checked["keys"] + 3:  # its own three: version and the two counts
        raise GGUFRefused("gguf_invalid", "gguf's reader and the hub's check disagree on the header's keys.")
    architecture = _field(reader, "general.architecture")
    prefix = architecture if isinstance(architecture, str) else ""
    file_type = _field(reader, "general.file_type")
    parameters = sum(_product(shape) for _, shape, _ in checked["tensors"])
    tokens = reader.get_field("tokenizer.ggml.tokens")
    facts: dict[str, Any] = {
        "version": checked["version"], "architecture": architecture or None, "name": _field(reader, "general.name"),
        "context_length": _field(reader, f"{prefix}.context_length"),
        "embedding_length": _field(reader, f"{prefix}.embedding_length"),
        "block_count": _field(reader, f"{prefix}.block_count"),
        "file_type": file_type, "quantization": _quantization(file_type, checked["tensors"]),
        "parameters": parameters, "tensors": len(checked["tensors"]),
        "tokenizer_model": _field(reader, "tokenizer.ggml.model"),
        "vocabulary": len(tokens.data) if tokens is not None else None,
        "keys": sorted(k for k in reader.fields if not k.startswith("GGUF."))[:200],
    }
    template = _field(reader, "tokenizer.chat_template")
    if isinstance(template, str) and template:
        facts["chat_template"] = template[:TEMPLATE_CHARS]
        facts.update(_example(reader, template))
    return {k: v for k, v in facts.items() if v is not None}


def _product(shape: list[int]) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total


def _quantization(file_type: Any, tensors: list[tuple[str, list[int], str]]) -> str:
    """The file type's name (Q4_0, Q8_0, F16…), else the type holding most of the matrices' elements."""
    import gguf

    if isinstance(file_type, int):
        try:
            return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    counts: dict[str, int] = {}
    for _, shape, kind in tensors:
        if len(shape) >= 2:
            counts[kind] = counts.get(kind, 0) + _product(shape)
    return max(counts, key=counts.get) if counts else "unknown"


def _example(reader, template: str) -> dict[str, Any]:
    """The template rendered on an example conversation (or why it could not be)."""
    from hpcfair.generate.template import TemplateError, render_chat

    tokens = reader.get_field("tokenizer.ggml.tokens")

    def token(key: str) -> str:
        index = _field(reader, key)
        if tokens is None or not isinstance(index, int) or not 0 <= index < len(tokens.data):
            return ""
        return str(tokens.contents(index))

    try:
        text = render_chat(template, EXAMPLE, bos_token=token("tokenizer.ggml.bos_token_id"),
                           eos_token=token("tokenizer.ggml.eos_token_id"))
    except TemplateError as exc:
        return {"chat_template_error": exc.detail}
    return {"chat_template_example": text[:4096]}
