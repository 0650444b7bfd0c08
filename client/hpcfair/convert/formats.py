"""Which framework wrote a model file: by extension, checked against the file's content."""

from __future__ import annotations

import re
import tarfile
import zipfile
from pathlib import Path

from hpcfair import archives
from hpcfair.convert import families
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.families import booster_of, torch_zip_format

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
# .json and .txt are models when their name says so (xgboost.json, model.lgb.txt) or their first bytes do
# (``booster_of``: the hub reads them for any .json/.txt of a model version); most are not models.
BOOSTER_WORDS = ("xgb", "xgboost", "lgb", "lgbm", "lightgbm", "booster")
HF_WEIGHTS = families.HF_WEIGHTS
SNIFFED_SUFFIXES = {".ckpt", ".bin", ".model", ""}  # names that say nothing of the framework
SNIFFED_MODELS = {".ckpt"}  # of those, the ones a model version's file is taken to be a model by
# A config's backend -> the frameworks (Family.framework) its files may be; every family the converter takes has a name.
BACKENDS = {"pt": "pytorch", "pytorch": "pytorch", "torch": "pytorch", "tf": ("tensorflow", "keras"),
            "tensorflow": ("tensorflow", "keras"), "keras": ("keras", "tensorflow"), "sklearn": "scikit-learn",
            "scikit-learn": "scikit-learn", "xgboost": "xgboost", "lightgbm": "lightgbm", "huggingface": "pytorch",
            "transformers": "pytorch", "onnx": "onnx"}
BACKEND_FORMATS = {"huggingface": {"huggingface"}, "transformers": {"huggingface"}}  # a folder, not any .pt


def sniff(path: Path) -> str | None:
    """The family of a file whose name does not tell (``model.ckpt``), from its first bytes and, for a
    zip, its member names; nothing is unpickled. None when it is none of ours."""
    with open(path, "rb") as handle:
        head = handle.read(families.HEAD)
    if found := families.by_head(head):
        return found.name
    if not head.startswith(b"PK"):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return None
    found = families.by_zip(names)
    return found.name if found else None


# The globals a torch.save file of tensors only names (a state_dict, or a checkpoint dict holding state_dicts,
# optimizer state and numbers); any other (torch.nn.modules.linear.Linear, __main__.Net) is a pickled object.
TENSOR_PICKLE_MODULES = {"collections", "torch._utils", "torch", "torch.storage", "builtins", "__builtin__",
                         "_codecs", "copyreg", "numpy", "numpy.core.multiarray", "numpy._core.multiarray"}
PICKLE_SCAN_MAX = 16 * 1024 * 1024
SAVE_INSTEAD = ("save the model itself: torch.jit.save(torch.jit.trace(model, example), "
                "'model.pt') (TorchScript), torch.export.save(torch.export.export(model, (example,)), "
                "'model.pt2'), or torch.onnx.export(model, (example,), 'model.onnx').")


def torch_save_error(path: Path, names: list[str]) -> ConversionError:
    """Why a plain torch.save file does not convert: ``weights_only`` for a state_dict (tensors in dicts), else
    ``unsupported_format`` naming the pickled class; either way what to upload instead. The pickle's opcodes
    are read, never executed."""
    from hpcfair.convert.pickles import scan_bytes

    pickled = next(n for n in names if n == "data.pkl" or n.endswith("/data.pkl"))
    try:
        with zipfile.ZipFile(path) as archive:
            data = archive.read(pickled) if archive.getinfo(pickled).file_size <= PICKLE_SCAN_MAX else None
    except Exception:  # noqa: BLE001 - a damaged zip member (zlib, CRC): the message without the detail
        data = None
    report = scan_bytes(data) if data is not None else None  # its opcodes, read: nothing is unpickled or run
    classes = report.globals if report is not None and report.complete else None  # else: damaged or too large
    if classes is None:
        return ConversionError("unsupported_format", f"{path.name} is a plain torch.save file (weights or a "
                                                     "pickled module), which needs the Python code that defines "
                                                     f"the model: load it in your code and {SAVE_INSTEAD}")
    if path.suffix.lower() == ".ckpt" and data is not None and b"pytorch-lightning_version" in data:
        return ConversionError("weights_only", f"{path.name} is a PyTorch Lightning checkpoint: weights and training "
                                               "state without the LightningModule's code, which the hub cannot "
                                               "run. Load it with YourModule.load_from_checkpoint(...) and save "
                                               "model.to_torchscript(file_path='model.pt') (or "
                                               "model.to_onnx('model.onnx', example)), then upload that file.")
    objects = [name for name in classes if name.rpartition(".")[0] not in TENSOR_PICKLE_MODULES]
    if not objects:
        return ConversionError("weights_only", f"{path.name} is a state_dict saved with torch.save: weights without "
                                               "the model's code, which the hub cannot run. Load the weights into "
                                               f"your model (model.load_state_dict(...)) and {SAVE_INSTEAD}")
    return ConversionError("unsupported_format", f"{path.name} is a whole module pickled with torch.save "
                                                 f"({objects[0]}): loading it needs that Python class, which the hub "
                                                 f"does not import or run. Load it where that "
                                                 f"class is defined and {SAVE_INSTEAD}")


