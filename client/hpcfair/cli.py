"""``hpcfair``: the command line. Errors are one line (``HPCFAIR_DEBUG=1`` shows tracebacks); ``--json``
prints machine-readable results."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hpcfair import settings
from hpcfair.errors import HubError

app = typer.Typer(help="HPCFair Hub client: find, publish, convert and run AI models and datasets.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
jobs_app = typer.Typer(help="Your jobs on the hub: list, show, wait, cancel.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
org_app = typer.Typer(help="Organizations: list, create, show, members and roles.", no_args_is_help=True)
app.add_typer(org_app, name="org")

Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
_state: dict[str, Any] = {}


@app.callback()
def main(endpoint: Annotated[str | None, typer.Option(help="The hub (default: HPCFAIR_ENDPOINT, ~/.hpcfair).")] = None,
         token: Annotated[str | None, typer.Option(help="An API token (default: HPCFAIR_TOKEN, ~/.hpcfair).")] = None,
         ) -> None:
    _state.update(endpoint=endpoint, token=token)

CLASS_NAMES_SHOWN = 20  # class names printed beside an output; more are shortened with …


def _api():
    from hpcfair.api import modelAPI

    return modelAPI(_state.get("endpoint"), _state.get("token"))


def _print(data: Any, as_json: bool, text: str | None = None) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        typer.echo(text if text is not None else json.dumps(data, indent=2, default=str))


@app.command(epilog="Example: hpcfair login --endpoint https://hub.example.org  (prints a URL and a code to approve "
                     "in any browser); hpcfair login --token hpcf_...  (saves a token you made); hpcfair login "
                     "--username alice  (makes a token with your hub password)")
def login(endpoint: Annotated[str | None, typer.Option(help="The hub (as the global --endpoint).")] = None,
          token: Annotated[str | None, typer.Option(help="Save this API token (from your account page) instead of "
                                                         "signing in.")] = None,
          username: Annotated[str | None, typer.Option(help="Make a token with this username and its password "
                                                            "(HTTP Basic) instead of the device sign-in.")] = None,
          password_stdin: Annotated[bool, typer.Option(help="Read the password from standard input (implies a "
                                                            "password sign-in).")] = False,
          scope: Annotated[str, typer.Option(help="read or write.")] = "write") -> None:
    """Sign in and save the token with the endpoint in ~/.hpcfair: by default with the device authorization
    grant (approve the printed code in any browser; the token expires and is renewed with its refresh token),
    or with a token you made (--token), or with a hub password (--username)."""
    from hpcfair import device
    from hpcfair.client import HubClient

    token = token or _state.get("token")
    client = HubClient(endpoint or _state.get("endpoint"), token)
    tokens: dict[str, Any] | None = None
    if token:
        raw = token
    elif username or password_stdin:
        username = username or typer.prompt("username")
        password = sys.stdin.readline().rstrip("\n") if password_stdin else getpass.getpass("password: ")
        raw = client.create_token(username, password, scope=scope, name="hpcfair login")
    else:
        tokens = device.login(client.endpoint, scope, echo=lambda line: typer.echo(line, err=True))
        raw = tokens["access_token"]
    me = HubClient(client.endpoint, raw).me()
    if not me.get("authenticated"):
        raise HubError("The hub does not accept this token.", code="invalid_token")
    path = device.save(client.endpoint, tokens) if tokens else settings.save_login(client.endpoint, raw)
    typer.echo(f"signed in to {client.endpoint} as {me['username']} ({me['scope']}); saved in {path}")


@app.command(epilog="Example: hpcfair whoami --json")
def whoami(as_json: Json = False) -> None:
    """Who the hub thinks you are."""
    api = _api()
    me = api.client.me()
    text = (f"{me['username']} on {api.client.endpoint} (token scope {me['scope']})" if me.get("authenticated")
            else f"anonymous on {api.client.endpoint}; run 'hpcfair login'")
    _print({**me, "endpoint": api.client.endpoint}, as_json, text)


@app.command(epilog="Example: hpcfair search encoder --filter framework=onnx --filter kind=model")
def search(query: Annotated[str, typer.Argument(help="Words to look for.")] = "",
           filter: Annotated[list[str] | None, typer.Option("--filter", "-f",  # noqa: A002
                                                           help="A facet filter key=value (repeatable).")] = None,
           as_json: Json = False) -> None:
    """Search models and datasets by words and facets."""
    filters: dict[str, list[str]] = {}
    for item in filter or []:
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise HubError(f"--filter {item!r}: write key=value, e.g. framework=onnx", code="invalid")
        filters.setdefault(key, []).append(value)
    results = _api().search(query, **filters)
    _print(results, as_json, _search_lines(results))


@app.command(epilog="Example: hpcfair show demo/encoder@1   or   hpcfair show ark:/99999/fk4...")
def show(ref: Annotated[str, typer.Argument(help="A PID or owner/name[@version].")], as_json: Json = False) -> None:
    """A version: PID, metadata and files (``owner/name`` alone: the version its page opens on, not the hub's
    conversion of it)."""
    from hpcfair.client import as_shown

    info = _api().client.resolve(as_shown(ref))
    meta = info.get("metadata") or {}
    lines = [f"{info['artifact']}@{info['version']}  {info['pid']}", f"title: {meta.get('title', '')}"]
    lines += [f"{key}: {meta[key]}" for key in ("framework", "format", "task", "license", "opset") if meta.get(key)]
    lines += [f"file: {f['path']}  {f['size']} bytes  sha256 {f['sha256']}" for f in info["files"]]
    lines += [f"{p['relation']}: {p['target']} ({p['target_pid']})" if p.get("target_pid")
              else f"{p['relation']}: {p.get('description') or 'a restricted artifact'} (you may not see it)"
              for p in info.get("provenance") or []]
    lines += [f"{d['relation']} by: {d['version']} ({d['version_pid']})" for d in info.get("derivatives") or []]
    if info.get("files_access", "open") != "open":
        access = _api().client.files_access(info["artifact"], info["version"])
        info["access"] = access
        until = f" until {access['embargo_until'][:10]}" if access.get("embargo_until") else ""
        state = ("you may download them" + (" (you hold a grant)" if access.get("granted") else "")
                 if access["may_read_files"] else f"ask with: hpcfair request-access {info['artifact']}")
        lines.append(f"files: {access['files_access']}{until}; {state}")
    _print(info, as_json, "\n".join(lines))


@app.command("request-access", epilog="Example: hpcfair request-access alice/encoder --purpose 'reproduce "
                                      "table 2' --field affiliation='ORNL' --agree")
def request_access(name: Annotated[str, typer.Argument(help="owner/name")],
                   purpose: Annotated[str, typer.Option(help="What you will use the files for.")],
                   field: Annotated[list[str] | None, typer.Option("--field", help="An answer the owner asks "
                                                                   "for, name=value (repeatable).")] = None,
                   agree: Annotated[bool, typer.Option(help="Agree to the owner's terms.")] = False,
                   as_json: Json = False) -> None:
    """Ask an artifact's owner for its restricted or embargoed files; you get the answer by e-mail and here."""
    answers = {}
    for item in field or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise HubError(f"--field {item!r}: write name=value, e.g. affiliation=ORNL", code="invalid")
        answers[key] = value
    made = _api().client.request_access(name, purpose, answers, agree_terms=agree)
    text = (f"request {made['id']} for {name}: approved; download its files now" if made["state"] == "approved"
            else f"request {made['id']} for {name}: {made['state']}; the owner is told by e-mail")
    _print(made, as_json, text)


