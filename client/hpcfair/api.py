"""``modelAPI``: the papers' calls, each driven by a task config (a YAML file or a dict).

```python
from hpcfair import modelAPI
api = modelAPI()                      # endpoint and token: arguments, HPCFAIR_* or ~/.hpcfair
api.conversion("conversion.yaml")     # local checkpoints -> verified ONNX files (export_file)
api.collaborate("collaboration.yaml") # a chain of models on the hub's gateway -> export_file
api.container("container.yaml")
```

Wherever a config names a model file, a PID (``ark:/…``) or ``owner/name[@version]`` works too. Local
model files that must run on the hub are first published as private models of yours (named after
``model_name``); identical files are sent once and reused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcfair import _containers, _conversion, _generation, _inference, _registry
from hpcfair._inference import run_chain
from hpcfair._registry import Dataset
from hpcfair.client import HubClient
from hpcfair.config import load

__all__ = ["TASK_METHODS", "Dataset", "modelAPI", "run_chain"]

Cfg = str | Path | dict[str, Any]  # a task config: a YAML file, or the same as a dict (or a loaded Config)


class modelAPI:  # noqa: N801 - the papers' name
    """Every hub task from a config: ``conversion``, ``inference``, ``collaborate``, ``container``,
    ``optimize``, ``finetune``, ``generate``, ``search``, ``upload``, ``download``, ``load_model``,
    ``load_dataset``, ``run``.

    A façade: each method loads its config and hands it, with the REST client, to the module of its task
    family (``_conversion``, ``_inference``, ``_containers``, ``_registry``). A new task is a method here, a
    module beside them and a line in ``TASK_METHODS``."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, client: HubClient | None = None,
                 cache: str | Path | None = None) -> None:
        self.client = client or HubClient(endpoint, token, cache=cache)

    def run(self, cfg: Cfg) -> Any:
        """Do what ``general_args.task`` says."""
        config = load(cfg)
        task = config.args.general_args.task
        if task == "inference" and config.args.general_args.tag == "collaboration":
            return self.collaborate(config)
        return getattr(self, TASK_METHODS[task])(config)

    # --- conversion and optimisation (_conversion) -------------------------------------------------

    def conversion(self, cfg: Cfg) -> list[dict[str, Any]]:
        """Convert each model to a verified ONNX file at ``out_args.export_file`` (one report per model).

        Local files convert on this machine (needs ``pip install 'hpcfair[convert]'``); hub models, and
        local files with ``general_args.upload: true``, convert on the hub."""
        return _conversion.convert(self.client, load(cfg))

    def optimize(self, cfg: Cfg) -> list[dict[str, Any]]:
        """Graph-optimise (and int8-quantise) each ONNX model; files go beside ``export_file`` (or the config)."""
        return _conversion.optimize(self.client, load(cfg))

    # --- knowledge transfer (hpcfair.finetune) ------------------------------------------------------

    def finetune(self, cfg: Cfg) -> dict[str, Any]:
        """Fine-tune a model on a dataset (``task: finetune``): a hub job that publishes a new model version
        of yours, or ``device: local``; see ``hpcfair.finetune.task``."""
        from hpcfair.finetune import task

        return task.run(self.client, load(cfg))

    # --- inference and chains (_inference) ---------------------------------------------------------

    def inference(self, cfg: Cfg) -> dict[str, Any]:
        """Run the model(s) on ``task_args.input`` (a chain when there are several); the outputs go to
        ``out_args.export_file`` and are returned."""
        return _inference.run_models(self.client, load(cfg))

    def collaborate(self, cfg: Cfg) -> dict[str, Any]:
        """Run a chain of models (outputs of one into the inputs of the next, by position or
        ``task_args.links``); with ``task_args.merge: true`` merge them into one ONNX model on the hub."""
        return _inference.collaborate(self.client, load(cfg))

    # --- text generation (_generation) ------------------------------------------------------------

    def generate(self, cfg: Cfg, on_text: Any = None) -> dict[str, Any]:
        """Generate text with a language model on the hub (``task: generate``): ``task_args.prompt``,
        ``messages`` (a chat) or ``input`` (a file of prompts), with ``max_new_tokens``, ``temperature``,
        ``top_p``, ``top_k``, ``seed``, ``stop``; ``on_text`` gets each piece as it streams in."""
        return _generation.generate(self.client, load(cfg), on_text)

    # --- containers (_containers) ------------------------------------------------------------------

    def container(self, cfg: Cfg) -> dict[str, Any]:
        """Build an MLCube's image offline and run it with podman/docker (the papers' Listing 4).

        A project: ``task_args.work_dir`` is a folder with an ``mlcube.yaml`` (or a hub project,
        owner/name[@version], fetched into a folder of that name); its ``tasks`` (default: all) run in
        order with the folder mounted at ``volume``, and their output goes to ``export_file``.
        A model: ``model_args`` names it (file, PID or owner/name); its cube comes from the hub (made
        there when missing) into ``work_dir``, and ``infer`` runs on ``task_args.input`` into
        ``export_file``. ``device: gpu`` runs the GPU cube and needs an NVIDIA GPU here."""
        return _containers.container(self.client, load(cfg))

    # --- finding, publishing, fetching (_registry) -------------------------------------------------

    def search(self, query: str | Path | dict[str, Any] = "", /, **filters: Any) -> list[dict[str, Any]]:
        """Artifacts matching words and facet filters (``framework="onnx"``, ``kind="model"``, …); a config
        with ``task: search`` works too (``task_args.query``, ``task_args.filters``)."""
        if isinstance(query, dict) or (isinstance(query, Path | str) and str(query).endswith((".yaml", ".yml"))):
            config = load(query)
            query, filters = config.task.query or "", {**(config.task.filters or {}), **filters}
        return self.client.search(str(query), **filters)

    def upload(self, cfg: Cfg | None = None, *, name: str | None = None, files: list[str | Path] | None = None,
               metadata: dict[str, Any] | str | Path | None = None, kind: str = "model", visibility: str = "public",
               version: str = "", creators: list[str | dict[str, Any]] | None = None,
               references: list[str] | None = None, fetches: list[str] | None = None) -> dict[str, Any]:
        """Publish a version (of your artifact ``name``, created if needed) from files and metadata; returns
        the version with its PID. Metadata is a dict or a file: YAML, JSON, or a model card README.md.
        ``creators`` ("Name, ORCID" strings or {name, orcid, affiliation}) win over the metadata's.
        ``references``: paths (or s3:// URLs) whose data stays where it lives; ``fetches``: URLs the hub copies."""
        return _registry.upload(self.client, load(cfg) if cfg is not None else None, name=name, files=files,
                                metadata=metadata, kind=kind, visibility=visibility, version=version,
                                creators=creators, references=references, fetches=fetches)

    def download(self, ref: str, dest: str | Path = ".", files: list[str] | None = None) -> list[Path]:
        """A version's files (or some of them) under ``dest``, through the local cache."""
        return self.client.download(ref, dest, files)

    def download_config(self, cfg: Cfg) -> list[Path]:
        """``task: download``: the models named in ``model_file`` into ``out_args.export_dir``."""
        return _registry.download_config(self.client, load(cfg))

    def load_model(self, ref: str, *, file: str | None = None, original: bool = False, threads: int = 0,
                   trust_pickle: bool = False, _key: str = "model") -> Any:
        """An ONNX Runtime session for a hub model (its ONNX conversion; ``file`` names the ONNX file of a
        version holding several, e.g. ``file="booster.onnx"``) or a local ``.onnx`` file; with
        ``original=True`` the uploaded model in its own framework (pickles only with ``trust_pickle``:
        loading one runs the code inside it)."""
        return _registry.load_model(self.client, ref, file=file, original=original, threads=threads,
                                    trust_pickle=trust_pickle, _key=_key)

    def load_dataset(self, ref: str) -> Dataset:
        """A dataset version's files on this machine (cached), with ``arrays()`` and ``croissant()``."""
        return _registry.load_dataset(self.client, ref)


# general_args.task -> the modelAPI method that does it
TASK_METHODS = {"conversion": "conversion", "inference": "inference", "collaboration": "collaborate",
                "container": "container", "optimize": "optimize", "search": "search", "upload": "upload",
                "download": "download_config", "finetune": "finetune", "generate": "generate"}
