"""Generation models on the hub's side: which versions get one (a Hugging Face causal LM or text encoder-decoder
folder with a fast tokenizer: onnxruntime-genai builds its families, the general route the others), the build
job, and which version answers a generation request. Nothing here loads a model: the build runs in the
conversion sandbox (``hub.generation.jobs``), the generation in a worker's generation engine
(``hub.generation.engine``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
from django.conf import settings
from hpcfair.compute import CodedError
from hpcfair.convert.formats import hf_folders
from hpcfair.generate.families import DECODER, GENAI, precision_problem, route_of, supports
from hpcfair.generate.run import GenerateRequest

from hub.bounded import load_json
from hub.errors import STATUS, HubError
from hub.gateway.channel import stream
from hub.gateway.presence import NoWorker, reachable
from hub.gateway.protocol import no_worker
from hub.jobs.models import Job
from hub.jobs.quota import check_active_jobs
from hub.jobs.services import create_job
from hub.registry.files_access import require_files_of
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.registry.services import resolve_version_ref
from hub.storage import get_blob_store
from ontology.fields import BUILT_FORMATS

FORMAT = "onnx-genai"  # built by onnxruntime-genai, run by its generator
FORMAT_KV = "onnx-kv"  # the general route: hpcfair.generate.torch_export, run by hpcfair.generate.onnx_loop
FORMATS = (FORMAT, FORMAT_KV)
assert set(FORMATS) == BUILT_FORMATS
CONFIG_BYTES = 1 << 20  # a config.json larger than this is not read in the web process


def _config(version: Version, folder: str) -> dict[str, Any]:
    path = f"{folder}/config.json".lstrip("/")
    file = version.files.select_related("blob").filter(path=path).first()
    if file is None or file.size > CONFIG_BYTES:
        return {}
    try:
        with get_blob_store().open(file.blob.sha256) as body:
            config = load_json(body.read(CONFIG_BYTES), what=path)
    except (OSError, HubError):  # an unreadable config (or one nested past the bound) names no model
        return {}
    return config if isinstance(config, dict) else {}


def generation_folders(version: Version) -> list[str]:
    """The version's Hugging Face folders that hold a language model the hub builds for generation (with
    tokenizer.json)."""
    paths = [file.path for file in version.files.all()]
    return [folder for folder in hf_folders(paths)
            if f"{folder}/tokenizer.json".lstrip("/") in paths and supports(_config(version, folder))]


def is_generation_model(version: Version) -> bool:
    """Whether ``version`` is a generation model the hub built: its format and its build report are fields only
    the hub writes (``ontology.fields.BUILT_FORMATS``, the system field ``generation``), never an uploader."""
    return version.metadata.get("format") in FORMATS and isinstance(version.metadata.get("generation"), dict)


def on_version_published(sender, version: Version, user, **kwargs) -> None:
    """A new causal LM version gets its generation model built (besides its ONNX conversion)."""
    if version.artifact.kind != Artifact.Kind.MODEL or version.provenance.exists():
        return
    if settings.HUB_GENERATION_AUTO and generation_folders(version):
        request_build(version, user, auto=True)


def request_build(version: Version, user, *, folder: str | None = None, precision: str = "fp32",
                  auto: bool = False) -> Job:
    """Queue the build of ``version``'s generation model (``precision`` fp32, int8 or int4; fp16 is refused
    with its reason)."""
    folder = _folder(version, folder, generation_folders(version), "a text encoder-decoder such as T5 or BART")
    if problem := precision_problem(precision, route_of(_config(version, folder))):
        raise HubError(*problem)
    return create_job("generation", user, version=version,
                      params={"folder": folder, "precision": precision, "auto": auto}, limited=not auto)


def request_gguf(version: Version, user, *, folder: str | None = None, gguf_type: str = "q8_0") -> Job:
    """Queue the GGUF build of ``version``'s causal LM folder (``gguf_type``: ``hpcfair.generate.gguf_build``'s
    types), made by llama.cpp's own tools and published as a version converted from ``version``."""
    from hpcfair.generate.gguf_build import type_problem

    if problem := type_problem(gguf_type):
        raise HubError("invalid", problem, errors={"gguf_type": ["Unknown type."]})
    causal = [name for name in generation_folders(version) if route_of(_config(version, name)) in (GENAI, DECODER)]
    folder = _folder(version, folder, causal)
    return create_job("gguf", user, version=version, params={"folder": folder, "gguf_type": gguf_type},
                      limited=True)  # only a person asks for one


