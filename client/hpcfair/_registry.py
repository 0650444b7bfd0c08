"""Registry I/O for ``modelAPI``: a config's models as hub versions (resolved, or published as private copies
to run), their ONNX versions (converted on the hub when needed), files through the local cache, uploads,
downloads, and models and datasets loaded on this machine."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcfair import arrays as tensors
from hpcfair._sources import NAME_RE, ModelSource, version_ref
from hpcfair.client import HubClient, Remote
from hpcfair.config import Config
from hpcfair.errors import ConfigError, ConflictError, HubError, InvalidMetadataError, JobError, NotFoundError

RUN_COPY_LICENSE = "LicenseRef-not-stated"


@dataclass
class Dataset:
    """A dataset version on this machine: its record, its files (by path), its arrays and Croissant."""

    info: dict[str, Any]
    files: dict[str, Path]
    client: HubClient = field(repr=False)

    @property
    def pid(self) -> str:
        return self.info["pid"]

    @property
    def metadata(self) -> dict[str, Any]:
        return self.info.get("metadata") or {}

    def arrays(self) -> dict[str, Any]:
        """The numeric files (.npy, .npz, .json, .csv, .tsv, .txt) as arrays, keyed by file (and member)."""
        found: dict[str, Any] = {}
        for path, local in self.files.items():
            if local.suffix.lower() not in tensors.FORMATS:
                continue
            data = tensors.read_inputs(local, key=path)
            if isinstance(data, dict):
                found.update({f"{path}:{name}" if len(self.files) > 1 else name: value for name, value in data.items()})
            else:
                found[path] = data
        return found

    def croissant(self) -> dict[str, Any]:
        """The version's Croissant JSON-LD (load it with ``mlcroissant`` for record-level access)."""
        return self.client.export(self.info, "croissant").json()


ORCID_LIKE = re.compile(r"^(https?://)?(orcid\.org/)?[0-9]{4}-[0-9X-]+$", re.IGNORECASE)
CREATORS_HINT = ("Creators go in --creator 'Name, ORCID' (repeatable; the ORCID iD is optional) on the command "
                 "line, creators=[...] in api.upload, or a 'creators:' list in the metadata file or in the card's "
                 "YAML front matter (creators: [{name: Ada Lovelace, orcid: 0000-0002-1825-0097}]).")


def parse_creator(value: str | dict[str, Any]) -> dict[str, Any]:
    """``"Ada Lovelace, 0000-0002-1825-0097"`` -> {name, orcid}; ``"Lovelace, Ada"`` (no ORCID iD after the
    last comma) is a name as written. The hub checks the ORCID iD's check digit."""
    if isinstance(value, dict):
        return value
    name, comma, tail = str(value).rpartition(",")
    if comma and ORCID_LIKE.match(tail.strip()) and name.strip():
        return {"name": name.strip(), "orcid": tail.strip()}
    if not str(value).strip():
        raise ConfigError("a creator needs a name: 'Name' or 'Name, ORCID'", key="creators")
    return {"name": str(value).strip()}


def upload(client: HubClient, config: Config | None, *, name: str | None, files: list[str | Path] | None,
           metadata: dict[str, Any] | str | Path | None, kind: str, visibility: str, version: str,
           creators: list[str | dict[str, Any]] | None = None, references: list[str] | None = None,
           fetches: list[str] | None = None) -> dict[str, Any]:
    """``modelAPI.upload``: what the arguments say, completed from the config when there is one. ``creators``
    ("Name, ORCID" or {name, orcid, affiliation}) win over the metadata's and the card's. ``references`` (paths
    under a root the hub declares, or s3:// URLs: the bytes stay there) and ``fetches`` (URLs the hub copies from)
    are files the hub reads itself, named by their last part."""
    base = Path.cwd()
    if config is not None:
        task, base = config.task, config.base
        name = name or (config.names("model_name") or [None])[0]
        files = files or task.files or config.names("model_file")
        metadata = metadata if metadata is not None else task.metadata
        kind, visibility, version = task.kind, task.visibility or visibility, task.version or version
    remote = {source.rstrip("/").rsplit("/", 1)[-1]: Remote(kind, source)
              for kind, sources in (("reference", references), ("fetch", fetches)) for source in sources or []}
    if not name or not (files or remote):
        raise ConfigError("an upload needs a name (model_name) and files (task_args.files or model_file)",
                          key="task_args.files")
    named: dict[str, Any] = version_files([Path(f) if Path(f).is_absolute() else base / f for f in files or []])
    named |= remote
    meta, card = read_metadata(metadata, base)
    named |= {"README.md": card} if card else {}  # a card given as metadata wins over a folder's README.md
    if creators:
        meta["creators"] = [parse_creator(item) for item in creators]
    try:
        return client.publish(name, named, meta, kind=kind, visibility=visibility, version=version)
    except InvalidMetadataError as exc:
        if "creators" not in (exc.body.get("errors") or {}):
            raise
        raise InvalidMetadataError(f"{exc.message} {CREATORS_HINT}", code=exc.code, status=exc.status,
                                   request_id=exc.request_id, body=exc.body) from None