BOOSTER_HEAD = families.HEAD  # bytes that tell a booster's save_model file


def sniff_booster(path: Path) -> str | None:
    """xgboost or lightgbm when the file starts as their ``save_model`` files do (``booster_of``)."""
    with open(path, "rb") as handle:
        return booster_of(handle.read(BOOSTER_HEAD))


def maybe_booster(name: str) -> bool:
    """Whether a file's name leaves it open that it is a booster (.json, .txt): its first bytes tell."""
    return Path(name.lower()).suffix in (".json", ".txt")


def check_backend(fmt: str, backend: str | None, name: str) -> None:
    """A config's ``backend`` (``BACKENDS``: pt, tf, keras, sklearn, xgboost, lightgbm, huggingface, onnx…) must
    match what the file is."""
    if not backend or backend not in BACKENDS:
        return
    wanted = BACKENDS[backend]
    found = families.FAMILIES[fmt]
    if found.framework not in (wanted if isinstance(wanted, tuple) else (wanted,)) or (
            backend in BACKEND_FORMATS and fmt not in BACKEND_FORMATS[backend]):
        raise ConversionError("backend_mismatch", f"{name} is {found.label}, not a {backend} model as backend says.")


def hf_folders(paths: list[str]) -> list[str]:
    """The folders ("" for the top) among a version's file paths that hold a Hugging Face model: a
    config.json beside model.safetensors or pytorch_model.bin (or their shard index)."""
    by_folder: dict[str, set[str]] = {}
    for path in paths:
        folder, _, name = path.rpartition("/")
        by_folder.setdefault(folder, set()).add(name)
    return sorted(f for f, names in by_folder.items() if "config.json" in names and names & set(HF_WEIGHTS))


def archive_format(names: list[str]) -> str | None:
    """The family (``families.by_members``: savedmodel, huggingface) an archive with these member names holds,
    or None. Names only: nothing is extracted."""
    found = families.by_members(Path(name).name for name in names)
    return found.name if found else None


ZIP_TAIL = 1024 * 1024  # a zip's central directory is read from this many last bytes


def zip_names_from_tail(tail: bytes) -> list[str] | None:
    """A zip's member names from the last bytes of the file (``ZIP_TAIL``), when they hold its whole central
    directory (the hub reads a blob's tail, not the blob); None when they do not, or it is no zip."""
    import io

    try:
        with zipfile.ZipFile(io.BytesIO(tail)) as archive:  # zipfile allows data missing before the directory
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def zip_format_from_tail(tail: bytes) -> str | None:
    """``archive_format`` of a zip from its tail (``zip_names_from_tail``); None when that does not tell."""
    names = zip_names_from_tail(tail)
    return archive_format(names) if names is not None else None


def in_folder(path: str, folders: list[str]) -> bool:
    return any(folder == "" or path.startswith(folder + "/") for folder in folders)


def looks_like_model(name: str) -> bool:
    """Cheap check on a file name (the web process uses it; nothing is opened)."""
    lower = name.lower()
    base = Path(lower)
    return base.suffix in families.suffixes() | SNIFFED_MODELS or (
        lower.endswith(ARCHIVE_SUFFIXES) and "savedmodel" in lower.replace("_", "").replace("-", "")
    ) or (base.suffix in (".json", ".txt") and any(word in base.stem for word in BOOSTER_WORDS))