@app.command(epilog="Example: hpcfair grants alice/encoder   or   hpcfair grants alice/encoder --add bob "
                    "--expires 2027-01-01T00:00:00Z   or   --revoke 3")
def grants(name: Annotated[str, typer.Argument(help="owner/name")],
           add: Annotated[str | None, typer.Option(help="Grant this person the files (owners).")] = None,
           expires: Annotated[str | None, typer.Option(help="With --add: when the grant ends (ISO 8601).")] = None,
           revoke: Annotated[int | None, typer.Option(help="Revoke the grant with this id.")] = None,
           as_json: Json = False) -> None:
    """The grants on an artifact's restricted files (owners: all of them; anyone else: their own)."""
    client = _api().client
    if add:
        made = client.grant(name, add, expires)
        _print(made, as_json, f"grant {made['id']}: {made['user']} may download the files of {name}"
               + (f" until {made['expires']}" if made.get("expires") else ""))
        return
    if revoke is not None:
        client.revoke_grant(name, revoke)
        _print({"revoked": revoke}, as_json, f"grant {revoke} on {name} revoked")
        return
    found = client.grants(name)
    lines = [f"{g['id']:>5}  {g['user']:24} {'active' if g['active'] else 'ended':7} "
             f"{('until ' + g['expires']) if g.get('expires') else 'no expiry'}" for g in found]
    _print(found, as_json, "\n".join(lines) or f"no grants on {name}")


