"""The fine-tune task of the sandboxed child (``hpcfair.convert.child`` hands ``task: finetune`` here).

Request (paths relative to the work folder): model, dataset (a folder of the dataset's files), output,
hyper (``Hyper`` fields), data_file, inputs (the base version's input specs), bounds (a scientific file's,
``hpcfair.scidata.Bounds``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcfair.convert.errors import ConversionError
from hpcfair.convert.sandbox import stage_line
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.run import finetune
from hpcfair.finetune.spec import Hyper


def work(request: dict[str, Any], say: Callable[[str], None]) -> dict[str, Any]:
    hyper = Hyper.from_dict(request.get("hyper") or {})
    try:
        return finetune(Path(request["model"]), Path(request["dataset"]), Path(request["output"]), hyper,
                        data_file=request.get("data_file"), inputs=request.get("inputs"),
                        stage=lambda fraction, what: say(stage_line(fraction, what)), bounds=request.get("bounds"))
    except (ConversionError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the framework's text goes to the log, a fixed message to the user
        raise FinetuneError("training_failed", f"Training failed inside {type(exc).__module__.split('.')[0]} "
                                               f"({type(exc).__name__}); its traceback is in the training's log "
                                               "(the hub worker's log, or locally with HPCFAIR_DEBUG=1). Check that "
                                               "the model runs on the dataset's features.", cause=exc)