SKIPPED_IN_FOLDERS = (".git", ".DS_Store")


def version_files(sources: list[Path]) -> dict[str, Path]:
    """{path in the version: local file}. A file is named by its base name; a folder gives every file under
    it at its path relative to the folder (a Hugging Face model folder keeps ``1_Pooling/config.json``),
    following symlinked files (a Hugging Face cache snapshot is made of them) and skipping ``.git/`` and
    ``.DS_Store``. Two sources that would land on one path are an error, not a silent overwrite."""
    named: dict[str, Path] = {}
    for source in sources:
        if source.is_dir():
            found = {path.relative_to(source).as_posix(): path for path in sorted(_files_under(source))}
            if not found:
                raise ConfigError(f"the folder {source} holds no files", key="task_args.files")
        elif source.is_file():
            found = {source.name: source}
        else:
            raise ConfigError(f"no file or folder {source}", key="task_args.files")
        for path, local in found.items():
            if path in named and named[path].resolve() != local.resolve():
                raise ConfigError(f"{named[path]} and {local} would both be '{path}' in the version: rename one, "
                                  "or upload their folder", key="task_args.files")
            named[path] = local
    return named


def _files_under(folder: Path):
    for root, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if name not in SKIPPED_IN_FOLDERS]
        for name in names:
            if name not in SKIPPED_IN_FOLDERS and (Path(root) / name).is_file():
                yield Path(root) / name


def download_config(client: HubClient, config: Config) -> list[Path]:
    """``task: download``: the models named in ``model_file`` into ``out_args.export_dir``."""
    refs = config.names("model_file") or config.names("model_name")
    if not refs:
        raise config.error("model_args.model_file", "missing: the PID or owner/name[@version] to download")
    folder = config.path(config.args.out_args.export_dir or ".")
    return [path for ref in refs for path in client.download(ref, folder, config.task.files)]


def with_data_files(client: HubClient, version: dict[str, Any], item: dict[str, Any], path: Path) -> Path:
    """The cached ONNX file ``path`` of ``item``, or, when its weights live in data files of its version (ONNX
    external data), a folder of the cache holding it and those files under the names its graph gives them
    (each fetched into the cache, linked or copied there). A name that leaves the ONNX file's folder or is
    not a file of the version raises ``model_load_failed``."""
    try:
        import onnx
    except ImportError:  # without onnx the graph cannot be read here; ONNX Runtime says what is missing
        return path
    import hashlib
    import json

    from hpcfair import external_data
    from hpcfair.compute import CodedError

    files = {entry["path"]: entry for entry in version["files"]}
    try:
        wanted = external_data.data_files(onnx.load(str(path), load_external_data=False), files, item["path"])
    except CodedError as exc:
        raise HubError(exc.detail, code=exc.code)
    if not wanted:
        return path
    label = hashlib.sha256(json.dumps(sorted((k, v["sha256"]) for k, v in wanted.items())).encode()).hexdigest()
    folder = client.cache.root / "with-data" / f"{item['sha256'][:24]}-{label[:16]}"
    target = folder / Path(item["path"]).name
    for name, entry in [(target.name, item), *wanted.items()]:
        destination = folder / name
        if destination.exists():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        blob = client.cached(entry)
        try:
            os.link(blob, destination)
        except OSError:
            shutil.copyfile(blob, destination)
    return target