@app.command(epilog="Example: hpcfair upload my-encoder encoder.pt --metadata card/README.md --creator "
                     "'Ada Lovelace, 0000-0002-1825-0097' --private; a model folder: hpcfair upload minilm "
                     "./all-MiniLM-L6-v2/")
def upload(name: Annotated[str, typer.Argument(help="The artifact name (yours; created if needed).")],
           files: Annotated[list[Path] | None, typer.Argument(help="The files of the version; a folder gives every "
                                                                   "file under it, at its path inside the folder.")
                            ] = None,
           metadata: Annotated[Path | None, typer.Option(help="Metadata: YAML, JSON or a card named README.md "
                                                               "(published as the version's README.md).")] = None,
           kind: Annotated[str, typer.Option(help="model, dataset or project.")] = "model",
           private: Annotated[bool, typer.Option(help="Only you and your collaborators see it.")] = False,
           version: Annotated[str, typer.Option(help="The version label (default: the next number).")] = "",
           creator: Annotated[list[str] | None, typer.Option(
               help="A creator: 'Name' or 'Name, ORCID' (repeatable); wins over the metadata's and the card's "
                    "creators (a Hugging Face card has none).")] = None,
           reference: Annotated[list[str] | None, typer.Option(
               help="Data by reference (repeatable): a file or folder under a root the hub declares (/lustre/…) or "
                    "s3://bucket/key; the bytes stay there, the hub reads them once for size and sha256.")] = None,
           fetch: Annotated[list[str] | None, typer.Option(
               help="A URL the hub fetches the file from (repeatable; http(s) or s3, of a site the hub allows).")
                            ] = None,
           as_json: Json = False) -> None:
    """Publish a version of an artifact from files (sent, referenced in place or fetched by the hub) and metadata."""
    info = _api().upload(name=name, files=[str(f.resolve()) for f in files or []],
                         metadata=metadata and str(metadata), kind=kind, visibility="private" if private else "public",
                         version=version, creators=creator, references=reference, fetches=fetch)
    _print(info, as_json, f"published {info['artifact']}@{info['version']}  {info['pid']}")


@app.command(epilog="Example: hpcfair download demo/encoder@1 --dest models/ --file model.onnx")
def download(ref: Annotated[str, typer.Argument(help="A PID or owner/name[@version].")],
             dest: Annotated[Path, typer.Option(help="The folder to write into.")] = Path("."),
             file: Annotated[list[str] | None, typer.Option(help="Only this file (repeatable).")] = None,
             as_json: Json = False) -> None:
    """Download a version's files (resumable, sha256-checked, cached)."""
    paths = _api().download(ref, dest, file)
    _print([str(p) for p in paths], as_json, "\n".join(str(p) for p in paths))


@app.command(epilog="Example: hpcfair run collaboration.yaml   (see 'hpcfair schema' for every key)")
def run(config: Annotated[Path, typer.Argument(help="A task config (YAML).")], as_json: Json = False) -> None:
    """Run a task config: conversion, inference, collaboration, container, optimize, search, upload, download,
    finetune, generate."""
    from hpcfair.config import load

    loaded = load(config)
    result = _api().run(loaded)
    _print(_jsonable(result), as_json, _task_text(loaded.args.general_args.task, result))


