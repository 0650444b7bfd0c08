"""Moving version files between the object store and a job's private directory, and a job's own inputs
staged in the object store (``staging/jobs/<job id>/``), where every web node and worker sees them."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from hpcfair.compute import CodedError
from hpcfair.convert.formats import hf_folders, in_folder

from hub.metadata.derive import CARD_NAMES
from hub.registry import references
from hub.registry.models import File, Version
from hub.registry.uploads import StagedFile, sha256_of_file
from hub.storage import StorageUnavailable, get_blob_store
from hub.storage import place as placement


def fetch(version: Version, path: str, dest_dir: Path, *, link: bool = False) -> Path:
    """Copy ``path`` of ``version`` out of the object store into ``dest_dir`` (under its base name). With
    ``link``, for a reader in this process tree only (no sandbox), a store on this machine's disk gives a
    symbolic link to its blob instead (blobs are never changed in place). A name taken already in ``dest_dir``
    is refused (``invalid``): nothing is ever written over a laid-out file, which may be a blob."""
    file = version.files.select_related("blob").get(path=path)
    dest = dest_dir / Path(path).name
    store = get_blob_store()
    if os.path.lexists(dest):
        raise CodedError("invalid", f"Two files of {version} are named {dest.name} ({path} and another); give "
                                    "each file a name of its own in the version.")
    if file.location:
        if link and not references.is_s3(file.location):
            dest.symlink_to(references.resolved(file.location))  # read in place, never copied
            return dest
        return place_file(file, dest)
    if link and (local := store.local_path(file.blob_id)) is not None and local.exists():
        dest.symlink_to(local)
        return dest
    return _placed(file.blob_id, dest, link=False)


def place_file(file: File, target: Path) -> Path:
    """A version's file as ``target``: its blob (``place``), or a referenced file's bytes copied from where they
    live (for a reader that sees only its own folder, such as a sandbox)."""
    if not file.location:
        return place(file.blob_id, target)
    try:
        return placement.place(target, opener=lambda: references.open_bytes(file.location), link=False)
    except FileExistsError:
        raise CodedError("invalid", f"Two files of this job would be laid out as {target.name}.") from None
    except Exception as exc:  # noqa: BLE001 - gone, unreadable, refused now
        if isinstance(exc, CodedError):
            raise
        raise CodedError("reference_unreadable", f"{file.location} cannot be read ({type(exc).__name__}).") from None


def input_path(file: File, target: Path) -> Path:
    """A Slurm job's input file: a path reference is handed over as its own path, without a copy (the compute
    nodes mount the declared roots, as the hub does); anything else is placed as ``target``."""
    if file.location and not references.is_s3(file.location):
        if file.location_changed:
            raise CodedError("reference_unreadable", f"{file.location} changed on "
                                                     f"{file.location_changed.date().isoformat()}; a job does not "
                                                     "run on data that differs from its record.")
        return references.resolved(file.location)
    return place_file(file, target)


def staged(path: Path, name: str) -> StagedFile:
    """A local file, hashed, ready to become a file ``name`` of a new version."""
    return StagedFile(path=name, staged=path, sha256=sha256_of_file(path), size=path.stat().st_size)


def place(blob_id: str, target: Path) -> Path:
    """A blob as ``target`` (a Slurm job's folder): a hard link where the store is a local filesystem on the
    same device, else a copy (the job folder must be on a filesystem the compute nodes see); never written
    over an existing file (``hub.storage.place``): a path taken already is refused (``invalid``)."""
    return _placed(blob_id, target, link=True)


def _placed(blob_id: str, target: Path, *, link: bool) -> Path:
    store = get_blob_store()
    try:
        return placement.place(target, local=store.local_path(blob_id), opener=lambda: store.open(blob_id), link=link)
    except FileExistsError:
        raise CodedError("invalid", f"Two files of this job would be laid out as {target.name}; give each file a "
                                    "name of its own.") from None
    except (FileNotFoundError, StorageUnavailable):
        raise CodedError("storage_unavailable", "A file of this job could not be read from the object store; try "
                                                "again, and tell the hub's administrators if it lasts.") from None


def place_model(step: dict, folder: Path) -> Path:
    """A step's ONNX file (``hub.gateway.protocol.ModelRef.wire``) placed in ``folder`` under its own name, with
    the data files its weights name (ONNX external data) beside it, from its version's files
    (``step["beside"]``); a name that leaves the folder or is not a file of the version is refused
    (``model_load_failed``)."""
    import onnx
    from hpcfair import external_data

    folder.mkdir(parents=True, exist_ok=True)
    target = place(step["sha256"], folder / Path(step.get("path") or "model.onnx").name)
    try:
        graph = onnx.load(str(target), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - a damaged file
        raise CodedError("model_load_failed", f"The model file cannot be read as ONNX: {str(exc)[:200]}")
    names = {entry[0]: entry[1] for entry in step.get("beside") or []}
    for location, blob_id in external_data.data_files(graph, names, target.name).items():
        (folder / location).parent.mkdir(parents=True, exist_ok=True)
        place(blob_id, folder / location)
    return target


def fetch_data_files(version: Version, path: str, local: Path) -> list[Path]:
    """The files of ``version`` that its ONNX file ``path`` (fetched as ``local``) keeps its weights in (ONNX
    external data), fetched beside ``local`` under the names its graph gives them. A location outside its
    folder or naming no file of the version fetches nothing: whoever loads the model refuses it."""
    import onnx
    from hpcfair import external_data

    try:
        graph = onnx.load(str(local), load_external_data=False)
        wanted = external_data.data_files(graph, {f.path: f.path for f in version.files.all()}, path)
    except Exception:  # noqa: BLE001 - an unreadable file or a bad location: the loader says which
        return []
    fetched = []
    for location, member in wanted.items():
        (local.parent / location).parent.mkdir(parents=True, exist_ok=True)
        fetched.append(fetch(version, member, (local.parent / location).parent))
    return fetched


def stage_input(job_id: uuid.UUID | str, name: str, write) -> None:
    """Stage a job's input file ``name`` in the object store: ``write(path)`` writes it to a local temporary
    file first (removed at once). The node that runs the job, any node, reads it with ``staged_input``."""
    with tempfile.TemporaryDirectory(prefix="hpcfair-stage-") as tmp:
        local = Path(tmp) / name
        write(local)
        try:
            get_blob_store().put_staged(f"jobs/{job_id}/{name}", local)
        except StorageUnavailable as exc:
            raise CodedError("storage_unavailable", f"The object store could not take this job's inputs: {exc}")


def staged_input(job_id: uuid.UUID | str, name: str, dest_dir: Path) -> Path:
    """A job's staged input ``name`` copied into ``dest_dir``; ``gone`` if the collector removed it."""
    try:
        return get_blob_store().fetch_staged(f"jobs/{job_id}/{name}", dest_dir / name)
    except FileNotFoundError:
        raise CodedError("gone", "The inputs of this job are no longer staged; send the request again.")
    except StorageUnavailable as exc:
        raise CodedError("storage_unavailable", f"This job's inputs could not be read from the object store: {exc}")


def drop_staged_inputs(job_id: uuid.UUID | str) -> None:
    """Remove what a job staged (done, failed or never dispatched); the collector removes what this misses."""
    try:
        get_blob_store().remove_staged(f"jobs/{job_id}/")
    except StorageUnavailable:
        pass


def source_cards(source: Version, workdir: Path, taken: set[str]) -> list[StagedFile]:
    """The source's model card (README.md and the like at its root), carried into its ONNX version: what the
    model is for, how it was trained and its limits hold for the conversion too (issue 40, point 6)."""
    folder = workdir / "source-card"
    cards = []
    for file in source.files.all():
        if "/" not in file.path and file.path.lower() in CARD_NAMES and file.path not in taken:
            folder.mkdir(exist_ok=True)
            cards.append(staged(fetch(source, file.path, folder), file.path))
    return cards


def fetch_model(source: Version, path: str, dest: Path) -> tuple[Path, str]:
    """The model ``path`` names, fetched into ``dest``, and the name of its ONNX file: a Hugging Face
    folder's config.json brings its whole folder (converted to ``<folder>/model.onnx``)."""
    dest.mkdir(parents=True)
    paths = [file.path for file in source.files.all()]
    folder, _, name = path.rpartition("/")
    if name == "config.json" and folder in hf_folders(paths):
        local = dest / (Path(folder).name or "model")
        for member in paths:
            if in_folder(member, [folder]):
                relative = member[len(folder) + 1:] if folder else member
                (local / relative).parent.mkdir(parents=True, exist_ok=True)
                fetch(source, member, (local / relative).parent)
        return local, f"{folder}/model.onnx".lstrip("/")
    local = fetch(source, path, dest)
    if path.lower().endswith(".onnx"):  # an ONNX file brings the data files its weights name
        fetch_data_files(source, path, local)
    return local, str(Path(path).with_suffix(".onnx")) if not path.lower().endswith(".onnx") else path