def load_model(client: HubClient, ref: str, *, file: str | None = None, original: bool = False, threads: int = 0,
               trust_pickle: bool = False, _key: str = "model") -> Any:
    """An ONNX Runtime session for a hub model (its ONNX conversion; ``file`` picks one ONNX file of a version
    holding several) or a local ``.onnx`` file; with ``original=True`` the uploaded model in its own framework
    (pickles only with ``trust_pickle``: loading one runs the code inside it)."""
    local = Path(ref).expanduser()
    if local.is_file():
        if local.suffix.lower() != ".onnx":
            raise HubError(f"{_key}: {local.name} is not ONNX; convert it first (task: conversion)",
                           code="not_runnable")
        path = local
    else:
        info = client.resolve(ref)
        if original:
            return load_original(client, info, trust_pickle)
        version = onnx_version(client, info, None)
        item = onnx_item(version, file)
        path = with_data_files(client, version, item, client.cached(item))
    try:
        import onnxruntime as ort
    except ImportError:
        raise HubError("running models here needs ONNX Runtime: pip install 'hpcfair[onnx]'", code="missing_extra")
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load_original(client: HubClient, info: dict[str, Any], trust_pickle: bool) -> Any:
    """The uploaded model file of ``info`` loaded by its own framework (see ``load_model``)."""
    from hpcfair.convert.families import named
    from hpcfair.convert.formats import SNIFFED_SUFFIXES, detect, looks_like_model

    item = next((f for f in info["files"] if looks_like_model(f["path"])), None)
    if item is None:
        raise NotFoundError(f"{info['artifact']}@{info['version']} has no model file.", code="not_found")
    path = named_copy(client, item)
    fmt = detect(path)
    if path.suffix.lower() in SNIFFED_SUFFIXES:  # e.g. decoder.ckpt: frameworks go by the suffix
        renamed = path.with_name(path.stem + named(fmt, path.suffix))
        if not renamed.exists():
            shutil.copyfile(path, renamed)
        path = renamed
    if fmt == "torchscript":
        import torch

        return torch.jit.load(str(path), map_location="cpu")
    if fmt == "torch-export":
        import torch

        return torch.export.load(str(path))
    if fmt in ("keras", "keras-h5"):
        import keras

        return keras.models.load_model(str(path), compile=False)
    if fmt == "onnx":
        return load_model(client, str(path))
    if fmt == "skops":
        import skops.io

        return skops.io.load(str(path), trusted=skops.io.get_untrusted_types(file=str(path)) if trust_pickle
                             else None)
    if fmt in ("pickle", "joblib") and trust_pickle:
        import joblib

        return joblib.load(path)  # noqa: S301 - the caller said they trust it
    raise HubError(f"{item['path']} is a {fmt} file that runs code when loaded; pass trust_pickle=True if you "
                   "trust its author, or use the ONNX conversion (original=False).", code="untrusted_format")


def load_dataset(client: HubClient, ref: str) -> Dataset:
    """A dataset version's files on this machine (cached), with ``arrays()`` and ``croissant()``."""
    info = client.resolve(ref)
    return Dataset(info=info, files={f["path"]: named_copy(client, f) for f in info["files"]}, client=client)


def export(client: HubClient, item: dict[str, Any], dest: Path) -> Path:
    """A hub file (an entry of a version's ``files``) copied to ``dest`` through the cache."""
    client.cached(item)
    return client.cache.copy_out(item["sha256"], dest)


def named_copy(client: HubClient, item: dict[str, Any]) -> Path:
    """A cached file under its own name (readers go by suffix): ``<cache>/named/<sha256>/<path>``."""
    target = client.cache.root / "named" / item["sha256"] / item["path"]
    if not target.is_file():
        client.cached(item)
        client.cache.copy_out(item["sha256"], target)
    return target