@app.command(epilog="Example: hpcfair infer demo/encoder@1 input.npy --output out.npz --device cpu")
def infer(ref: Annotated[str, typer.Argument(help="A PID, owner/name[@version] or a local .onnx file.")],
          input: Annotated[Path, typer.Argument(help=".npy, .npz, .json, .txt or .csv, or a variable: "  # noqa: A002
                                                     "FILE.nc:/VARIABLE")],
          output: Annotated[Path | None, typer.Option(help="Where to write the outputs (.npz, .npy, .json, .txt)."
                                                      )] = None,
          device: Annotated[str, typer.Option(help="cpu, gpu, or local (this machine).")] = "cpu",
          threads: Annotated[int, typer.Option(help="ONNX Runtime threads (worker_num).")] = 0,
          queue: Annotated[bool, typer.Option(help="Queue as a job when no worker of the device is up.")] = False,
          file: Annotated[str | None, typer.Option(help="Which ONNX file of a version holding several (an "
                                                        "ensemble), e.g. booster.onnx.")] = None,
          as_json: Json = False) -> None:
    """Run a model on an input file."""
    cfg = {"general_args": {"task": "inference"},
           "device_args": {"device": device, "worker_num": threads, "if_no_worker": "queue" if queue else "refuse"},
           "task_args": {"model_file": _ref_or_path(ref), "input": str(input.resolve()),
                         **({"onnx_file": file} if file else {})},
           "out_args": {"export_file": str(output.resolve())} if output else {}}
    api = _api()
    result = api.inference(cfg)
    labels = None if as_json or Path(ref).expanduser().exists() else _class_labels(api, ref)
    _print(_jsonable(result), as_json, _summary(result, labels))


def _class_labels(api: Any, ref: str) -> list[str] | None:
    """The model's class names as the hub records them (the version's ``class_labels``; offline, from the
    cached record), or None: a lookup that fails does not fail the run it describes."""
    try:
        labels = api.client.resolve(ref).get("class_labels")
    except (HubError, OSError):
        return None
    return labels if isinstance(labels, list) and labels else None


def class_names(outputs: dict[str, Any], labels: list[str] | None) -> dict[str, str]:
    """Class names to print beside outputs (issue 41, point 4; the page's "Try it" follows the same rule): an
    integer output whose values are class indices gets their names; otherwise a [rows, classes] float output
    (probabilities, logits) gets each row's most likely class."""
    import numpy as np

    if not labels:
        return {}

    def cut(names: list[str]) -> str:
        return ", ".join(names[:CLASS_NAMES_SHOWN]) + (", …" if len(names) > CLASS_NAMES_SHOWN else "")

    named = {}
    for name, value in outputs.items():
        array = np.asarray(value)
        if array.dtype.kind in "iu" and array.size and array.min() >= 0 and array.max() < len(labels):
            named[name] = cut([labels[int(v)] for v in array.ravel()])
    if named:
        return named
    for name, value in outputs.items():
        array = np.asarray(value)
        if array.dtype.kind == "f" and array.ndim == 2 and array.shape[0] and array.shape[1] == len(labels):
            named[name] = "most likely: " + cut([labels[int(i)] for i in array.argmax(axis=1)])
    return named


