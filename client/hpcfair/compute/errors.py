"""The one coded error of the compute side, and the table of the codes a job can fail with.

Every failure a scientist can act on is a ``CodedError``: a machine-readable ``code`` and a ``detail`` meant
for people. The hub's engines, Celery jobs, the Slurm node's runner and the hub's own services raise it
(``hub.errors.HubError`` is one, with an HTTP status from ``hub.errors.STATUS``); the job runner records the
code and detail on the job, the web layer maps a code to an HTTP status. Nothing here imports Django or an
HTTP client.

``JOB_CODES`` is the table of codes a job (``Job.error_code``) may end with, besides the HTTP table's codes
that a job's publishing step can meet (``duplicate_version``, ``invalid_metadata``…). A code is added here
before it is raised (``tests/test_imports.py`` checks every literal code in the source); the manual's "Job
error codes" page (docs/reference/job-errors.md) is made from this table.
"""

from __future__ import annotations


class CodedError(Exception):
    """A failure with a ``code`` (``JOB_CODES``, or ``hub.errors.STATUS`` on the web side) and a message."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}


JOB_CODES: dict[str, str] = {
    # where the job ran
    "cancelled": "someone cancelled the job; nothing it had made was kept",
    "cancelled_by_scheduler": "Slurm (an administrator or the scheduler) cancelled the job",
    "gone": "a version or the staged inputs the job needs were deleted before it ran",
    "gpu_unavailable": "the job asked for a GPU and the worker or node has no CUDA execution provider",
    "internal_error": "the job failed unexpectedly; the administrators trace it by job id",
    "job_failed": "the Slurm job failed without a reason of the hub's own",
    "out_of_memory": "Slurm stopped the job for using more memory than it was given",
    "slurm_rejected": "sbatch refused the job (no partition for its device, a limit, a broken cluster)",
    "storage_unavailable": "the object store could not be read or written",
    "time_limit": "the job ran past its time limit (a sandbox's, or its Slurm job's)",
    "fetch_failed": "the server a fetch reads from answered an error, closed early or sent no size",
    "reference_unreadable": "the referenced path or S3 object could not be read (gone, or not readable by the hub)",
    "worker_lost": "the job's worker was lost (killed) on every attempt",
    # running models (the gateway's engines, inference jobs, benchmarks, merges, Slurm nodes)
    "invalid_inputs": "inputs that do not fit the model or the chain (names, shapes, rows, links)",
    "invalid_outputs": "a compute node's outputs could not be read back",
    "prompt_too_long": "a prompt has more tokens than the language model's context holds",
    "memory_limit": "the run needed more memory than one model run may use here",
    "model_load_failed": "ONNX Runtime could not load the model (or its weights name a data file outside its version)",
    "model_too_large": "the model's files need more memory than the worker gives loaded models (HUB_GATEWAY_CACHE_MB)",
    "overtime": "the run passed its time limit and was stopped",
    "run_failed": "ONNX Runtime failed while running the model",
    "cannot_merge": "the chain's models cannot be merged into one ONNX graph",
    # conversion, verification, optimisation (hpcfair.convert)
    "archive_too_large": "an archive inflates past the hub's limit",
    "conversion_crashed": "the conversion's sandboxed process died",
    "conversion_failed": "the framework's exporter could not export the model",
    "unsupported_model": "the model is of a kind the task does not take (a language model family that has no "
                         "generation build, a folder without its tokenizer)",
    "corrupt_file": "a model file could not be read",
    "input_mismatch": "sample inputs that do not match the model's inputs",
    "invalid_onnx": "an ONNX file that fails the checker or shape inference",
    "invalid_request": "a request the sandbox's child does not know (a hub and a client of different versions)",
    "keras_unbuilt": "a Keras Sequential model saved before it was built: it has no input shape",
    "invalid_sample_inputs": "sample inputs that cannot be read or used",
    "invalid_signature": "a declared input signature that cannot be used",
    "opset_unsupported": "the ONNX opset asked for is not supported",
    "sandbox_failed": "the conversion's sandbox could not start Python (the installation, not the model)",
    "runtime_failed": "the converted model fails in ONNX Runtime on the sample inputs",
    "runtime_load_failed": "the converted model does not load in ONNX Runtime",
    "save_failed": "the converted model could not be written",
    "signature_required": "the model's inputs cannot be inferred: declare them or send sample inputs",
    "unknown_file": "the file named is not in the version",
    "unsafe_model": "a model that carries Python code (a Keras Lambda layer), which the hub does not run",
    "unsafe_pickle": "a pickle that imports what the hub does not allow",
    "unsupported_format": "a file format no converter takes",
    "unsupported_operator": "an operator the exporter cannot express in ONNX",
    "verification_failed": "the ONNX model's outputs differ from the original's beyond the tolerance (a GGUF "
                           "build: its greedy tokens or tokenizer through llama-server differ from transformers')",
    "weights_only": "a checkpoint of weights without the model's code",
    # fine-tuning (hpcfair.finetune)
    "ambiguous_dataset": "the dataset's file or columns cannot be chosen without being told",
    "dataset_too_small": "too few rows to train and validate",
    "label_mismatch": "labels that do not fit the model's outputs",
    "non_numeric_feature": "a feature column that is not numeric",
    "not_trainable": "a model the hub cannot fine-tune",
    "shape_mismatch": "variables of a scientific file with different numbers of rows (their first axes)",
    "training_failed": "training raised an error",
    "unknown_column": "a column named that the dataset does not have",
    "unreadable_dataset": "a dataset file that cannot be read",
    "unsupported_dataset": "a dataset format fine-tuning does not take",
    # containers (hpcfair.cube)
    "already_exists": "an MLCube project exists where one was to be written",
    "build_failed": "the container image did not build",
    "container_engine_broken": "the container engine does not work on this host",
    "container_mismatch": "the container's reference run does not match the gateway's answer",
    "container_timeout": "a container build or task ran past its limit",
    "invalid_config": "an MLCube or config file that cannot be used",
    "invalid_mlcube": "an MLCube project that cannot be parsed",
    "no_container_engine": "neither podman nor docker is installed",
    "no_container_runtime": "the container engine has no runtime that works here",
    "task_failed": "an MLCube task exited with an error",
    "wheels_unavailable": "the Python wheels the image installs offline are missing",
    "backend_mismatch": "a model whose framework the chosen backend does not run",
}