def hub_version(client: HubClient, config: Config, source: ModelSource, *, private: bool = True,
                metadata: dict[str, Any] | str | None = None, inputs: list[dict[str, Any]] | None = None,
                sample: Path | None = None) -> dict[str, Any]:
    """The hub version of a source: resolved, or the local file (or folder: a Hugging Face model) published as
    a model of yours, with the config's declared ``inputs`` and ``sample`` data for its conversion."""
    if source.ref:
        try:
            return client.resolve(source.ref)
        except NotFoundError as exc:
            hint = re.search(r" Did you mean \S+\?", exc.message)  # the hub's nearest name, for a typo
            raise config.error(source.key, f"no file {config.path(source.ref)}, and the hub has no model "
                                           f"{source.ref} that you can see{'.' + hint.group(0) if hint else ''}")
        except HubError as exc:
            if exc.code != "unreachable":
                raise
            if Path(source.ref).suffix:  # it looks like a file name (ckpt/encoder.ckpt): the file is what is missing
                raise config.error(source.key, f"no file {config.path(source.ref)}; as a hub reference it could "
                                               f"not be looked up: {exc.message}")
            # owner/name: the hub is what is missing, not the config: `unreachable` (issue 55), the local path too
            raise type(exc)(f"{exc.message} ({source.ref} is no file here either: {config.path(source.ref)})",
                            code="unreachable") from None
    name = NAME_RE.sub("-", source.name).strip("-.") or "model"
    me = client.me()
    meta, card = (read_metadata(metadata, config.base) if metadata
                  else (run_copy_metadata(source, me.get("name") or me.get("username") or ""), None))
    files = version_files([source.local]) | ({"README.md": card} if card else {})
    if inputs and not meta.get("inputs"):
        meta["inputs"] = inputs  # what the config declares: the hub's conversion needs no signature_required
    if sample is not None and not meta.get("sample_inputs"):
        files[sample.name] = sample
        meta["sample_inputs"] = sample.name
    try:
        return client.publish(name, files, meta, visibility="private" if private else "public",
                              reuse_duplicate=True, owner=me.get("username"))
    except ConflictError as exc:
        if exc.code != "visibility_mismatch":
            raise
        public = exc.body["artifact"]
        raise config.error(source.key, f"model_name {name!r} is your public model {public}: name the hub "
                                       f"version instead ({public}@VERSION) or choose another model_name")


def runnable(client: HubClient, config: Config, sources: list[ModelSource]) -> list[dict[str, Any]]:
    """The ONNX versions that run for the sources (converted on the hub when needed)."""
    return [onnx_version(client, hub_version(client, config, source), None) for source in sources]


def jobs_on(client: HubClient, kind: str, pid: str) -> list[dict[str, Any]]:
    """The person's jobs of ``kind`` on the version ``pid``, newest first."""
    return [job for job in client.jobs(kind=kind) if (job.get("version") or {}).get("pid") == pid]


def onnx_version(client: HubClient, info: dict[str, Any], opset: int | None) -> dict[str, Any]:
    """The version itself when it is ONNX, else its conversion (waiting for the hub's conversion job,
    or asking for one)."""
    meta = info.get("metadata") or {}
    if any(f["path"].lower().endswith(".onnx") for f in info["files"]):
        if opset in (None, meta.get("opset")):
            return info
        recorded = meta.get("opset")
        raise HubError(f"{version_ref(info)} is an ONNX model at opset {recorded}, and the config asks for opset "
                       f"{opset} (onnx_version). The hub converts models to ONNX but does not re-export an ONNX "
                       f"file at another opset: set onnx_version to {recorded} or leave it out, or name the "
                       "version of the model in its own framework's format.", code="opset_unsupported")
    for link in info.get("derivatives") or []:
        if link["relation"] == "converted_from":
            candidate = client.resolve(link["version_pid"])
            made = candidate.get("metadata") or {}
            if made.get("format") == "onnx" and opset in (None, made.get("opset")):  # not a GGUF build
                return candidate
    jobs = [job for job in jobs_on(client, "convert", info["pid"])
            if opset in (None, (job.get("params") or {}).get("opset"))]
    if jobs and jobs[0]["state"] == "failed":  # the same file would fail the same way: say why instead
        failed = jobs[0]
        raise JobError(f"{version_ref(info)} has no ONNX version: the hub's conversion failed "
                       f"({failed.get('error_code')}): {failed.get('error_detail')} Publish a version that fixes "
                       f"this, or ask for a new conversion (modelAPI().client.convert({info['pid']!r})).",
                       code=failed.get("error_code") or "conversion_failed", body=failed)
    running = [job for job in jobs if job["state"] not in ("failed", "cancelled")]
    job = running[0] if running else None
    if job is None:
        try:
            job = client.convert(info["pid"], opset=opset)
        except ConflictError as exc:
            raise HubError(f"{info['artifact']}@{info['version']} cannot be converted: {exc}", code=exc.code)
    done = client.wait(job)
    published = (done.get("result") or {}).get("pid")
    if not published:  # a job that published nothing (an ONNX version's verification): say so, not a KeyError
        raise JobError(f"{version_ref(info)}: the hub's {done.get('kind', 'conversion')} job ended without an ONNX "
                       "version to run.", code="conversion_failed", body=done)
    return client.resolve(published)