@app.command(epilog='Example: hpcfair generate alice/tiny-llama "The hub converts" --max-new-tokens 64')
def generate(ref: Annotated[str, typer.Argument(help="A language model: a PID or owner/name[@version].")],
             prompt: Annotated[str, typer.Argument(help="The text to continue (with --chat: your message).")],
             max_new_tokens: Annotated[int, typer.Option(help="Tokens to add.")] = 128,
             temperature: Annotated[float, typer.Option(help="0 is greedy; higher is more varied.")] = 1.0,
             top_p: Annotated[float | None, typer.Option(help="Nucleus sampling.")] = None,
             top_k: Annotated[int | None, typer.Option(help="Sample from the k likeliest tokens.")] = None,
             seed: Annotated[int | None, typer.Option(help="Repeat a sample exactly.")] = None,
             stop: Annotated[list[str] | None, typer.Option(help="Text that ends generation (repeatable).")] = None,
             chat: Annotated[bool, typer.Option(help="Send the prompt as a user message through the model's chat "
                                                     "template.")] = False,
             device: Annotated[str, typer.Option(help="hub: on the hub; local: on this machine's CPU with the "
                                                      "cached generation build (works with HPCFAIR_OFFLINE=1).")
                               ] = "hub",
             as_json: Json = False) -> None:
    """Generate text with a language model on the hub (or here: --device local), printed as it streams in."""
    asked = {"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt}
    if device not in ("hub", "local"):
        raise typer.BadParameter("--device is hub or local")
    if device == "local":
        from hpcfair._generation import generate_local

        options = {k: v for k, v in {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p,
                                     "top_k": top_k, "seed": seed, "stop": stop}.items() if v not in (None, [])}
        streamed = None if as_json else (lambda text: typer.echo(text, nl=False))
        result = generate_local(_api().client, ref, {**asked, **options}, streamed)
        if as_json:
            _print(result, True)
        else:
            typer.echo(f"\n[{result.get('completion_tokens', 0)} tokens, {result.get('finish_reason', '')}, "
                       f"{result['version']} on this machine]", err=True)
        return
    cfg = {"general_args": {"task": "generate"},
           "task_args": {"model_file": ref, **asked, "max_new_tokens": max_new_tokens, "temperature": temperature,
                         **{k: v for k, v in {"top_p": top_p, "top_k": top_k, "seed": seed, "stop": stop}.items()
                            if v is not None}}}
    streamed = None if as_json else (lambda text: typer.echo(text, nl=False))
    result = _api().generate(cfg, streamed)
    if as_json:
        _print(result, True)
    else:
        typer.echo(f"\n[{result.get('completion_tokens', 0)} tokens, {result.get('finish_reason', '')}]", err=True)


@app.command(epilog="Example: hpcfair convert encoder.pt --output encoder.onnx --opset 17   or   hpcfair convert "
                     "alice/tiny-llama --to gguf --gguf-type q8_0 --output models/")
def convert(source: Annotated[str, typer.Argument(help="A local model file, a PID or owner/name[@version].")],
            output: Annotated[Path | None, typer.Option(help="The ONNX file to write (--to gguf: the folder for "
                                                             "the GGUF file).")] = None,
            opset: Annotated[int | None, typer.Option(help="Target ONNX opset.")] = None,
            on_hub: Annotated[bool, typer.Option(help="Publish the file and convert on the hub.")] = False,
            to: Annotated[str, typer.Option(help="onnx, or gguf: a hub language model to a GGUF file for "
                                                 "llama.cpp, made on the hub.")] = "onnx",
            gguf_type: Annotated[str, typer.Option(help="--to gguf: f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, "
                                                        "q6_k.")] = "q8_0",
            as_json: Json = False) -> None:
    """Convert a model to ONNX and verify it against the original, or a language model to GGUF."""
    if to == "gguf":
        from hpcfair._conversion import gguf

        made = gguf(_api().client, source, gguf_type, output.resolve() if output else None)
        _print(made, as_json, f"{made['version']}  {made['pid']} (verified: {made['verified']})"
               + "".join(f"\n{path}" for path in made["files"]))
        return
    if to != "onnx":
        raise typer.BadParameter("--to is onnx or gguf")
    cfg = {"general_args": {"task": "conversion", "upload": on_hub},
           "model_args": {"model_file": _ref_or_path(source), **({"onnx_version": opset} if opset else {})},
           "out_args": {"export_file": str(output.resolve())} if output else {}}
    reports = _api().conversion(cfg)
    _print(reports, as_json, _summary(reports))


@app.command(epilog="Example: hpcfair finetune finetune.yaml   (general_args: {task: finetune}; "
                     "see docs/guides/finetuning.md)")
def finetune(config: Annotated[Path, typer.Argument(help="A finetune task config (YAML).")],
             as_json: Json = False) -> None:
    """Fine-tune a model on a dataset: on the hub (a new model version of yours) or with device: local."""
    result = _api().finetune(config)
    _print(_jsonable(result), as_json, _finetune_text(result))


def _finetune_text(result: dict[str, Any]) -> str:
    metric = result.get("metric", "loss")
    final = result.get("final", {})
    made = result.get("version") or result.get("export_file") or "done"
    return f"{made}: validation {metric} {result.get('base', {}).get(metric)} -> {final.get(metric)}"


@app.command(epilog="Example: hpcfair cite demo/encoder@1 --style bibtex")
def cite(ref: Annotated[str, typer.Argument(help="A PID or owner/name[@version].")],
         style: Annotated[str, typer.Option(help="any CSL style (apa, chicago, ieee, harvard, nature, …; "
                                                 "citation is apa), bibtex, csl-json, ris, datacite-json, "
                                                 "datacite-xml, jsonld, turtle, rdfxml, ntriples, "
                                                 "schemaorg, croissant (datasets); datacite means datacite-json")
                          ] = "citation") -> None:
    """How to cite a version."""
    typer.echo(_api().client.cite(ref, style).rstrip())


@app.command(epilog="Example: hpcfair examples papers && cd papers && hpcfair run conversion.yaml")
def examples(dest: Annotated[Path, typer.Argument(help="The folder to put them in (made if missing).")]) -> None:
    """The papers' example configs, with the model checkpoints and input they name (needs hpcfair[convert])."""
    from hpcfair.starter import make_examples

    folder = make_examples(dest)
    typer.echo(f"examples in {folder}: cd {folder} && hpcfair run conversion.yaml (Listing 1), then "
               "collaboration.yaml (Listing 2) and container.yaml (Listing 4; device: gpu where there is a GPU)")


@app.command(epilog="Example: hpcfair schema > hpcfair-config.schema.json")
def schema() -> None:
    """The JSON Schema of task configs (for editors)."""
    from hpcfair.config import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@jobs_app.command("list", epilog="Example: hpcfair jobs list --state running")
def jobs_list(state: Annotated[str | None, typer.Option(help="queued, running, succeeded, failed, cancelled")] = None,
              kind: Annotated[str | None, typer.Option(help="convert, infer, collaborate, ...")] = None,
              as_json: Json = False) -> None:
    """Your jobs, newest first."""
    found = _api().client.jobs(**{k: v for k, v in {"state": state, "kind": kind}.items() if v})
    lines = [f"{j['id']}  {j['kind']:12} {j['state']:10} {(j.get('version') or {}).get('name', '')}" for j in found]
    _print(found, as_json, "\n".join(lines) or "no jobs")


@jobs_app.command("show", epilog="Example: hpcfair jobs show 5f0c...")
def jobs_show(job_id: str, as_json: Json = False) -> None:
    """One job: state, progress, log, result."""
    job = _api().client.job(job_id)
    _print(job, as_json, _job_text(job))


@jobs_app.command("wait", epilog="Example: hpcfair jobs wait 5f0c... --timeout 600")
def jobs_wait(job_id: str, timeout: Annotated[float, typer.Option(help="Seconds to wait.")] = 3600,
              as_json: Json = False) -> None:
    """Wait for a job to finish (exit status 1 when it failed)."""
    job = _api().client.wait(job_id, timeout=timeout)
    _print(job, as_json, _job_text(job))


@jobs_app.command("cancel", epilog="Example: hpcfair jobs cancel 5f0c...")
def jobs_cancel(job_id: str, as_json: Json = False) -> None:
    """Cancel a queued or running job; what it had made is removed."""
    job = _api().client.cancel(job_id)
    _print(job, as_json, _job_text(job) + ("" if job["state"] == "cancelled" else "\nstopping; see: hpcfair jobs "
                                           f"wait {job['id']}"))


def _job_text(job: dict[str, Any]) -> str:
    lines = [f"{job['id']}  {job['kind']}  {job['state']}  {round(100 * (job.get('progress') or 0))}%"]
    if job.get("error_code"):
        lines.append(f"error [{job['error_code']}]: {job.get('error_detail')}")
    if job.get("result"):
        lines.append("result: " + json.dumps(job["result"], default=str)[:500])
    return "\n".join(lines)


def _ref_or_path(value: str) -> str:
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else value


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _array_text(name: str, value: Any) -> str:
    """``name [shape] dtype: values``, the values as numpy prints them, long ones shortened with ``...``."""
    import numpy as np

    values = np.array2string(np.asarray(value), threshold=24, edgeitems=3, precision=6, separator=" ",
                             max_line_width=100).replace("\n", "\n  ")
    return f"{name} {list(np.shape(value))} {getattr(value, 'dtype', '')}: {values}"


def _search_lines(results: list[dict[str, Any]]) -> str:
    # the version each artifact stands for (its newest upload, not the hub's 1.0-onnx); older hubs say latest only
    lines = [f"{r['full_name']:40} {r['kind']:8} {r.get('current_version') or r.get('latest_version') or '-':10} "
             f"{r['title']}" for r in results]
    return "\n".join(lines) or "nothing found"


def _task_text(task: str, result: Any) -> str:
    """What ``hpcfair run`` prints for each task: lines a person reads (``--json`` gives the whole result)."""
    if task == "finetune":
        return _finetune_text(result)
    if task == "search":
        return _search_lines(result)
    if task == "generate":
        return "\n".join(r["text"] for r in result["results"]) if "results" in result else result["text"]
    if task == "upload":
        return f"published {result['artifact']}@{result['version']}  {result['pid']}"
    if task == "download":
        return "\n".join(str(path) for path in result)
    if task == "optimize":
        return "\n".join(f"{r['model']} ({r['where']}): {', '.join(r.get('files') or []) or 'no files'}"
                         for r in result)
    if task == "container":
        built = f"image {result.get('image')} ({result.get('engine')})"
        body = (result.get("output") or "").rstrip() if "output" in result else _summary(result.get("outputs") or {})
        saved = f"\nwritten to {result['export_file']}" if result.get("export_file") else ""
        return f"{built}\n{body}{saved}"
    if isinstance(result, dict) and "verified" in result and "version" in result:  # a merged chain
        saved = f", written to {result['export_file']}" if result.get("export_file") else ""
        return f"merged: {result['version']}  {result['pid']} (verified: {result.get('verified')}{saved})"
    return _summary(result)


def _checked(report: dict[str, Any]) -> str:
    """A conversion's check in words: never "verified: None" (issue 55) while the hub has not checked it yet."""
    if report.get("verified") is None:
        where = f": hpcfair show {report['pid']} tells when it is" if report.get("pid") else ""
        return f"not verified yet{where}"
    if report.get("checked_only"):  # uploaded as ONNX: checked, with no original to compare against
        failed = "FAILED (its verify job says why: hpcfair jobs list --kind verify)"
        return f"checked on the hub: {'passed' if report['verified'] else failed}"
    diff = report.get("max_abs_diff")
    return (f"verified: {report['verified']}" + (f", max abs difference {diff:.3g}" if isinstance(diff, int | float)
                                                 else ""))


def _summary(result: Any, labels: list[str] | None = None) -> str:
    if isinstance(result, dict) and result and all(hasattr(v, "shape") for v in result.values()):
        named = class_names(result, labels)
        return "\n".join(_array_text(name, v) + (f"\n  → {named[name]}" if name in named else "")
                         for name, v in result.items())
    if isinstance(result, list) and result and isinstance(result[0], dict) and "export_file" in result[0]:
        return "\n".join(f"{r['model']}: {r['export_file']} ({_checked(r)})" for r in result)
    return json.dumps(_jsonable(result), indent=2, default=str)


def _is_usage_error(exc: BaseException) -> bool:
    """A command line that does not parse: click's ``ClickException`` family, told by its shape since typer
    0.22 and later raise those of their own copy of click."""
    return callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int)


