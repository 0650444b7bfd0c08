"""Conversion and optimisation requests: which files, which job, and the automatic conversion of every
new model version. The work itself runs in workers (``hub.conversions.jobs``); nothing here opens a model."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from hpcfair.convert import families
from hpcfair.convert.formats import (
    ARCHIVE_SUFFIXES,
    BOOSTER_HEAD,
    ZIP_TAIL,
    archive_format,
    booster_of,
    hf_folders,
    in_folder,
    looks_like_model,
    maybe_booster,
    zip_format_from_tail,
)

from hub.errors import HubError
from hub.jobs.models import Job
from hub.jobs.services import create_job
from hub.registry.models import Artifact, File, ProvenanceLink, Version
from hub.storage import StorageUnavailable, get_blob_store
from ontology.fields import BUILT_FORMATS

SAMPLE_INPUT_NAMES = ("sample_inputs.npz", "sample_inputs.npy", "sample_inputs.csv", "sample_inputs.parquet",
                      "test_data.npz", "test_data.npy", "test_data.csv", "test_data.parquet")


def model_files(version: Version) -> list[File]:
    """A version's model files; a Hugging Face folder counts once, by its config.json (the worker fetches
    the whole folder)."""
    files = list(version.files.all())
    folders = hf_folders([file.path for file in files])
    configs = {f"{folder}/config.json".lstrip("/") for folder in folders}
    return [file for file in files if file.path in configs
            or ((looks_like_model(file.path) or _booster_inside(file) or _model_archive(file))
                and not in_folder(file.path, folders))]


def _booster_inside(file: File) -> bool:
    """A .json/.txt file whose first bytes are an XGBoost or LightGBM model's (``model.json`` as XGBoost's
    documentation names it); bytes only, nothing is loaded."""
    if not maybe_booster(file.path):
        return False
    try:
        with get_blob_store().open(file.blob_id, 0, min(BOOSTER_HEAD, file.size)) as head:
            return booster_of(head.read()) is not None
    except (FileNotFoundError, StorageUnavailable):
        return False


TAR_HEAD = 16 * 1024 * 1024  # a tar's first members are listed from this many bytes (decompressed)


def _model_archive(file: File) -> bool:
    """An archive (.zip, .tar, .tar.gz) whose member names are a SavedModel's or a Hugging Face folder's,
    whatever it is called: a zip's names from its central directory (its last bytes), a tar's from the headers
    in its first ``TAR_HEAD`` bytes. Names only; nothing is extracted (the worker's ``detect`` reads it whole)."""
    import tarfile

    if not file.path.lower().endswith(ARCHIVE_SUFFIXES) or looks_like_model(file.path):
        return False
    store = get_blob_store()
    try:
        if file.path.lower().endswith(".zip"):
            start = max(0, file.size - ZIP_TAIL)
            with store.open(file.blob_id, start, file.size - start) as tail:
                return zip_format_from_tail(tail.read()) is not None
        names = []
        with store.open(file.blob_id, 0, min(file.size, TAR_HEAD)) as head, \
                tarfile.open(fileobj=head, mode="r|*") as archive:
            for member in archive:
                names.append(member.name)
                if archive_format(names):
                    return True
    except (FileNotFoundError, StorageUnavailable, tarfile.TarError, EOFError, OSError):
        return False
    return False


def onnx_files(version: Version) -> list[str]:
    return [f.path for f in version.files.all() if f.path.lower().endswith(".onnx")]


def sample_inputs_path(version: Version) -> str | None:
    """The uploader's sample inputs: metadata ``sample_inputs`` (a path in the version) or a file by its
    conventional name."""
    paths = {file.path for file in version.files.all()}
    named = version.metadata.get("sample_inputs") if isinstance(version.metadata, dict) else None
    if isinstance(named, str) and named in paths:
        return named
    return next((p for p in paths if p.rsplit("/", 1)[-1] in SAMPLE_INPUT_NAMES), None)


def conversions_of(version: Version) -> QuerySet[Version]:
    """The live ONNX versions converted from ``version`` in its own artifact, newest first: where the hub puts
    them (``hub.conversions.jobs``; a GGUF build, ``hub.generation.jobs``, is converted from it too, and is no
    ONNX model). A version elsewhere that says it was converted from this one is its publisher's claim; it may be
    private or anything at all, so it never runs or shows in this one's place."""
    return (Version.objects.filter(artifact_id=version.artifact_id, deleted_at__isnull=True, provenance__target=version,
                                   provenance__relation=ProvenanceLink.Relation.CONVERTED_FROM,
                                   metadata__format="onnx")
            .select_related("artifact__owner").order_by("-created", "-id"))


def converted_from(version: Version) -> Version | None:
    """The version of the same artifact the hub converted ``version`` from, if it is such a conversion."""
    link = (version.provenance.filter(relation=ProvenanceLink.Relation.CONVERTED_FROM,
                                      target__artifact_id=version.artifact_id).select_related("target").first())
    return link.target if link else None


def is_conversion_result(version: Version) -> bool:
    return version.provenance.filter(relation=ProvenanceLink.Relation.CONVERTED_FROM).exists()


def on_version_published(sender, version: Version, user, **kwargs) -> None:
    """Every new model version with a model file is converted (or, for ONNX files, verified). A generation
    build (``-genai``, ``-kv``) is not: the generation check that made it verified it, and the plain ONNX
    checker cannot read its ``com.microsoft`` operators (issue 55)."""
    if version.artifact.kind != Artifact.Kind.MODEL or is_conversion_result(version) or built_for_generation(version):
        return
    if model_files(version):
        request_conversion(version, user, auto=True)


def built_for_generation(version: Version) -> bool:
    """Whether the hub built ``version`` for text generation (a format and a report only the hub writes)."""
    return version.metadata.get("format") in BUILT_FORMATS and isinstance(version.metadata.get("generation"), dict)


def request_conversion(version: Version, user, *, files: list[str] | None = None, opset: int | None = None,
                       atol: float | None = None, rtol: float | None = None, memory_mb: int | None = None,
                       auto: bool = False) -> Job:
    """Queue the conversion of a version's model files (an ensemble when there are several)."""
    candidates = model_files(version)
    if files:
        by_path = {file.path: file for file in version.files.all()}
        unknown = [path for path in files if path not in by_path]
        if unknown:
            raise HubError("invalid", f"{version} has no file {unknown[0]!r}.", errors={"files": ["Unknown path."]})
        configs = {f"{folder}/config.json".lstrip("/") for folder in hf_folders(list(by_path))}
        not_models = [path for path in files if not looks_like_model(path) and path not in configs
                      and not path.lower().endswith((".json", ".txt", ".zip", ".tar", ".tar.gz", ".tgz"))]
        if not_models:
            raise HubError("unsupported_format", f"{not_models[0]!r} is not a model file the hub can convert.")
        candidates = [by_path[path] for path in files]
    if not candidates:
        raise HubError("unsupported_format", f"{version} has no model file the hub converts ({families.known()}).")
    opset = opset or settings.HUB_CONVERT_OPSET
    if not 7 <= opset <= 21:
        raise HubError("invalid", "opset must be between 7 and 21.", errors={"opset": ["Out of range."]})
    only_onnx = all(file.path.lower().endswith(".onnx") for file in candidates)
    params: dict[str, Any] = {"files": [file.path for file in candidates], "opset": opset, "auto": auto,
                              "sample_inputs": sample_inputs_path(version)}
    if atol is not None:
        params["atol"] = atol
    if rtol is not None:
        params["rtol"] = rtol
    if memory_mb is not None:
        params["memory_mb"] = memory_mb
    kind = "verify" if only_onnx else "convert"
    return create_job(kind, user, version=version, params=params, limited=not auto)


def request_optimization(version: Version, user, *, file: str | None = None, quantize: bool = True) -> Job:
    """Queue ONNX Runtime graph optimisation (and dynamic int8 quantisation) of an ONNX file."""
    found = onnx_files(version)
    if not found:
        raise no_onnx_to_optimise(version)
    if file is None and len(found) == 1:
        file = found[0]
    if file not in found:
        raise HubError("unsupported_format", f"{version} has no ONNX file {file!r} to optimise; its ONNX files are "
                       f"{', '.join(found[:5])}." if file else f"{version} has {len(found)} ONNX files "
                       f"({', '.join(found[:5])}); name one in 'file'.")
    return create_job("optimize", user, version=version, params={"file": file, "quantize": quantize},
                      limited=True)  # only a person asks for one


def no_onnx_to_optimise(version: Version) -> HubError:
    """Why a version without an ONNX file cannot be optimised, and where its ONNX model is: its conversion (a
    version of its own, e.g. ``1-onnx``), the conversion still running or failed, or none asked for yet."""
    start = f"{version} has no ONNX file to optimise"
    made = conversions_of(version).first()
    if made is not None:
        return HubError("unsupported_format", f"{start}; its ONNX conversion is version {made.label}: optimise that "
                                              f"(POST …/versions/{made.label}/optimize).", conversion=made.label)
    job = version.jobs.filter(kind="convert").order_by("-created").first()
    if job is None:
        return HubError("unsupported_format", f"{start}: convert it first (POST …/versions/{version.label}/convert), "
                                              "then optimise the version the conversion makes.")
    if job.state == Job.State.FAILED:
        return HubError("unsupported_format", f"{start}, and its conversion to ONNX failed ({job.error_code}): "
                                              "there is no ONNX model of it to optimise.", job=str(job.pk))
    return HubError("unsupported_format", f"{start}; its conversion to ONNX (job {job.pk}) has not finished: "
                                          "optimise the version it makes when it has.", job=str(job.pk))