def onnx_item(info: dict[str, Any], file: str | None = None) -> dict[str, Any]:
    """The ONNX file of a version record: ``file`` (a path in the version, ``.onnx`` optional, as the gateway
    reads its ``file`` option), or its only one."""
    found = [f for f in info["files"] if f["path"].lower().endswith(".onnx")]
    names = ", ".join(f["path"] for f in found)
    if file:
        chosen = [f for f in found if f["path"] in (file, str(Path(file).with_suffix(".onnx")))]
        if not chosen:
            raise NotFoundError(f"{version_ref(info)} has no ONNX file {file!r}; it has {names or 'none'}.",
                                code="not_found")
        return chosen[0]
    if len(found) != 1:
        raise HubError(f"{version_ref(info)} holds {len(found)} ONNX models ({names}); name one: file=NAME in "
                       "api.load_model, --file NAME on the command line, onnx_file: NAME in a config.",
                       code="ambiguous_model")
    return found[0]


def onnx_inputs(info: dict[str, Any], file: str | None = None) -> list[dict[str, Any]] | None:
    """The input signature the hub recorded for a version's ONNX file (``file`` of an ensemble: its member's)."""
    meta = info.get("metadata") or {}
    member = (meta.get("members") or {}).get(onnx_item(info, file)["path"]) if file else None
    return (member if isinstance(member, dict) else meta).get("inputs")


def run_copy_metadata(source: ModelSource, creator: str) -> dict[str, Any]:
    """Metadata of a private copy published only to run a local file on the hub."""
    return {"title": source.name, "description": f"{source.local.name}, published by the hpcfair client to run on "
                                                 "the hub.", "creators": [{"name": creator or "unknown"}],
            "license": RUN_COPY_LICENSE, "task": "unspecified"}


def read_metadata(value: dict[str, Any] | str | Path | None, base: Path) -> tuple[dict[str, Any], Path | None]:
    """(metadata, model card file): a dict as is; a YAML/JSON file read; a README.md sent as the card (the
    version's README.md, where the hub reads cards). Another Markdown file is refused: sent as README.md it
    would be a file of the version under a name it does not have."""
    import json

    import yaml

    if value is None or isinstance(value, dict):
        return dict(value or {}), None
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file():
        raise ConfigError(f"no metadata file {path}", key="task_args.metadata")
    if path.suffix.lower() == ".md":
        if path.name.lower() != "readme.md":
            raise ConfigError(f"{path.name} is Markdown: a Markdown metadata file is a model card, which the hub "
                              "reads from the version's README.md, and it is published as that file. Name it "
                              f"README.md, give the metadata as YAML or JSON, or add {path.name} to the files",
                              key="task_args.metadata")
        return {}, path
    try:
        data = json.loads(path.read_text()) if path.suffix.lower() == ".json" else yaml.safe_load(path.read_text())
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path.name} does not parse: {exc}", key="task_args.metadata")
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name} must hold a mapping of field: value", key="task_args.metadata")
    return data, None