def _usage_text(exc: Any) -> str:
    """The message, and where to look: ``Try 'hpcfair login --help'.``"""
    context = getattr(exc, "ctx", None)
    command = context.command_path if context is not None else "hpcfair"
    return f"{exc.format_message().rstrip('.')}. Try '{command} --help'."


def entry() -> None:
    """The console script: one-line errors unless HPCFAIR_DEBUG is set (then also the library's logs: the
    sandbox's child's tracebacks)."""
    if settings.debug():
        import logging

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        app(standalone_mode=False, prog_name="hpcfair")
    except HubError as exc:
        if settings.debug():
            raise
        request = f" (request {exc.request_id})" if exc.request_id else ""
        typer.echo(f"error [{exc.code or 'error'}]: {exc.message}{request}", err=True)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:
        if _is_usage_error(exc):  # click's (or typer's own copy of click's) usage errors: their own exit code
            typer.echo(f"error [usage]: {_usage_text(exc)}", err=True)
            sys.exit(exc.exit_code)
        if settings.debug():
            raise
        typer.echo(f"error [{type(exc).__name__}]: {exc} (HPCFAIR_DEBUG=1 shows the traceback)", err=True)
        sys.exit(1)


# --- organizations -------------------------------------------------------------------------------------


@org_app.command("list", epilog="Example: hpcfair org list --mine")
def org_list(mine: Annotated[bool, typer.Option(help="Only yours, with your role.")] = False,
             as_json: Json = False) -> None:
    """Organizations on the hub."""
    found = _api().client.orgs(mine=mine)
    lines = [f"{o['name']:24} {o.get('role') or '':6} {o.get('title') or ''}".rstrip() for o in found]
    _print(found, as_json, "\n".join(lines) or "no organizations")


