"""One synchronous inference run, start to end: the round trip to a worker's engine over the gateway's
channel (``call``, ``hub.gateway.channel``), what a worker's refusal means (``worker_error``), when a run
becomes a job instead (``run_or_queue``), and the retry when this process's remembered answers turned out to
be stale (``retry_when_stale``).

Both entry points run through here. The DRF views call ``run`` (a model or a chain, at once or as a job)
inside ``retry_when_stale``. The express path (``hub.gateway.wsgi``) calls ``run_or_hand_over``: it sends
only what it can answer with a 200 itself, and hands any other worker answer to Django as an
``EarlierAnswer`` attached to the request, which ``run`` takes instead of running the model twice. So errors
and jobs come from one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from hub.errors import HubError
from hub.gateway import channel, memory, protocol, services, wire
from hub.gateway.presence import NoWorker, Stale
from hub.gateway.protocol import InferRequest, ModelRef, Options
from hub.jobs.models import Job

GRACE_S = 2.0  # a worker answers this long after a deadline at the latest (it aborts the run at the deadline)
EARLIER_ANSWER = "hub.gateway.earlier_answer"  # the WSGI environ key of an express path's answer
_WORKER_CODES = {"invalid_inputs", "model_load_failed", "not_runnable", "gpu_unavailable", "run_failed",
                 "memory_limit", "model_too_large"}

Result = tuple[dict[str, Any], dict[str, np.ndarray]]  # the worker's meta and the output arrays
Encoded = tuple[bytes, str, dict[str, str]]  # an answer's body, media type and headers


# --- the round trip ------------------------------------------------------------------------------------


def call(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], options: Options,
         generation: bytes | None = None) -> Result:
    """Send one request (a model, or a chain of models) to a worker and wait for its answer.

    Raises ``NoWorker`` when no worker serves the device, ``Stale`` when ``generation`` (that of the
    caller's remembered answers) is no longer current; returns the worker's meta (``ok``, ``code``,
    ``detail``, ``provider``, timings) and the output arrays."""
    limit = settings.HUB_INFER_SYNC_S
    meta = {"steps": steps, "threads": options.threads, "outputs": options.outputs,
            "deadline": time.time() + limit}
    started = time.perf_counter()
    answer = channel.call(options.device, wire.parts(meta, arrays), limit + GRACE_S, generation, grace=GRACE_S)
    if answer is None:
        raise HubError("worker_timeout", f"No worker answered within {limit + GRACE_S:.0f} s; the workers may be "
                                         "overloaded or stopped. Try again, or run it as a job (mode: async).")
    meta, outputs = wire.unpack(answer)
    meta["lane_ms"] = round((time.perf_counter() - started) * 1e3, 3)
    return meta, outputs


def worker_error(meta: dict[str, Any]) -> HubError:
    """A worker's refusal (``ok: false``) as the coded error the caller gets."""
    code = meta.get("code") or "internal_error"
    return HubError(code if code in _WORKER_CODES else "internal_error", meta.get("detail") or "The run failed.")


# --- the express path's hand-over ----------------------------------------------------------------------


@dataclass
class EarlierAnswer:
    """The worker's answer to a request the express path sent, for the full path to finish."""

    steps: list[dict[str, Any]]
    result: Result | HubError

    def take(self) -> Result:
        if isinstance(self.result, HubError):
            raise self.result
        return self.result


def earlier_answer(meta: dict[str, Any]) -> EarlierAnswer | None:
    """The answer the express path attached to this request (its WSGI environ, Django's ``META``), taken once."""
    return meta.pop(EARLIER_ANSWER, None)


def run_or_hand_over(model: ModelRef, arrays: dict[str, np.ndarray], options: Options, generation: bytes
                     ) -> Result | EarlierAnswer | None:
    """The express path's run: the worker's successful answer; an ``EarlierAnswer`` for Django to finish
    (an error, a timeout, an overtime run); or None when nothing was sent (a stale generation, no worker),
    so that Django handles the request from the start."""
    steps = protocol.steps_of([model])
    try:
        meta, outputs = call(steps, arrays, options, generation=generation)
    except (Stale, NoWorker):
        return None
    except HubError as exc:
        return EarlierAnswer(steps, exc)
    if not meta.get("ok"):
        return EarlierAnswer(steps, (meta, outputs))
    return meta, outputs


# --- the full path -------------------------------------------------------------------------------------


def run_or_queue(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], options: Options,
                 start_job: Callable[[str], Job], earlier: EarlierAnswer | None = None) -> Result | Job:
    """The synchronous call, or the job ``start_job(reason)`` makes when the run is too big, too long, or
    waits for a worker. ``earlier``: the answer the express path already had for these steps."""
    size = sum(array.nbytes for array in arrays.values())
    if options.mode == "async":
        return start_job("asked for")
    if size > settings.HUB_INFER_SYNC_MAX_BYTES:
        if options.mode == "sync":
            raise HubError("request_too_large", f"The inputs are {size / 2**20:.0f} MiB; synchronous runs take up to "
                                                f"{settings.HUB_INFER_SYNC_MAX_BYTES / 2**20:.0f} MiB. Use mode auto "
                                                "or async.")
        return start_job("large inputs")
    try:
        if earlier is not None and earlier.steps == steps:
            meta, outputs = earlier.take()
        else:
            meta, outputs = call(steps, arrays, options, generation=memory.answers.generation)
    except NoWorker:
        if options.if_no_worker == "queue":
            return start_job("waiting for a worker")
        raise protocol.no_worker(options.device)
    if not meta.get("ok"):
        if meta.get("code") == "overtime":
            if options.mode == "sync":
                raise HubError("worker_timeout", f"The run took longer than {settings.HUB_INFER_SYNC_S:g} s and was "
                                                 "stopped; use mode auto or async to run it as a job.")
            return start_job("longer than the synchronous limit")
        raise worker_error(meta)
    return meta, outputs


def run(user, models: list[ModelRef], request: InferRequest, *, links: list[dict[str, str]] | None = None,
        info: dict[str, Any] | None = None, earlier: EarlierAnswer | None = None) -> Encoded | Job:
    """Run a model or a chain (``links``): a batch job over a dataset, or the inputs sent now (at once, or as
    a job). Returns the encoded answer, or the job that will run it."""
    options = request.options
    if request.dataset:
        memory.answers.validate()
        dataset, path = services.dataset_input(user, request.dataset, request.dataset_file)
        return services.start_infer_job(user, models, options, links=links, dataset=dataset, dataset_file=path,
                                        batch_size=request.batch_size, reason="batch run")
    arrays = request.arrays(models[0])

    def start_job(reason: str) -> Job:
        memory.answers.validate()
        return services.start_infer_job(user, models, options, links=links, arrays=arrays,
                                        batch_size=request.batch_size, reason=reason)

    result = run_or_queue(protocol.steps_of(models, links), arrays, options, start_job, earlier)
    if isinstance(result, Job):
        return result
    meta, outputs = result
    return protocol.encode_answer(outputs, request.answer_format, {**protocol.timings(meta), **(info or {})},
                                  models[-1])


def retry_when_stale(request, attempt: Callable[[], Any]) -> Any:
    """``attempt()``; when the channel says the remembered answers are out of date, authenticate and resolve
    again (``attempt`` reads them afresh) and try again."""
    for _ in range(3):
        try:
            return attempt()
        except Stale as exc:
            memory.refresh(request, exc.generation)
    raise HubError("conflict", "The registry changed three times while this request ran; send it again.")