# tensor names that only Hugging Face transformers' models write (BERT, GPT-2, Llama, T5, ViT, CLIP ...)
HF_TENSOR_NAMES = re.compile(r"(^|\.)(encoder\.layer\.\d+\.|layers\.\d+\.(self_attn|mlp|attention)\.|h\.\d+\.attn\.|"
                             r"embeddings\.(word|patch|position)_embeddings|embed_tokens|wte\.weight|"
                             r"block\.\d+\.layer\.\d+\.|text_model\.|vision_model\.)")


def weights_only(path: Path) -> ConversionError:
    """Why a lone .safetensors file does not convert, with the way out that fits what its tensor names say it
    is: a Hugging Face transformer (upload it with its config.json) or the state_dict of a model whose
    architecture is Python code (save the model itself)."""
    from hpcfair.convert.tensors import NotSafetensors, header

    try:
        names = [name for name in header(path) if name != "__metadata__"]
    except (NotSafetensors, OSError) as exc:
        return ConversionError("corrupt_file", f"{path.name} is not a readable safetensors file (its header is "
                                               "damaged or it is another kind of file).", cause=exc)
    start = f"{path.name} holds weights only ({len(names)} tensors), not the architecture that uses them; the hub " \
            "reads its parameter count and dtypes but cannot run it."
    if any(HF_TENSOR_NAMES.search(name) for name in names):
        return ConversionError("weights_only", f"{start} Its tensor names are a Hugging Face transformer's: upload "
                                               "it with the config.json (and tokenizer or preprocessor files) that "
                                               "save_pretrained writes beside it, as a folder or an archive of one, "
                                               "to get an ONNX model.")
    example = next(iter(names), "")[:60]
    return ConversionError("weights_only", f"{start} Its tensors ({example!r} ...) are a model's state_dict, whose "
                                           "architecture is Python code the hub does not run: load them into your "
                                           "model and save the model itself, with torch.export.save (.pt2) or "
                                           "torch.jit.trace + torch.jit.save (.pt), or export it with "
                                           "torch.onnx.export (.onnx).")


def detect(path: Path) -> str:
    """The family name of ``path`` (``families.FAMILIES``); an unknown or mislabelled file is an error."""
    lower = path.name.lower()
    suffix = path.suffix.lower()
    if path.is_dir():
        if found := families.by_members(p.name for p in path.iterdir() if p.is_file()):
            return found.name
        if (path / "model_index.json").is_file() or any(path.glob("diffusion_pytorch_model*")):
            raise ConversionError("unsupported_format", f"{path.name}/ is a diffusers model (a pipeline or one of its "
                                                        "UNet/VAE parts), which the hub does not load. Export each "
                                                        "part with torch.export in your code (torch.export.save("
                                                        "torch.export.export(unet, example_inputs), 'unet.pt2')) and "
                                                        "upload the .pt2 files.")
        raise ConversionError("unsupported_format", f"{path.name}/ is a folder without saved_model.pb (TensorFlow) "
                                                    "or config.json with model.safetensors/pytorch_model.bin "
                                                    "(Hugging Face).")
    if lower.endswith(ARCHIVE_SUFFIXES):
        if found := archive_format(archive_names(path)):
            return found
        raise ConversionError("unsupported_format", f"{path.name} is an archive without a saved_model.pb "
                                                    "(TensorFlow) or a config.json with model.safetensors/"
                                                    "pytorch_model.bin (Hugging Face) inside.")
    if suffix in SNIFFED_SUFFIXES:
        found = sniff(path)
        if found is None and zipfile.is_zipfile(path) and torch_zip_format(names := _require_zip(path, "")):
            raise torch_save_error(path, names)  # sniff tells every other PyTorch zip
        if found is None:
            raise ConversionError("unsupported_format", f"{path.name}: neither its name nor its content says which "
                                                        f"framework wrote it; the hub converts {families.known()}.")
        return found
    if suffix == ".cbm":
        raise ConversionError("unsupported_format", f"{path.name} is a CatBoost model, which the hub does not load; "
                                                    "CatBoost writes ONNX itself: model.save_model('model.onnx', "
                                                    "format='onnx'), then upload the ONNX file.")
    for found in families.by_suffix(suffix):  # one family per suffix; its check reads the content
        if found.check:
            globals()[found.check](path, found)
        return found.name
    raise ConversionError(
        "unsupported_format",
        f"{path.name}: the hub converts {families.known()}; this file's type is not one of them.",
    )