def _folder(version: Version, folder: str | None, folders: list[str], also: str = "") -> str:
    """``folder`` (default: the first) of ``folders``, ``version``'s language model folders; refused in words."""
    if not folders:
        raise HubError("unsupported_format", f"{version} has no Hugging Face causal language model folder that "
                                             "the hub can build (config.json of a causal LM such as Llama, Qwen2, "
                                             f"GPT-2{', or of ' + also if also else ''}, its weights and "
                                             "tokenizer.json).")
    if folder is None:
        return folders[0]
    if folder not in folders:
        raise HubError("invalid", f"{version} has no causal language model folder {folder!r}.")
    return folder


def gguf_file(version: Version) -> str:
    """The GGUF file llama.cpp serves for ``version`` (the first the hub described: ``hub.metadata.gguf``), or ""."""
    described = version.metadata.get("gguf") if version.metadata.get("format") == "gguf" else None
    return next(iter(described), "") if isinstance(described, dict) else ""


def gguf_models(visible) -> list[Version]:
    """The newest 1,000 live GGUF versions of the ``visible`` artifacts, served by llama.cpp."""
    return list(Version.objects.filter(artifact__in=visible, deleted_at__isnull=True, metadata__format="gguf",
                                       metadata__has_key="gguf").select_related("artifact__owner")
                .order_by("-created", "-id")[:1000])


def source_of_generation(version: Version) -> Version:
    """The uploaded version a generation model (or an ONNX conversion) was made from; else ``version``."""
    from hub.conversions.services import converted_from

    if is_generation_model(version):
        link = version.provenance.filter(relation=ProvenanceLink.Relation.DERIVED_FROM).select_related("target").first()
        return link.target if link else version
    return converted_from(version) or version


def generation_model(version: Version) -> Version:
    """The version that answers generation for ``version``: itself when it is a generation model, else its
    newest live full-precision generation build."""
    if is_generation_model(version) or gguf_file(version):
        return version  # a GGUF file is served as it is (hub.generation.engine: llama.cpp)
    version = source_of_generation(version)  # the ONNX conversion stands for its source here
    built = (Version.objects.filter(artifact_id=version.artifact_id, deleted_at__isnull=True,
                                    provenance__target=version,
                                    provenance__relation=ProvenanceLink.Relation.DERIVED_FROM,
                                    metadata__format__in=FORMATS, metadata__has_key="generation")
             .select_related("artifact__owner").order_by("-created", "-id"))
    for candidate in built:
        if candidate.metadata.get("generation", {}).get("precision") == "fp32" or len(built) == 1:
            return candidate
    if built:
        return built[0]
    raise _not_built(version)


def named(user, model: str) -> Version:
    """The version an OpenAI ``model`` names: a PID or ``owner/name@version`` as everywhere, and a bare
    ``owner/name`` as the version the artifact stands for (``@current``, its upload, whose full-precision build
    answers, as ``/v1/models`` lists it), not its newest version, which may be a precision copy."""
    model = model.strip()
    bare = "@" not in model and not model.lower().startswith("ark:")
    return resolve_version_ref(user, f"{model}@current" if bare else model)


