"""Merging a chain of ONNX models into one (``onnx.compose``), verified against running the parts one
after another, and published as a new model artifact with provenance to every part.

ONNX files are protobuf: loading and rewriting them runs no code from the file. Opsets are reconciled
by converting every model to the highest default-domain opset among them (``onnx.version_converter``),
IR versions are raised to the highest, and every model's names get a prefix (its artifact's name) so
that the parts cannot collide.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from django.db import transaction
from hpcfair import chain
from hpcfair.compute import CodedError
from hpcfair.convert.signature import generate_inputs, specs_from_onnx

from hub.gateway.engine import run_steps
from hub.gateway.jobs.infer import step_versions
from hub.gateway.sessions import model_file
from hub.jobs.files import staged
from hub.jobs.kinds import JobKind, register
from hub.jobs.runner import JobContext
from hub.registry import services as registry
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.registry.services import ProvenanceRef

ATOL, RTOL = 1e-4, 1e-3


def prefix_for(version: Version, index: int, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", version.artifact.name).strip("_") or f"m{index}"
    prefix = f"{base}__"
    while prefix in taken:
        prefix = f"{base}{index}__"
        index += 1
    taken.add(prefix)
    return prefix


def reconcile(models: list) -> list:
    """Bring every model to the highest default-domain opset and IR version among them."""
    import onnx
    from onnx import version_converter

    def default_opset(model) -> int:
        return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    target = max(default_opset(m) for m in models)
    out = []
    for model in models:
        if default_opset(model) and default_opset(model) != target:
            try:
                model = version_converter.convert_version(model, target)
            except Exception as exc:  # noqa: BLE001 - the converter raises plain RuntimeErrors
                raise CodedError("cannot_merge", f"A model could not be converted from opset {default_opset(model)} "
                                                 f"to {target}: {str(exc)[:300]}")
        out.append(model)
    other = {}
    for model in out:
        for entry in model.opset_import:
            if entry.domain not in ("", "ai.onnx") and other.setdefault(entry.domain, entry.version) != entry.version:
                raise CodedError("cannot_merge", f"The models use different versions of the {entry.domain} operator "
                                                 "set, which cannot be converted; convert them with the same tools.")
    ir = max(m.ir_version for m in out)
    for model in out:
        model.ir_version = ir
        onnx.checker.check_model(model)
    return out


def io_map(before, after, mapping: dict[str, str], index: int) -> list[tuple[str, str]]:
    """onnx.compose's (output, input) pairs for joint ``index``: explicit links, or by position
    (``hpcfair.chain``)."""
    outputs = [o.name for o in before.graph.output]
    initializers = {i.name for i in after.graph.initializer}
    inputs = [i.name for i in after.graph.input if i.name not in initializers]
    try:
        pairs = chain.joint(mapping, outputs, inputs, before=f"model {index + 1}", after=f"model {index + 2}",
                            where=f"links[{index}]")
    except chain.ChainError as exc:
        raise CodedError("cannot_merge", str(exc))
    return [(source, target) for target, source in pairs]


def merge(models: list, links: list[dict[str, str]], prefixes: list[str]):
    import onnx
    from onnx import compose

    merged = compose.add_prefix(models[0], prefix=prefixes[0])
    for index in range(1, len(models)):
        pairs = [(prefixes[index - 1] + out, inp) for out, inp in
                 io_map(models[index - 1], models[index], links[index - 1], index - 1)]
        try:
            merged = compose.merge_models(merged, models[index], io_map=pairs, prefix2=prefixes[index])
        except (ValueError, onnx.checker.ValidationError) as exc:
            raise CodedError("cannot_merge", f"onnx.compose could not merge the models: {str(exc)[:300]}")
    onnx.checker.check_model(merged, full_check=True)
    return merged


def verify(merged_path: Path, steps: list[dict[str, Any]], first_model, prefixes: list[str]) -> dict[str, Any]:
    """Run the merged model and the chain on the same generated inputs; compare every final output."""
    specs, _ = specs_from_onnx(first_model)
    feeds = generate_inputs(specs)
    try:
        expected, _ = run_steps(steps, feeds, device="cpu", threads=0, deadline=time.time() + 600,
                                deadline_is_long=True)
    except CodedError as exc:
        raise CodedError("cannot_merge", f"The chain itself does not run on generated inputs: {exc.detail}")
    try:  # the merged graph runs where every uploaded graph runs: in this thread's engine
        actual, _ = run_steps([{"local": str(merged_path)}], {prefixes[0] + k: v for k, v in feeds.items()},
                              device="cpu", threads=0, deadline=time.time() + 600, deadline_is_long=True)
    except CodedError as exc:
        raise CodedError("cannot_merge", f"The merged model does not run on generated inputs: {exc.detail}")
    outputs = []
    for name, value in expected.items():
        got = actual.get(prefixes[-1] + name)
        diff = float(np.max(np.abs(got.astype(np.float64) - value))) if got is not None and got.size else 0.0
        passed = got is not None and got.shape == value.shape and np.allclose(got, value, atol=ATOL, rtol=RTOL)
        outputs.append({"name": name, "passed": bool(passed), "max_abs_diff": diff})
    return {"checker": "passed", "compared": True, "passed": all(o["passed"] for o in outputs), "atol": ATOL,
            "rtol": RTOL, "runs": [{"inputs": {k: list(v.shape) for k, v in feeds.items()}, "outputs": outputs}],
            "reference": "the models run one after another"}


def refuse_external_data(version: Version, model) -> None:
    """A model whose weights lie in files beside it (ONNX external data; its ``location`` may even point outside
    the version) is not merged: the merge reads one file per model. 422 ``cannot_merge`` naming it."""
    from onnx.external_data_helper import uses_external_data

    if any(uses_external_data(tensor) for tensor in model.graph.initializer):
        raise CodedError("cannot_merge", f"{version} keeps its weights in external data files beside the .onnx "
                                         "file; merging reads one file per model. Run the models as a chain "
                                         "(merge: false), or save the model with its weights inside.")


def publish(ctx: JobContext, parents: list[Version], path: Path, report: dict[str, Any], names: list[str]) -> Version:
    params = ctx.job.params
    user = ctx.job.requester
    creators, seen = [], set()
    for parent in parents:
        for creator in (parent.metadata or {}).get("creators") or []:
            if isinstance(creator, dict) and creator.get("name") not in seen:
                seen.add(creator.get("name"))
                creators.append(creator)
    chain = " -> ".join(str(p) for p in parents)
    metadata = {
        "title": params.get("title") or " + ".join(p.artifact.name for p in parents),
        "description": f"One ONNX model merged by the hub from {chain} (names prefixed with "
                       f"{', '.join(names)}).",
        "creators": creators or [{"name": user.get_full_name() or user.username}],
        "license": params["license"],
        "task": params.get("task") or (parents[-1].metadata or {}).get("task") or "other",
        "framework": "onnx",
        "keywords": ["merged", "collaboration"],
        "job": str(ctx.job.pk),
        "verified": report["passed"],
        "verification": {path.name: report},
    }
    with transaction.atomic():  # no artifact without its version
        artifact = registry.create_artifact(user, kind=Artifact.Kind.MODEL, name=params["name"],
                                            visibility=params["visibility"], title=metadata["title"],
                                            description=metadata["description"])
        return registry.create_version(
            artifact, user, files=[staged(path, path.name)], metadata=metadata, system=True,
            provenance=[ProvenanceRef(ProvenanceLink.Relation.MERGED_FROM, p) for p in dict.fromkeys(parents)])


@register
class CollaborateJob(JobKind):
    """Merge a chain of ONNX models into one, verify it against the chain, publish it with provenance."""

    name = "collaborate"
    label = "collaboration"
    queue = "convert"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        import onnx

        params = ctx.job.params
        steps = params["steps"]
        parents = step_versions(steps)
        user = ctx.job.requester
        existing = Artifact.objects.live().filter(owner=user, name=params["name"]).first()
        if existing is not None:
            done = existing.versions.filter(metadata__job=str(ctx.job.pk)).first()
            if done is not None:  # a retried job published already
                return {"version": str(done), "pid": done.pid, "verified": done.metadata.get("verified")}
            raise CodedError("already_exists", f"{user.username}/{params['name']} exists already.")
        folder = Path(tempfile.mkdtemp(prefix="hpcfair-merge-"))
        try:
            models = [onnx.load(str(model_file(s["sha256"], s["size"])), load_external_data=False) for s in steps]
            for parent, model in zip(parents, models, strict=True):
                refuse_external_data(parent, model)
            ctx.log(f"merging {' -> '.join(map(str, parents))}")
            models = reconcile(models)
            taken: set[str] = set()
            prefixes = [prefix_for(v, i, taken) for i, v in enumerate(parents)]
            links = [s.get("links") or {} for s in steps[1:]]
            merged = merge(models, links, prefixes)
            path = folder / f"{params['name']}.onnx"
            onnx.save(merged, str(path))
            ctx.progress(0.5)
            report = verify(path, steps, models[0], prefixes)
            ctx.log(f"merged model {'equals' if report['passed'] else 'DIFFERS FROM'} the chain: max abs difference "
                    f"{max(o['max_abs_diff'] for o in report['runs'][0]['outputs']):.3g}",
                    "info" if report["passed"] else "warning")
            version = publish(ctx, parents, path, report, [p.rstrip("_") for p in prefixes])
            return {"version": str(version), "pid": version.pid, "verified": report["passed"], "verification": report,
                    "prefixes": prefixes}
        finally:
            shutil.rmtree(folder, ignore_errors=True)
