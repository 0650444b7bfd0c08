"""The landing page of an artifact or version: the PID's HTML face.

``hub.registry.resolver`` decides what a PID names and who may read it; this module gathers what the
page shows (model card, metadata table, files, versions, citations, provenance graph, verification,
latency, jobs, "use it" snippets, the try-it form) and renders it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from hub.accounts.auth import request_user
from hub.conversions.services import conversions_of, converted_from
from hub.errors import HubError
from hub.finetune.services import finetune_offered
from hub.gateway.tensors import shape_text
from hub.jobs.models import Job
from hub.metadata import signposting, written_card
from hub.metadata.derive import CARD_NAMES
from hub.metadata.negotiation import choose
from hub.metadata.services import class_labels, record_for, version_record
from hub.registry import access, resolver
from hub.registry.access import Viewer
from hub.registry.files_access import files_blocker, files_state, how_to_request, may_read_files, request_share_token
from hub.registry.grants import policy_of
from hub.registry.lineage import current_version
from hub.registry.models import Artifact, Version
from hub.registry.services import readable_pid
from hub.web import markdown, preview, scipreview, snippets, xhtml
from hub.web.terms import term_url
from ontology import exports
from ontology.graph import LITERALS
from ontology.record import RELATION_WORDS, Record, affiliations
from ontology.vocab import HPC_NAMESPACE, HUB_NAMESPACE

# Shown elsewhere on the page, or the hub's own bookkeeping.
NOT_IN_TABLE = {"title", "description", "creators", "card", "derived", "verification", "conversion", "benchmarks",
                "job", "container", "members", "optimization", "mlcube", "inputs", "outputs", "records",
                "scientific"}  # HDF5/NetCDF/Zarr structure: its own preview under Files (hub.web.scipreview)
LABELS = {"opset": "ONNX opset", "parameters": "Parameters", "url": "Home page", "is_tunable": "Can be fine-tuned",
          "supports_accelerator": "Runs on accelerators", "record_count": "Records", "size": "Total size",
          "learning_type": "Learning type", "model_family": "Model family", "sample_inputs": "Sample inputs",
          "container_image": "Container image", "target_machine": "Target machine",
          "target_application": "Target application", "license": "License", "keywords": "Keywords"}
# The page's "Cite" box: (label, export, CSL style); the references are rendered from the CSL style files.
CITATIONS = (("APA", "citation", "apa"), ("BibTeX", "bibtex", None),
             ("Chicago", "citation", "chicago-author-date"), ("IEEE", "citation", "ieee"),
             ("Harvard", "citation", "harvard-cite-them-right"), ("RIS", "ris", None),
             ("CSL-JSON", "csl-json", None), ("DataCite JSON", "datacite-json", None))


@dataclass
class Row:
    label: str
    value: str
    term: str = ""  # compact name, e.g. hpc:machineLearningFramework
    iri: str = ""


def _term(name: str) -> tuple[str, str]:
    """The HPC Ontology term of a field, else the hub's own; ("", "") when it has none."""
    predicates = [str(p) for p in LITERALS.get(name, ([], None))[0]]
    for namespace, prefix in ((HPC_NAMESPACE, "hpc"), (HUB_NAMESPACE, "hub")):
        for iri in predicates:
            if iri.startswith(namespace):  # the hub's own terms: described at /terms (hub.web.terms)
                return f"{prefix}:{iri[len(namespace):]}", term_url(iri)
    return "", ""


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):  # entries that are mappings (contributors, grants) apart with ";"
        return ("; " if any(isinstance(v, dict) for v in value) else ", ").join(_display(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_display(v)}" for k, v in value.items())
    return str(value)


def metadata_rows(metadata: dict[str, Any]) -> list[Row]:
    rows = []
    for name, value in metadata.items():
        if name in NOT_IN_TABLE or value in (None, "", [], {}):
            continue
        if name == "size" and isinstance(value, int):
            from django.template.defaultfilters import filesizeformat

            value = filesizeformat(value)
        term, iri = _term(name)
        rows.append(Row(LABELS.get(name, name.replace("_", " ").capitalize()), _display(value), term, iri))
    return rows


# The provenance graph: 12 px text is about 7 px a character; a node is as wide as its longest line.
CHAR_PX, NODE_MIN_PX, LINE_MAX = 7, 220, 64


@dataclass
class Node:
    label: str
    href: str  # "" for a source the viewer may not see (and for the version itself)
    relation: str  # how it relates to this version ("" for the version itself)
    x: int = 0
    y: int = 0

    @property
    def lines(self) -> list[str]:
        """The label in whole lines: ``owner/name`` and ``@version`` apart; longer than ``LINE_MAX`` is cut
        (the SVG's ``<title>`` and the list under the graph say it whole)."""
        name, at, label = self.label.rpartition("@")
        parts = [name, at + label] if at and "/" in name and " " not in self.label else [self.label]
        return [part if len(part) <= LINE_MAX else part[:LINE_MAX - 1] + "…" for part in parts]


def provenance_graph(version: Version, viewer: Viewer) -> dict[str, Any] | None:
    """Sources on the left, this version in the middle, what was made from it on the right (an SVG); as
    ``viewer`` may see them (``hub.registry.access``). Labels are shown whole (issue 41, point 7): the
    columns widen to the longest line and the graph scrolls sideways where the page is narrower."""
    sources = [Node(s.name, "/" + s.target.pid if s.target else "", RELATION_WORDS.get(s.relation, s.relation))
               for s in access.sources(viewer, version)]
    made = [Node(str(p.version), "/" + p.version.pid, RELATION_WORDS.get(p.relation, p.relation))
            for p in access.derivatives(viewer, version, live_only=True)[:8]]
    if not sources and not made:
        return None
    me = Node(str(version), "", "")
    longest = max(len(line) for node in [*sources, *made, me] for line in node.lines)
    width = max(NODE_MIN_PX, longest * CHAR_PX + 16)
    rows = max(len(sources), len(made), 1)
    height = 20 + rows * 66
    for column, x in ((sources, 10), (made, 10 + 2 * (width + 30))):
        for index, node in enumerate(column):
            node.x, node.y = x, 20 + index * 66
    me.x, me.y = 10 + width + 30, (height - 52) // 2
    return {"sources": sources, "made": made, "me": me, "height": height, "node_width": width,
            "width": 3 * width + 80}


def conversions(version: Version) -> list[Version]:
    """The live ONNX versions the hub converted from ``version``."""
    return list(conversions_of(version))


def verification(version: Version, converted: list[Version]) -> list[dict[str, Any]]:
    """This version's conversion check per file, or those of the ONNX versions made from it; each with the
    largest relative difference and the inputs of all its runs (a report keeps them per run)."""
    reports = []
    own = version.metadata.get("verification")
    if isinstance(own, dict):
        reports += [_summary(name, None, report) for name, report in own.items() if isinstance(report, dict)]
    for made in converted:
        reports += [_summary(name, made, report)
                    for name, report in (made.metadata.get("verification") or {}).items() if isinstance(report, dict)]
    return reports


def shown(signature: Any) -> list[dict[str, Any]]:
    """Tensor entries (``name``, ``shape``, ``dtype``) with ``shape_text`` for the page."""
    return [{**t, "shape_text": shape_text(t.get("shape"))} for t in signature or [] if isinstance(t, dict)]


def _summary(name: str, made: Version | None, report: dict[str, Any]) -> dict[str, Any]:
    runs = [run for run in report.get("runs") or [] if isinstance(run, dict)]
    rel = [o["max_rel_diff"] for run in runs for o in run.get("outputs") or []
           if isinstance(o, dict) and isinstance(o.get("max_rel_diff"), int | float)]
    inputs = [f"{key} {shape_text(info.get('shape'))} {info.get('dtype', '')}".strip()
              + (f" ({info['source']})" if info.get("source") else "")
              for run in runs for key, info in (run.get("inputs") or {}).items() if isinstance(info, dict)]
    return {**report, "file": name, "version": made,
            "max_rel_diff": report.get("max_rel_diff", max(rel) if rel else None),
            "inputs_shown": list(dict.fromkeys(inputs))}


# The verification plot: each file's largest absolute difference and its tolerance on a log scale.
PLOT_W, PLOT_ROW, PLOT_LABEL, PLOT_MIN_EXP, PLOT_MAX_EXP = 560, 26, 170, -12, 0


def verification_plot(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Bars of the largest absolute difference per checked file against its ``atol`` (a tick), on a log
    axis from 1e-12 to 1: a difference under its tick passed. None when no report has a difference."""
    import math

    span = PLOT_W - PLOT_LABEL - 10

    def x(value: float) -> int:
        exponent = math.log10(value) if value > 0 else PLOT_MIN_EXP
        share = (min(max(exponent, PLOT_MIN_EXP), PLOT_MAX_EXP) - PLOT_MIN_EXP) / (PLOT_MAX_EXP - PLOT_MIN_EXP)
        return PLOT_LABEL + round(share * span)

    rows = []
    for report in reports:
        diff = report.get("max_abs_diff")
        if not isinstance(diff, int | float):
            continue
        atol = report.get("atol") if isinstance(report.get("atol"), int | float) else None
        y = 8 + len(rows) * PLOT_ROW
        rows.append({"label": report["file"][-26:], "y": y, "text_y": y + 13, "bar": max(2, x(diff) - PLOT_LABEL),
                     "tick": x(atol) if atol else None, "tick_y2": y + 20, "passed": bool(report.get("passed")),
                     "value": f"{diff:.2g}"})
    if not rows:
        return None
    height = 8 + len(rows) * PLOT_ROW + 22
    axis = [{"x": x(10.0 ** e), "label": f"1e{e}"} for e in range(PLOT_MIN_EXP, PLOT_MAX_EXP + 1, 3)]
    return {"rows": rows, "width": PLOT_W, "height": height, "axis": axis, "axis_y": height - 20,
            "label_y": height - 6, "left": PLOT_LABEL}


def latency_rows(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for entry in metadata.get("benchmarks") or []:
        hardware = entry.get("hardware") or {}
        name = hardware.get("gpu_model") if hardware.get("kind") == "gpu" else hardware.get("cpu_model")
        cores = f", {hardware['cores']} cores" if hardware.get("cores") else ""
        rows.append({**entry, "hardware_name": f"{(hardware.get('kind') or '').upper()} {name or ''}{cores}".strip()})
    return rows


def runnable_signature(version: Version, converted: list[Version], runs: list[str]) -> list[dict[str, Any]]:
    """Input tensors of the model the try-it form runs (this version's, else its ONNX conversion's; of an
    ensemble, its first ONNX file's (``runs``: ``onnx_files``), the one the "Use it" snippets name)."""
    first = next(iter(runs), None)
    for holder in [version, *converted[:1]]:
        if holder.metadata.get("inputs"):
            return holder.metadata["inputs"]
        member = (holder.metadata.get("members") or {}).get(first)
        if isinstance(member, dict):
            return member.get("inputs") or []
    return []


def onnx_files(version: Version, converted: list[Version]) -> list[str]:
    """The ONNX files the gateway chooses from for ``version`` (its own, else its latest conversion's)."""
    for holder in [version, *converted[:1]]:
        found = [f.path for f in holder.files.order_by("path") if f.path.lower().endswith(".onnx")]
        if found:
            return found
    return []


# What to do after a failed conversion, by its code: the page says this instead of leaving people with the
# error alone (the job's own message, for those who may write, says what exactly went wrong).
NEXT_STEPS = {
    "signature_required": "Give the model's inputs (name, shape with null for dynamic axes, dtype) in the metadata, "
                          "or add sample_inputs.npz, and publish a new version.",
    "unsupported_operator": "The model uses an operator ONNX cannot express at this opset: ask for a higher opset "
                            "(POST …/convert with {\"opset\": 18}) or replace the operator and publish again.",
    "opset_unsupported": "Ask for a conversion at another opset (POST …/convert with {\"opset\": 17}).",
    "keras_unbuilt": "Build or call the Keras model once before saving it, then publish it again.",
    "corrupt_file": "The file is not what its name says: save it again (torch.jit.save, torch.export.save, "
                    "model.save, joblib.dump) and publish it as a new version.",
    "unsafe_pickle": "The pickle names code outside scikit-learn's estimators: save the model with skops, or "
                     "export it to ONNX yourself and publish the .onnx file.",
    "unsafe_model": "The file asks to run code when loaded (e.g. a Keras Lambda layer): publish an ONNX export.",
    "memory_limit": "The conversion ran out of memory: ask for a larger limit (HUB_CONVERT_MEMORY_MB on the hub) "
                    "or convert it yourself with hpcfair convert and publish the .onnx file.",
    "time_limit": "The conversion took too long: convert it yourself with hpcfair convert and publish the .onnx.",
    "runtime_failed": "ONNX Runtime could not run the export: an axis may have been fixed at export; mark dynamic "
                      "axes with null in the metadata's inputs and publish again.",
    # Converting on your own machine fails the same way for these: the file itself must change.
    "weights_only": "The file holds weights without the model's code. Load them into your model and publish the "
                    "model itself: torch.jit.save(torch.jit.trace(model, example), \"model.pt\"), a torch.export "
                    ".pt2, or an ONNX export (torch.onnx.export); a Hugging Face model goes with its config.json.",
    "unsupported_format": "The hub has no converter for this file (a whole module saved with torch.save, for one, "
                          "needs its Python class to load). Publish TorchScript (torch.jit.save(torch.jit.script("
                          "model), \"model.pt\")), a torch.export .pt2, Keras .keras or skops instead, or export it "
                          "to ONNX with its framework's tools and publish the .onnx file.",
    "invalid_sample_inputs": "The sample inputs could not be used: publish a sample_inputs.npz keyed by the model's "
                             "input names (or fix the metadata's inputs) in a new version.",
    "invalid_signature": "The declared inputs cannot be used: give each input a name, a shape (null for dynamic "
                         "axes) and a dtype in the metadata, and publish a new version.",
    "unsupported_model": "The hub has no conversion for this kind of model: export it to ONNX with the tools of "
                         "its framework and publish the .onnx file.",
    "archive_too_large": "The archive unpacks to more than the hub takes: publish the folder's files themselves "
                         "(hpcfair upload NAME FOLDER) instead of an archive.",
}
DEFAULT_NEXT_STEP = ("Convert it on your machine (hpcfair convert FILE --output model.onnx), which shows every "
                     "step, and publish the ONNX file as a new version.")


def failed_conversion(version: Version, files: list, converted: list[Version]) -> dict[str, Any] | None:
    """For a model version with no ONNX file of its own (``files``) and no conversion: its last conversion
    job, if it failed, with what to do next."""
    if converted or any(f.path.lower().endswith(".onnx") for f in files):
        return None
    job = Job.objects.filter(version=version, kind="convert").order_by("-created").first()
    if job is None or job.state != Job.State.FAILED:
        return None
    return {"job": job, "code": job.error_code, "next": NEXT_STEPS.get(job.error_code, DEFAULT_NEXT_STEP)}


def newer_version(artifact: Artifact, version: Version) -> Version | None:
    """The artifact's latest published version (``current_version``) when it is neither ``version`` nor the
    version ``version`` was converted from: a version's own ONNX conversion is not a newer version of it."""
    latest = current_version(artifact)
    if latest is None or latest.pk == version.pk or latest.pk == getattr(converted_from(version), "pk", None):
        return None
    return latest


def onnx_offer(converted: list[Version]) -> dict[str, Any] | None:
    """The ONNX conversion a model version's page offers beside it: the newest, whether it was verified."""
    if not converted:
        return None
    made = converted[0]
    return {"version": made, "verified": made.metadata.get("verified"),
            "files": [f.path for f in made.files.order_by("path") if f.path.lower().endswith(".onnx")]}


def with_previews(files: list, card_shown: bool = False) -> list:
    """``files``, each with ``preview`` (``hub.web.preview``) where it has one; not the card (README.md,
    MODEL_CARD.md, ...) when the page shows it rendered (its raw text and front matter again below would only
    repeat it). The first file with a preview has ``preview_open``: its preview opens with the page."""
    shown = preview.previews([file for file in files if not (card_shown and file.path.lower() in CARD_NAMES)])
    first = True
    for file in files:
        file.preview = shown.get(file.pk)
        file.preview_open = first and bool(file.preview)
        first = first and not file.preview
    return files


# Jobs that anyone signed in may start on a version they can read; each is its requester's business.
PERSONAL_JOBS = ("infer", "collaborate")


def jobs_shown(version: Version, user) -> list[Job]:
    """The version's upkeep (conversion, verification, containers, ...) and the viewer's own runs while they
    are queued or running (finished ones are on the jobs page): other people's inference runs on a public
    model are theirs (their inputs, their private outputs)."""
    jobs = (Job.objects.filter(version=version).exclude(state__in=Job.FINAL_STATES)
            .filter(Q(requester=user) | ~Q(kind__in=PERSONAL_JOBS)))
    return list(jobs.order_by("-created")[:10])


def versions_listed(artifact: Artifact) -> list[Version]:
    """The artifact's versions, newest first, each build the hub made from a version (``2-onnx``,
    ``2-genai``) right under the version it was made from rather than above it as if newer."""
    versions = list(artifact.versions.all())
    by_label = {v.label: v for v in versions}
    rank = {v.pk: index for index, v in enumerate(versions)}

    def key(version: Version) -> tuple[int, int, int]:
        base, dash, _ = version.label.partition("-")
        origin = by_label.get(base) if dash and base in by_label else None
        return (rank[origin.pk], 1, rank[version.pk]) if origin else (rank[version.pk], 0, 0)

    return sorted(versions, key=key)


def card_without_title(html: str, title: str) -> str:
    """The rendered card without its first ``<h1>`` when that heading only repeats the page's title, and its
    headings a level down (the page's title is its one ``<h1>``)."""
    match = re.match(r"\s*<h1>(.*?)</h1>\s*", html, re.S)
    if match and re.sub(r"<[^>]+>", "", match.group(1)).strip().casefold() == (title or "").strip().casefold():
        html = html[match.end():]
    shifted = re.sub(r"<(/?)h([1-5])>", lambda m: f"<{m.group(1)}h{int(m.group(2)) + 1}>", html)
    return mark_safe(shifted)  # noqa: S308 - nh3's sanitised output with its heading tags renamed


def human_url(artifact: Artifact, version: Version | None, is_concept: bool) -> str:
    """The address a person types or shares: ``/owner/name`` (the concept) or ``/owner/name/version``."""
    base = f"/{artifact.owner.username}/{artifact.name}"
    return base if is_concept or version is None else f"{base}/{version.label}"


def people(record: Record) -> list[dict[str, str]]:
    """The creators as the page names them: name, ORCID or ROR link, affiliations in words."""
    return [{"name": agent["name"], "orcid": agent.get("orcid", ""), "ror": agent.get("ror", ""),
             "affiliation": "; ".join(org["name"] for org in affiliations(agent))} for agent in record.creators]


def page(request: HttpRequest, viewer: Viewer, context: dict[str, Any]) -> HttpResponse:
    """Render the landing page from the resolver's context (artifact, version, record, ...)."""
    user = viewer.user
    artifact: Artifact = context["artifact"]
    version: Version | None = context["version"]
    record = concept = context["record"]
    if (context.get("is_concept") and version is not None and record is not None and not version.is_deleted
            and getattr(record, "latest_label", None) != version.label):
        # The concept's page shows the version it leads with (``current_version``), not the newest one's
        # description (often the hub's ONNX conversion); it keeps the concept's exports and citations.
        record = replace(version_record(version, viewer), export_urls=concept.export_urls)
        context["record"] = record
    metadata = record.metadata if record else {}
    can_write = artifact.can_write(user)
    context.update({
        "card_html": card_without_title(markdown.render(metadata.get("card") or written_card.body(
            artifact.kind, metadata)), artifact.title or artifact.name) if record else "",
        # none uploaded: the card the hub stored (or, for an older version, writes now) from the metadata
        "card_written": written_card.is_written(metadata.get("card") or "") or not metadata.get("card"),
        "human_url": human_url(artifact, version, bool(context.get("is_concept"))),
        "canonical": concept.iri if concept else "",  # the PID's address, whichever address opened the page
        "card_title": {"model": "Model card", "dataset": "Dataset card"}.get(artifact.kind, "README"),
        "rows": metadata_rows(metadata),
        "can_write": can_write,
        "can_admin": artifact.can_admin(user),
        "collaborators": artifact.collaborators.all() if can_write else [],
        "signature_in": shown(metadata.get("inputs")),
        "signature_out": shown(metadata.get("outputs")),
        "people": people(record) if record else [],
    })
    if version is not None:
        files = list(version.files.order_by("path"))
        files_open = may_read_files(user, version, request_share_token(request))
        converted = conversions(version) if artifact.kind == "model" else []
        failed = failed_conversion(version, files, converted) if artifact.kind == "model" else None
        runs = onnx_files(version, converted) if artifact.kind == "model" else []
        signature = runnable_signature(version, converted, runs) if artifact.kind == "model" and not failed else []
        chosen = f"?file={quote(runs[0])}" if len(runs) > 1 else ""  # an ensemble: its first file, as the snippets
        generation = generate_url(artifact, version)
        context.update({
            "failed_conversion": failed,
            "onnx": onnx_offer(converted),
            "source": converted_from(version) if artifact.kind == "model" else None,
            "newer": None if context.get("is_concept") else newer_version(artifact, version),
            "schema": metadata.get("records") if artifact.kind == "dataset" else None,
            "mlcube": metadata.get("mlcube") if artifact.kind == "project" else None,
            "files": (with_previews(files, bool(context.get("card_html")))
                      if files_open else files),  # no byte of restricted files, not even a preview
            "scientific": scipreview.previews(metadata, files) if metadata.get("scientific") and files_open else [],
            "files_open": files_open,
            "files_state": files_state(version),
            "files_notice": "" if files_open else how_to_request(version, files_blocker(user, version), user),
            "access_policy": None if files_open else policy_of(artifact),
            "citations": [(label, exports.export(concept, name, style)) for label, name, style in CITATIONS]
            if concept else [],
            "graph": provenance_graph(version, viewer),
            "reports": (reports := verification(version, converted)),
            "verification_plot": verification_plot(reports),
            "latency": latency_rows(metadata),
            "container": metadata.get("container") if isinstance(metadata.get("container"), dict) else None,
            "jobs": jobs_shown(version, user) if can_write else [],
            "use": None if failed else use_snippets(artifact, version, signature, runs, files, generation),
            "try_signature": shown(signature),
            "try_example": json.dumps(example) if (example := snippets.example_inputs(signature)) else "",
            "class_labels": class_labels(version, viewer) if signature and artifact.kind == "model" else None,
            "infer_url": f"/api/v1/artifacts/{artifact.owner.username}/{artifact.name}/versions/{version.label}/infer"
                         + chosen,
            "generate_url": generation,
            "finetune": artifact.kind == "model" and not version.is_deleted and finetune_offered(version),
        })
    return render(request, "web/landing.html", context)


def use_snippets(artifact: Artifact, version: Version, signature: list, runs: list[str], files: list,
                 generation: str) -> snippets.Snippets:
    """The "Use it" snippets for this kind: text generation for a language model (one the hub builds or
    has built for generation), tensors for other models, downloads for datasets, MLCube for projects."""
    language_model = bool(generation) or (artifact.kind == "model" and (
        version.metadata.get("task") == "text-generation" or version.jobs.filter(kind="generation").exists()))
    if language_model:
        hugging_face = any(f.path == "config.json" for f in files)
        return snippets.for_generation(artifact, version, settings.HUB_PUBLIC_URL, hugging_face)
    return snippets.for_version(artifact, version, signature, runs)


def generate_url(artifact, version) -> str:
    """The version's ``…/generate`` when it (or its upload) has a generation model, else ""."""
    from hub.generation.services import generation_model

    if artifact.kind != "model" or version.is_deleted:
        return ""
    try:
        generation_model(version)
    except HubError:
        return ""
    return f"/api/v1/artifacts/{artifact.owner.username}/{artifact.name}/versions/{version.label}/generate"


def embedded_jsonld(record) -> str:
    """The schema.org record for a ``<script type="application/ld+json">``, safe inside HTML."""
    from ontology.exports import schema_org

    text = json.dumps(schema_org(record), indent=2)  # its context is self-contained: it parses offline
    return mark_safe(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))  # noqa: S308


def view(request: HttpRequest, pid: str) -> HttpResponse:
    """The landing page of a PID (where the resolver sends browsers): the page with its signposts, or the
    tombstone (410) of a deleted one, which keeps its signposts to the withdrawn record."""
    user = request_user(request)
    readable = readable_pid(user, pid)
    if readable is None:
        return resolver.not_found(request, pid)
    canonical, artifact, version = readable
    viewer = Viewer(user)
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    record = record_for(version or artifact, viewer)
    context = {
        "artifact": artifact,
        "version": version or current_version(artifact),  # the upload leads; its ONNX conversion is offered
        "is_concept": version is None,
        "pid": canonical,
        "versions": versions_listed(artifact),
        "jsonld": embedded_jsonld(record),
        "record": record,
        "signposts": signposting.links(record),
    }
    if gone:
        response = render(request, "registry/tombstone.html", context, status=410)
    else:
        response = page(request, viewer, context)
    if choose(request.headers.get("Accept", ""), ["text/html", xhtml.MEDIA_TYPE]) == xhtml.MEDIA_TYPE:
        response.content = xhtml.to_xhtml(response.content.decode())
        response["Content-Type"] = f"{xhtml.MEDIA_TYPE}; charset=utf-8"
    response["Link"] = signposting.link_header(record)
    return resolver.vary(response)