def names_of_builds(builds: Iterable[Version]) -> dict[str, Version]:
    """The names people type for generation builds (newest first, ``provenance`` prefetched), as the README
    and ``/v1/models`` use them: ``owner/name`` for an artifact's newest full-precision build,
    ``owner/name@1`` (its source) for an older one, and the build's own label for a precision copy
    (``@1-genai-int4``), which nothing else names. Every build's own label still resolves."""
    names: dict[str, Version] = {}
    for build in builds:
        full = build.artifact.full_name
        sources = [link.target for link in build.provenance.all()
                   if link.relation == ProvenanceLink.Relation.DERIVED_FROM]
        if build.metadata.get("generation", {}).get("precision", "fp32") != "fp32" or not sources:
            names.setdefault(f"{full}@{build.label}", build)
        elif full not in names:
            names[full] = build
        else:
            names.setdefault(f"{full}@{sources[0].label}", build)
    return names


def _not_built(version: Version) -> HubError:
    job = version.jobs.filter(kind="generation").order_by("-created").first()
    if job is None:
        return HubError("not_runnable", f"{version} offers no text generation: it is not a causal language model "
                                        "the hub builds for generation (see the manual: /docs/guides/generation/).")
    if job.state == Job.State.FAILED:
        return HubError("not_runnable", f"{version}'s generation model could not be built: {job.error_detail}",
                        job=str(job.pk))
    return HubError("not_ready", f"{version}'s generation model is still being built (job {job.pk}, {job.state}); "
                                 f"`hpcfair jobs wait {job.pk}` returns when it has finished.", job=str(job.pk))


# --- running: the web side of a generation (the worker side is hub.generation.engine) -------------------


STREAMS_RETRY_S = 5
ANSWER_GRACE_S = 3.0  # past HUB_GENERATE_S: an engine is stopped 1 s past it (hub.gateway.engine.GRACE_S)


def hold_stream(user) -> Callable[[], None]:
    """Count one more generation of ``user``'s in progress, hub-wide (the cache every web process shares), or
    refuse it (429 ``too_many_generations`` with ``Retry-After``) past ``HUB_GENERATE_STREAMS``: a stream holds
    a web thread until its generation ends, so one person's streams must not take them all. Returns the
    release (idempotent); a count left by a killed process expires with the longest generation."""
    from django.core.cache import cache

    key = f"hub:generate:active:{user.pk}"
    cache.add(key, 0, timeout=int(settings.HUB_GENERATE_S) + 60)
    count = cache.incr(key)
    released = [False]

    def release() -> None:
        if not released[0]:
            released[0] = True
            try:
                cache.decr(key)
            except ValueError:  # expired meanwhile
                pass

    if count > settings.HUB_GENERATE_STREAMS:
        release()
        error = HubError("too_many_generations",
                         f"You have {settings.HUB_GENERATE_STREAMS} generations running already, the most one "
                         "person may run at once (HUB_GENERATE_STREAMS); wait for one to end, or send a file of "
                         "prompts as one job ('dataset').")
        error.wait = STREAMS_RETRY_S
        raise error
    return release


def stream_generation(version: Version, request: GenerateRequest, device: str = "cpu",
                      user=None) -> Iterator[dict[str, Any]]:
    """The pieces of ``request`` generated by ``version``'s generation model on a worker of ``device``, as
    dicts (``hpcfair.generate.Piece.to_dict``); the last has ``done``. Refusals before the first piece are
    ``HubError``s (no worker, a prompt too long, too many of ``user``'s at once…); after it, an
    ``{"error": …}`` piece ends the stream."""
    require_files_of(user, version)  # generation reads the model's files (hub.registry.files_access)
    model = generation_model(version)
    release = hold_stream(user) if user is not None and user.is_authenticated else (lambda: None)
    try:
        first, parts = _first_piece(model, request, device)
    except BaseException:
        release()
        raise
    return Held(_pieces(first, parts), release)