@org_app.command("create", epilog="Example: hpcfair org create climate-lab --title 'Climate Lab'")
def org_create(name: str, title: Annotated[str, typer.Option(help="A display name.")] = "",
               as_json: Json = False) -> None:
    """Create an organization, with you as its admin."""
    made = _api().client.create_org(name, title=title)
    _print(made, as_json, f"created {made['name']}; you are its admin")


@org_app.command("show", epilog="Example: hpcfair org show climate-lab")
def org_show(name: str, as_json: Json = False) -> None:
    """An organization and, for members, its members."""
    found = _api().client.org(name)
    lines = [f"{found['name']}: {found.get('title') or ''}".rstrip(": "), f"your role: {found.get('role') or 'none'}"]
    lines += [f"  {m['username']:24} {m['role']}" for m in found.get("members", [])]
    _print(found, as_json, "\n".join(lines))


@org_app.command("add", epilog="Example: hpcfair org add climate-lab bob --role write")
def org_add(name: str, username: str,
            role: Annotated[str, typer.Option(help="read, write (publish) or admin.")] = "read",
            as_json: Json = False) -> None:
    """Add a member, or change a member's role (admins)."""
    member = _api().client.set_member(name, username, role)
    _print(member, as_json, f"{member['username']} is a member of {name} with the {member['role']} role")


@org_app.command("remove", epilog="Example: hpcfair org remove climate-lab bob")
def org_remove(name: str, username: str) -> None:
    """Take a member out (admins), or leave yourself (the last admin cannot)."""
    _api().client.remove_member(name, username)
    typer.echo(f"{username} is no longer a member of {name}")


@app.command(epilog="Example: hpcfair transfer alice/encoder climate-lab")
def transfer(name: Annotated[str, typer.Argument(help="owner/name")], to: str, as_json: Json = False) -> None:
    """Give an artifact to another owner (you, or an organization you write in); its PIDs keep resolving and
    the old name redirects."""
    moved = _api().client.transfer_artifact(name, to)
    _print(moved, as_json, f"{name} is now {moved['full_name']} ({moved['pid']})")


if __name__ == "__main__":
    entry()
