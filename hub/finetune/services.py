"""Asking for a fine-tune: everything that can be checked without loading the model is checked here, before
the job exists: the hyper-parameters, that the base model's family can be trained, that the requester may
read the dataset, and that the columns the config names are in the dataset's schema (read from the files'
headers only). The web process never opens a model file."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any, BinaryIO

from hpcfair.convert.formats import ZIP_TAIL, looks_like_model, torch_zip_format, zip_names_from_tail
from hpcfair.finetune import FinetuneError, Hyper, data
from hpcfair.finetune.errors import untrainable
from hpcfair.finetune.run import TRAINABLE, format_by_name

from hub.errors import HubError
from hub.jobs.models import Job
from hub.jobs.quota import check_active_jobs
from hub.jobs.services import create_job
from hub.metadata import scientific
from hub.registry.files_access import require_files_of
from hub.registry.models import NAME_RE, Artifact, File, Version
from hub.registry.services import check_visibility, covers, resolve_version_ref
from hub.storage import StorageUnavailable, get_blob_store

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _coded(exc: FinetuneError) -> HubError:
    return HubError(exc.code if exc.code in _CODES else "invalid", exc.detail)


_CODES = {"invalid_config", "unknown_column", "not_trainable", "unsupported_dataset", "unreadable_dataset",
          "ambiguous_dataset", "dataset_too_small", "unknown_file", "non_numeric_feature", "shape_mismatch"}


def hf_folder(version: Version) -> str | None:
    """The folder of a version holding a Hugging Face model (config.json beside its weights), '' for the top."""
    paths = {f.path for f in version.files.all()}
    for path in sorted(paths, key=len):
        if PurePosixPath(path).name == "config.json":
            folder = str(PurePosixPath(path).parent).removeprefix(".")
            if any(f"{folder}/{w}".lstrip("/") in paths for w in HF_WEIGHTS):
                return folder
    return None


def file_format(file: File) -> str | None:
    """The format fine-tuning would see in ``file``: its name's (``format_by_name``), except that a .pt/.pth
    that is a plain torch.save zip (told by its member names, read from the blob's tail) is ``pytorch``;
    nothing is unpickled."""
    fmt = format_by_name(file.path)
    if fmt != "torchscript":
        return fmt
    start = max(0, file.size - ZIP_TAIL)
    try:
        with get_blob_store().open(file.blob_id, start, file.size - start) as stream:
            names = zip_names_from_tail(stream.read())
    except (StorageUnavailable, OSError):
        return fmt  # the job reads the file itself
    return "pytorch" if names is not None and torch_zip_format(names) == "pytorch" else fmt


def stored_torch_save(version: Version, paths: Iterable[str]) -> str | None:
    """The path of the version's one .pt/.pth file when publishing already found it a plain torch.save file
    (its derived metadata ``format`` is ``pytorch``: ``hub.metadata.derive``), as ``file_format`` would call it:
    its blob need not be read again. ``pytorch`` also names a file whose zip's members could not
    be read from its 1 MiB tail (a legacy torch.save pickle; rarely, an archive of more than ~10,000 members),
    which is then not offered either. None where the metadata does not settle it: a format given by hand,
    several .pt/.pth files (which one was read), or ``torchscript``, which versions published before the hub
    read the zip's members were given for every .pt/.pth file."""
    metadata = version.metadata or {}
    if metadata.get("format") != "pytorch" or "format" not in (metadata.get("derived") or []):
        return None
    torch_files = [path for path in paths if path.lower().endswith((".pt", ".pth"))]
    return torch_files[0] if len(torch_files) == 1 else None


def model_source(version: Version, file: str | None) -> dict[str, str]:
    """What the job trains: {"file": path} or {"folder": path}; a model that cannot be trained is refused
    with the reason and what to upload instead. A .pt/.pth file's blob is read only where the version's
    metadata does not settle its format (``stored_torch_save``)."""
    files = {f.path: f for f in version.files.all()}
    if file:
        if file not in files:
            raise HubError("invalid", f"{version} has no file {file!r}.", errors={"file": ["Unknown path."]})
        candidates = [file]
    else:
        folder = hf_folder(version)
        if folder is not None:
            return {"folder": folder}
        candidates = [p for p in files if looks_like_model(p)]
    torch_save = stored_torch_save(version, files)
    found = {p: "pytorch" if p == torch_save else file_format(files[p]) for p in candidates}
    trainable = [p for p in candidates if found[p] in (*TRAINABLE, None)]  # None: the job sniffs it
    if not trainable:
        shown = candidates[0] if candidates else f"{version} (no model file)"
        raise _coded(untrainable(shown, found.get(shown) or "this file type"))
    if len(trainable) > 1:
        raise HubError("invalid", f"{version} has several model files ({', '.join(trainable[:5])}); name one in "
                                  "'file'.", errors={"file": ["Required when the version has several models."]})
    return {"file": trainable[0]}


def finetune_offered(version: Version) -> bool:
    """Whether the page offers the fine-tune form: where ``model_source`` (the rule the request applies)
    finds a model to train without being told which file."""
    try:
        model_source(version, None)
    except HubError:
        return False
    return True


class _BlobReader(io.RawIOBase):
    """A seekable view of a stored blob that reads only the ranges asked for (an NPZ's directory and array
    headers, a Parquet footer), from any storage backend."""

    def __init__(self, file: File) -> None:
        self.sha256, self.size, self.position = file.blob_id, file.size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        length = min(len(buffer), self.size - self.position)
        if length <= 0:
            return 0
        with get_blob_store().open(self.sha256, self.position, length) as stream:
            chunk = stream.read(length)
        buffer[:len(chunk)] = chunk
        self.position += len(chunk)
        return len(chunk)


def _opener(version: Version):
    files = {f.path: f for f in version.files.select_related("blob")}

    def open_(path: str) -> BinaryIO:
        return io.BufferedReader(_BlobReader(files[path]), buffer_size=64 * 1024)

    return open_


def dataset_files(dataset: Version, hyper: Hyper, data_file: str | None) -> tuple[str, list[str], dict[str, str]]:
    """(the file to read, the dataset files the job needs, their columns), with the config's columns checked
    against them."""
    paths = [f.path for f in dataset.files.all()]
    try:
        chosen = data.choose(paths, data_file)
        if data.is_scientific(chosen):  # its variables, as the sandbox read them when the version was published
            source, columns = data.scientific_schema(chosen, scientific.unit_of(dataset.metadata or {}, chosen))
            data.check(columns, hyper.target, hyper.features, hyper.text)
            data.variables_for(source, hyper.target, hyper.features)
            return chosen, [p for p in paths if p == chosen or p.startswith(chosen + "/")], columns
        source, columns = data.schema(chosen, _opener(dataset), paths)
        data.check(columns, hyper.target, hyper.features, hyper.text)
    except FinetuneError as exc:
        raise _coded(exc)
    except StorageUnavailable:
        raise HubError("storage_unavailable", "The object store is unavailable; the dataset could not be checked. "
                                              "Try again.")
    return chosen, sorted({chosen, source.path}), columns


def output_name(user, base: Version, name: str | None) -> str:
    """The result's artifact in the requester's namespace: ``name`` or ``<base>-finetuned``; an existing one
    must be a model."""
    name = name or f"{base.artifact.name}-finetuned"[:100]
    if not re.match(NAME_RE, name):
        raise HubError("invalid", f"{name!r} is not a valid artifact name (letters, digits, . _ -).",
                       errors={"name": ["Invalid name."]})
    existing = Artifact.objects.live().filter(owner=user, name=name).first()
    if existing is not None and existing.kind != Artifact.Kind.MODEL:
        raise HubError("already_exists", f"{user.username}/{name} is a {existing.kind}; name another model in 'name'.")
    return name


def request_finetune(base: Version, user, body: dict[str, Any]) -> Job:
    """Check a fine-tune of ``base`` and queue it; ``body`` is the API's (or the form's) request (only they call
    it, so the person's job quota is checked here)."""
    check_active_jobs(user)
    if base.artifact.kind != Artifact.Kind.MODEL:
        raise HubError("invalid", f"{base.artifact.full_name} is a {base.artifact.kind}; fine-tune a model.")
    try:
        hyper = Hyper.from_dict(body)
    except FinetuneError as exc:
        raise _coded(exc)
    source = model_source(base, body.get("file"))
    if "folder" in source and not hyper.text:
        raise HubError("invalid_config", "task_args.text: name the dataset's text column for a text model.")
    dataset = resolve_version_ref(user, str(body.get("dataset") or ""))
    require_files_of(user, dataset)  # the job reads the dataset's files (hub.registry.files_access)
    if dataset.artifact.kind != Artifact.Kind.DATASET:
        raise HubError("invalid", f"{dataset.artifact.full_name} is a {dataset.artifact.kind}, not a dataset.",
                       errors={"dataset": ["Not a dataset."]})
    chosen, files, columns = dataset_files(dataset, hyper, body.get("data_file"))
    name = output_name(user, base, body.get("name"))
    if body.get("visibility"):  # as merges do
        check_visibility(user, body["visibility"])
        if not covers(base.artifact, body["visibility"], user.pk):
            raise HubError("permission_denied", f"A model fine-tuned from {base.artifact.full_name}, which is "
                                                f"{base.artifact.visibility}, carries its weights: it cannot be "
                                                f"{body['visibility']}: it stays private (or as closed as its base).")
    device = body.get("device") or "cpu"
    params = {"source": source, "hyper": hyper.to_dict(), "dataset": {"version_id": dataset.pk, "files": files},
              "data_file": chosen,
              "output": {"name": name, "visibility": body.get("visibility") or Artifact.Visibility.PRIVATE},
              "columns": list(columns)[:100]}
    return create_job("finetune", user, version=base, params=params, device=device, limited=True,
                      account=body.get("account") or None)