def _first_piece(model: Version, request: GenerateRequest, device: str) -> tuple[dict[str, Any], Iterator[bytes]]:
    files = [[file.path, file.blob.sha256, file.size] for file in model.files.select_related("blob")]
    gguf = gguf_file(model)
    files = [file for file in files if file[0] == gguf] if gguf else files  # llama.cpp reads that file only
    message = orjson.dumps({"files": files, "request": request.to_dict(), "seconds": settings.HUB_GENERATE_S,
                            "max_tokens": settings.HUB_GENERATE_MAX_TOKENS, **({"gguf": gguf} if gguf else {})})
    queue = f"generate-{device}"
    with reachable():
        try:
            # A little past the engine's deadline: its keeper stops it GRACE_S after and answers first.
            parts = stream(queue, message, settings.HUB_GENERATE_S + ANSWER_GRACE_S, _last,
                           grace=ANSWER_GRACE_S)
            first = next(parts)
        except NoWorker:
            raise no_worker(device) from None
        except TimeoutError:
            raise HubError("worker_timeout", "The generation engine did not answer in time; try again.") from None
    piece = orjson.loads(first)
    if "error" in piece:
        parts.close()
        raise HubError(piece["error"] if piece["error"] in STATUS else "internal_error", piece["detail"])
    return piece, parts


def _last(message: bytes) -> bool:
    return b'"done":true' in message or message.startswith(b'{"error"')


class Held:
    """The pieces of a generation that holds one of its person's places (``hold_stream``) until they end, are
    closed (the client went away) or are dropped unread."""

    def __init__(self, pieces: Iterator[dict[str, Any]], release: Callable[[], None]) -> None:
        self.pieces, self.release = pieces, release

    def __iter__(self) -> Held:
        return self

    def __next__(self) -> dict[str, Any]:
        try:
            return next(self.pieces)
        except BaseException:
            self.release()
            raise

    def close(self) -> None:
        self.pieces.close()  # type: ignore[attr-defined]
        self.release()

    __del__ = close


def _pieces(first: dict[str, Any], parts: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    yield first
    try:
        for part in parts:
            yield orjson.loads(part)
    except TimeoutError:
        yield {"error": "worker_timeout", "detail": "The generation engine stopped answering."}
    finally:
        parts.close()


def parse_request(data: Any) -> GenerateRequest:
    """A generation request from a JSON body, refused as ``invalid`` in words."""
    try:
        return GenerateRequest.parse(data, max_tokens=settings.HUB_GENERATE_MAX_TOKENS)
    except CodedError as exc:
        raise HubError(exc.code, exc.detail) from None


BATCH_SUFFIXES = (".txt", ".jsonl", ".ndjson")


def request_batch(version: Version, user, dataset_ref: str, file: str | None, options: dict[str, Any],
                  device: str = "cpu") -> Job:
    """Queue a job answering every prompt of a dataset's file (``.txt``: a line each; ``.jsonl``: a JSON
    object each) with ``version``'s generation model; the answers become a dataset version of yours."""
    check_active_jobs(user)
    model = generation_model(version)
    dataset = resolve_version_ref(user, dataset_ref)
    require_files_of(user, dataset)
    if dataset.artifact.kind != Artifact.Kind.DATASET:
        raise HubError("invalid", f"{dataset} is a {dataset.artifact.kind}, not a dataset of prompts.")
    paths = [f.path for f in dataset.files.all()]
    candidates = [p for p in paths if p.lower().endswith(BATCH_SUFFIXES)]
    if file is None and len(candidates) == 1:
        file = candidates[0]
    if file not in paths or not file.lower().endswith(BATCH_SUFFIXES):
        raise HubError("invalid", f"Name the prompts' file in 'dataset_file': {dataset} has "
                                  f"{', '.join(candidates) or 'no .txt or .jsonl file'}.")
    try:
        GenerateRequest.parse({"prompt": "x", **options}, max_tokens=settings.HUB_GENERATE_MAX_TOKENS)
    except CodedError as exc:
        raise HubError(exc.code, exc.detail) from None
    return create_job("generate", user, version=version, device=device, limited=True, params={
        "model": model.pk, "dataset": {"version_id": dataset.pk, "file": file}, "options": options})