# --- the families' checks (``Family.check``): the file its suffix named is really of that family -------------


def check_zip(path: Path, family: families.Family) -> None:
    """A zip (torch.export program, Keras v3 file), else ``corrupt_file``."""
    _require_zip(path, f"a {family.label} file")


def check_torchscript(path: Path, family: families.Family) -> None:
    """A TorchScript zip; a plain torch.save file or another zip is refused with what to save instead."""
    names = _require_zip(path, "a TorchScript file (torch.jit.save)")
    found = torch_zip_format(names)
    if found == "pytorch":
        raise torch_save_error(path, names)
    if found != family.name:
        raise ConversionError("unsupported_format", f"{path.name} is a zip but not a TorchScript file "
                                                    f"(torch.jit.save): load the model in your code "
                                                    f"and {SAVE_INSTEAD}")


def check_hdf5(path: Path, family: families.Family) -> None:
    """An HDF5 file, else ``corrupt_file``."""
    with open(path, "rb") as handle:
        if not family.head(handle.read(families.HEAD)):
            raise ConversionError("corrupt_file", f"{path.name} is not an HDF5 file.")


def check_booster(path: Path, family: families.Family) -> None:
    """The booster's own save_model file (its first bytes say so), else ``unsupported_format``."""
    if sniff_booster(path) != family.name:
        raise ConversionError("unsupported_format", f"{path.name} is not a model file the hub converts: a "
                                                    f"{path.suffix.lower()} model must be an XGBoost (booster."
                                                    "save_model('m.json' or 'm.ubj')) or LightGBM (booster."
                                                    "save_model('m.txt')) model.")


def check_weights(path: Path, family: families.Family) -> None:
    """Weights alone do not convert: ``weights_only`` says what to upload instead."""
    raise weights_only(path)


def _require_zip(path: Path, what: str) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError):
        raise ConversionError("corrupt_file", f"{path.name} is not {what}: the file is damaged or of another kind.")


def archive_names(path: Path) -> list[str]:
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                return archive.namelist()
        with tarfile.open(path) as archive:
            return archive.getnames()
    except (zipfile.BadZipFile, tarfile.TarError, OSError):
        raise ConversionError("corrupt_file", f"{path.name} is not a readable archive.")


def extract_archive(path: Path, dest: Path, max_inflated: int = archives.DEFAULT_MAX_INFLATED,
                    marker: str = "saved_model.pb") -> Path:
    """Unpack safely (no absolute paths, no '..', no links, no more than ``max_inflated`` bytes added by
    decompression) and return the directory holding ``marker`` (the SavedModel's, or a Hugging Face
    folder's config.json)."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    if archives.unsafe_member(info):
                        raise ConversionError("corrupt_file", f"{path.name} holds an unsafe path {info.filename!r}.")
                archives.check_zip(archive, max_inflated, path.name)
                archive.extractall(dest)  # noqa: S202 - members checked above
        else:
            with tarfile.open(path) as archive:
                members = archive.getmembers()  # a compressed tar's headers: read in a stream, not kept
                if sum(member.size for member in members) > path.stat().st_size + max_inflated:
                    raise archives.ArchiveTooLarge(f"{path.name} unpacks to more than "
                                                   f"{max_inflated / 2**20:.0f} MiB beyond its own size.")
                archive.extractall(dest, filter="data")
    except archives.ArchiveTooLarge as exc:
        raise ConversionError("archive_too_large", str(exc))
    found = next((p.parent for p in sorted(dest.rglob(marker), key=lambda p: len(p.parts))), None)
    if found is None:
        raise ConversionError("unsupported_format", f"{path.name} has no {marker}.")
    return found

