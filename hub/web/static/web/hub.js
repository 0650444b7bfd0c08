/* HPCFair Hub pages: small progressive enhancements over server-rendered HTML, talking to the REST API
   (session + CSRF). No framework, no outside resources. */
"use strict";

const hub = {
  csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  },
  /** fetch JSON from the API; resolves to {ok, status, body, headers}; never throws on HTTP errors. */
  async api(method, url, body, extra) {
    const init = { method, credentials: "same-origin", headers: { "X-CSRFToken": hub.csrf(), Accept: "application/json" } };
    if (body !== undefined && !(body instanceof Blob) && !(body instanceof ArrayBuffer)) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    } else if (body !== undefined) {
      init.body = body;
    }
    Object.assign(init.headers, (extra || {}).headers || {});
    const response = await fetch(url, init);
    let parsed = null;
    const type = response.headers.get("Content-Type") || "";
    if (type.includes("json")) {
      try { parsed = await response.json(); } catch (e) { parsed = null; }
    }
    return { ok: response.ok, status: response.status, body: parsed, headers: response.headers };
  },
  sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); },
  size(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
    return `${bytes.toFixed(i ? 1 : 0)} ${units[i]}`;
  },
  message(error) {
    if (!error) return "Something went wrong; try again.";
    return error.detail ? `${error.detail}${error.code ? ` [${error.code}]` : ""}` : String(error);
  },
};

/* ---- copy buttons ------------------------------------------------------------------------------ */
function setupCopy() {
  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
      } catch (e) {  // not a secure context: select it for Ctrl-C
        const range = document.createRange();
        range.selectNodeContents(document.getElementById(button.dataset.copy));
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      const label = button.textContent;
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = label; }, 1500);
    });
  });
  document.querySelectorAll("[data-autosubmit]").forEach((select) => {
    select.addEventListener("change", () => select.form.submit());
  });
}

/* ---- live job status ------------------------------------------------------------------------------ */
const FINAL = new Set(["succeeded", "failed", "cancelled"]);

function watchJobs() {
  document.querySelectorAll("[data-job]").forEach((row) => {
    if (FINAL.has(row.dataset.state)) return;
    let delay = 700;
    const tick = async () => {
      const result = await hub.api("GET", `/api/v1/jobs/${row.dataset.job}/`).catch(() => null);
      if (result && result.ok) {
        const job = result.body;
        const state = row.querySelector(".state");
        if (state) {
          state.innerHTML = "";
          const span = document.createElement("span");
          span.className = `state-${job.state}`;
          span.textContent = job.state;
          state.appendChild(span);
          if (job.error_detail) {
            const error = document.createElement("span");
            error.className = "error";
            error.textContent = ` ${job.error_detail}`;
            state.appendChild(error);
          }
        }
        const progress = row.querySelector("progress");
        if (progress) progress.value = job.progress;
        row.dataset.state = job.state;
        if (FINAL.has(job.state)) {
          if (row.hasAttribute("data-reload-when-done")) window.location.reload();
          return;
        }
      }
      delay = Math.min(delay * 1.3, 4000);
      setTimeout(tick, delay);
    };
    setTimeout(tick, delay);
  });
}

/* ---- class names beside a classifier's outputs (issue 41, point 4) ----------------------------------
   The same rule as hpcfair's cli.class_names: an integer output whose values are class indices gets their names;
   otherwise a [rows, classes] float output (probabilities, logits) gets each row's most likely class. */
hub.classLabels = () => {
  const node = document.getElementById("try-labels");
  return node ? JSON.parse(node.textContent) : null;
};
function classNames(outputs, dtypes, labels) {
  const named = {};
  if (!labels || !labels.length) return named;
  const SHOWN = 20;
  const cut = (names) => names.slice(0, SHOWN).join(", ") + (names.length > SHOWN ? ", …" : "");
  for (const [name, value] of Object.entries(outputs)) {
    const flat = [value].flat(Infinity);
    if (/^u?int/.test(dtypes[name] || "") && flat.length && flat.every((v) => Number.isInteger(v) && v >= 0 && v < labels.length)) {
      named[name] = cut(flat.map((v) => labels[v]));
    }
  }
  if (Object.keys(named).length) return named;
  for (const [name, value] of Object.entries(outputs)) {
    const rows = Array.isArray(value) && value.every((row) => Array.isArray(row) && row.length === labels.length &&
                                                     row.every((v) => typeof v === "number")) ? value : null;
    if (/^float|^bfloat/.test(dtypes[name] || "") && rows && rows.length) {
      named[name] = "most likely: " + cut(rows.map((row) => labels[row.indexOf(Math.max(...row))]));
    }
  }
  return named;
}

/* ---- try it --------------------------------------------------------------------------------------- */
/** "Generate": the prompt to …/generate, its server-sent events shown as they arrive. */
function setupGenerate() {
  const form = document.getElementById("generate-form");
  if (!form) return;
  const output = document.getElementById("generate-output");
  const status = document.getElementById("generate-status");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const text = data.get("prompt");
    const body = { max_new_tokens: Number(data.get("max_new_tokens")), temperature: Number(data.get("temperature")) };
    if (data.get("chat")) body.messages = [{ role: "user", content: text }]; else body.prompt = text;
    output.textContent = "";
    status.textContent = "generating…";
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const response = await fetch(form.dataset.generateUrl, {
        method: "POST", credentials: "same-origin", body: JSON.stringify(body),
        headers: { "X-CSRFToken": hub.csrf(), "Content-Type": "application/json", Accept: "text/event-stream" },
      });
      if (!response.ok) {
        let error = null;
        try { error = await response.json(); } catch (e) { error = null; }
        status.textContent = hub.message(error);
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = "message", payload = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) payload += line.slice(5).trim();
          }
          const parsed = JSON.parse(payload);
          if (name === "message") output.textContent += parsed.text;
          else if (name === "done") status.textContent = `${parsed.completion_tokens} tokens, ${parsed.finish_reason}`;
          else if (name === "error") status.textContent = hub.message(parsed);
        }
      }
    } catch (e) {
      status.textContent = hub.message(e);
    } finally {
      button.disabled = false;
    }
  });
}

function setupTry() {
  const form = document.getElementById("try-form");
  if (!form) return;
  const out = document.getElementById("try-result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    out.textContent = "Running…";
    out.className = "";
    const file = form.querySelector('input[type="file"]').files[0];
    const url = form.dataset.inferUrl;
    let result;
    try {
      if (file) {
        const type = file.name.toLowerCase().endsWith(".npz") ? "application/x-npz" : "application/x-npy";
        result = await hub.api("POST", `${url}${url.includes("?") ? "&" : "?"}output_format=json`, file, { headers: { "Content-Type": type } });
      } else {
        let inputs;
        try {
          inputs = JSON.parse(form.querySelector("textarea").value);
        } catch (e) {
          out.className = "error";
          out.textContent = `The inputs are not valid JSON: ${e.message}`;
          return;
        }
        result = await hub.api("POST", url, { inputs, output_format: "json" });
      }
    } catch (e) {
      out.className = "error";
      out.textContent = "The hub could not be reached; try again.";
      return;
    }
    if (!result.ok) {
      out.className = "error";
      out.textContent = hub.message(result.body);
      if (result.body && result.body.expected) {
        const pre = document.createElement("pre");
        pre.textContent = `expected: ${JSON.stringify(result.body.expected)}`;
        out.appendChild(pre);
      }
      return;
    }
    if (result.status === 202) {
      out.textContent = `Started a job: ${result.body.id}. See Jobs.`;
      return;
    }
    out.innerHTML = "";
    const heading = document.createElement("h3");
    heading.textContent = `Outputs${result.headers.get("X-Hub-Device") ? ` (${result.headers.get("X-Hub-Device")})` : ""}`;
    out.appendChild(heading);
    const pre = document.createElement("pre");
    pre.id = "try-output";
    const outputs = result.body.outputs || result.body;
    const named = classNames(outputs, result.body.dtypes || {}, hub.classLabels());
    pre.textContent = Object.entries(outputs).map(([name, value]) =>
      `${name}: ${JSON.stringify(value)}${named[name] ? `  → ${named[name]}` : ""}`).join("\n");
    out.appendChild(pre);
  });
}

/* ---- publishing: resumable chunked uploads -------------------------------------------------------- */
const uploads = {
  chunk: 8 * 1024 * 1024,  // bytes per request; tests lower it through window.HUB_UPLOAD_CHUNK
  maxRetries: 8,
  hashLimit: 512 * 1024 * 1024,  // above this the browser does not hash the file (the hub does)
  parallel: 4,  // parts sent at once, straight to the object store

  // A file's path in the version (folders kept: `1_Pooling/config.json`), set when it was added.
  path(file) { return file.hubPath || file.name; },
  key(file) { return `hub-upload:${uploads.path(file)}:${file.size}:${file.lastModified}`; },

  async sha256(file) {
    if (!window.crypto || !crypto.subtle || file.size > uploads.hashLimit) return "";
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    return Array.from(new Uint8Array(digest)).map((b) => b.toString(16).padStart(2, "0")).join("");
  },

  /** A version's content identity as the hub computes it (hub.registry.services.content_digest): the sha256
   * of its files' sha256s, sorted and joined by newlines. */
  async contentDigest(sha256s) {
    const text = [...sha256s].sort().join("\n");
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
    return Array.from(new Uint8Array(digest)).map((b) => b.toString(16).padStart(2, "0")).join("");
  },

  /** The version you can see whose files are exactly these (GET /api/v1/resolve?content=), or null; asked before
   * a byte is sent (issue 41, point 11). null also when a file was too large to hash here. */
  async identical(hashes) {
    const sums = await Promise.all(hashes);
    if (!sums.length || sums.some((sum) => !sum)) return null;
    const result = await hub.api("GET", `/api/v1/resolve?content=${await uploads.contentDigest(sums)}`).catch(() => null);
    return result && result.ok ? result.body : null;
  },

  async offset(id) {
    const result = await hub.api("GET", `/api/v1/uploads/${id}`);
    return result.ok ? result.body : null;
  },

  /** Send a file; resumes an earlier upload of the same file, and after broken connections. */
  async send(item, onProgress) {
    const file = item.file;
    const chunk = window.HUB_UPLOAD_CHUNK || uploads.chunk;
    let id = localStorage.getItem(uploads.key(file));
    let offset = 0;
    let multipart = null;
    if (id) {
      const known = await uploads.offset(id).catch(() => null);
      if (known && known.state === "open") { offset = known.offset; multipart = known.multipart; }
      else if (known && known.state === "completed") { item.uploadId = id; onProgress(file.size, true); return id; }
      else id = null;
    }
    const open = async (direct) => {
      const opened = await hub.api("POST", "/api/v1/uploads/", { size: file.size, filename: uploads.path(file), direct });
      if (!opened.ok) throw opened.body;
      localStorage.setItem(uploads.key(file), opened.body.id);
      return opened.body;
    };
    if (!id) {
      const opened = await open(true);  // straight to the object store where the hub offers it (S3)
      id = opened.id;
      multipart = opened.multipart;
    }
    item.uploadId = id;
    onProgress(offset, false);
    if (multipart) {
      try {
        await uploads.sendParts(id, file, multipart, onProgress);
        return await uploads.complete(id, file, onProgress, item.hash);
      } catch (error) {
        if (!error || !error.unreachable) throw error;
        // The page cannot reach the object store (its address or CORS rules): through the hub instead.
        await hub.api("DELETE", `/api/v1/uploads/${id}`);
        id = (await open(false)).id;
        item.uploadId = id;
        offset = 0;
        onProgress(0, false, "through the hub");
      }
    }
    let retries = 0;
    while (offset < file.size) {
      const end = Math.min(offset + chunk, file.size);
      let response = null;
      try {
        response = await fetch(`/api/v1/uploads/${id}`, {
          method: "PUT", credentials: "same-origin", body: file.slice(offset, end),
          headers: { "X-CSRFToken": hub.csrf(), "Content-Type": "application/octet-stream",
                     "Content-Range": `bytes ${offset}-${end - 1}/${file.size}` },
        });
      } catch (e) {
        response = null;  // the connection broke: ask the hub what it has, then go on from there
      }
      if (response && response.ok) {
        offset = Number(response.headers.get("Upload-Offset") || end);
        retries = 0;
        onProgress(offset, false);
        continue;
      }
      let error = null;
      if (response) {
        try { error = await response.json(); } catch (e) { error = null; }
        const retryable = response.status >= 500 || response.status === 429 || (error && error.code === "upload_offset_mismatch") ||
          (error && error.code === "upload_busy");
        if (!retryable) throw error || { detail: `The hub answered ${response.status}.` };
      }
      retries += 1;
      item.retries = (item.retries || 0) + 1;
      if (retries > uploads.maxRetries) throw { detail: "The upload kept failing; check the connection and add the file again to resume." };
      await hub.sleep(Math.min(250 * 2 ** retries, 8000));
      const known = await uploads.offset(id).catch(() => null);
      if (known) offset = known.offset;
      onProgress(offset, false, "resuming");
    }
    return uploads.complete(id, file, onProgress, item.hash);
  },

  /** The hub checks size and sha256 (the page's own, for files it can hash) and keeps the bytes. */
  async complete(id, file, onProgress, hash) {
    const complete = await hub.api("POST", `/api/v1/uploads/${id}/complete`, { sha256: (await hash) || await uploads.sha256(file) });
    localStorage.removeItem(uploads.key(file));
    if (!complete.ok) throw complete.body;
    onProgress(file.size, true);
    return id;
  },

  /** Straight to the object store: parts by presigned URLs (asked for in batches, asked again when one
   * expires), `parallel` at a time; parts the store holds already are skipped, so a reload resumes. */
  async sendParts(id, file, multipart, onProgress) {
    const size = multipart.part_size;
    const length = (n) => Math.min(size, file.size - (n - 1) * size);
    const held = new Set(multipart.parts_received || []);
    const todo = [];
    for (let n = 1; n <= multipart.part_count; n += 1) if (!held.has(n)) todo.push(n);
    let sent = [...held].reduce((sum, n) => sum + length(n), 0);
    let reached = false;  // whether any part got through: before that, a broken connection means unreachable
    let failed = false;
    const batches = {};
    const urlOf = async (n, fresh) => {
      const index = Math.floor(todo.indexOf(n) / 100);
      if (fresh || !batches[index]) {
        const numbers = fresh ? [n] : todo.slice(index * 100, index * 100 + 100);
        const answer = hub.api("POST", `/api/v1/uploads/${id}/parts`, { numbers }).then((result) => {
          if (!result.ok) throw result.body;
          return result.body.urls;
        });
        if (fresh) return (await answer)[String(n)];
        batches[index] = answer;
      }
      return (await batches[index])[String(n)];
    };
    const sendOne = async (n) => {
      for (let attempt = 0; ; attempt += 1) {
        let response = null;
        try {
          const start = (n - 1) * size;
          response = await fetch(await urlOf(n, attempt > 0), { method: "PUT", body: file.slice(start, start + length(n)) });
        } catch (e) {
          response = null;
        }
        if (response && response.ok) {
          reached = true;
          sent += length(n);
          onProgress(sent, false);
          return;
        }
        if (failed) return;  // another part failed for good: this upload is being given up
        if (!response && !reached && attempt >= 1) throw { unreachable: true };
        if (attempt >= uploads.maxRetries) throw { detail: "The upload to the object store kept failing; check the connection and add the file again to resume." };
        onProgress(sent, false, "resuming");
        await hub.sleep(Math.min(250 * 2 ** attempt, 8000));
      }
    };
    onProgress(sent, false);
    const queue = [...todo];
    const worker = async () => {
      try {
        while (queue.length) await sendOne(queue.shift());
      } catch (error) {
        failed = true;  // the others stop after their current try
        queue.length = 0;
        throw error;
      }
    };
    await Promise.all(Array.from({ length: Math.min(uploads.parallel, queue.length) }, worker));
  },
};

/* ---- folders: a model folder keeps its structure (`1_Pooling/config.json` beside `config.json`) ------ */
const folders = {
  skipped: (path) => path.split("/").some((part) => part === ".git" || part === ".DS_Store"),

  /** Files from [file, "folder/a/b"] pairs, each with its path inside the folder; .git/ and .DS_Store left out. */
  inside(pairs) {
    return pairs.map(([file, path]) => [file, path.split("/").slice(1).join("/") || file.name])
      .filter(([, path]) => !folders.skipped(path))
      .map(([file, path]) => { file.hubPath = path; return file; });
  },

  /** Every file under dropped entries (directory readers answer in batches of up to 100). */
  async walk(entries) {
    const pairs = [];
    const visit = async (entry, path) => {
      if (entry.isFile) {
        pairs.push([await new Promise((ok, fail) => entry.file(ok, fail)), path]);
        return;
      }
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail));
        if (!batch.length) break;
        for (const child of batch) await visit(child, `${path}/${child.name}`);
      }
    };
    const loose = [];
    for (const entry of entries) {
      if (entry.isFile) loose.push(await new Promise((ok, fail) => entry.file(ok, fail)));
      else await visit(entry, entry.name);
    }
    return [...loose, ...folders.inside(pairs)];
  },
};

function setupPublish() {
  const form = document.getElementById("publish-form");
  if (!form) return;
  const items = [];
  const list = document.getElementById("file-list");
  const drop = document.getElementById("drop");
  const input = document.getElementById("f-files");
  const status = document.getElementById("publish-status");
  const kindSelect = document.getElementById("f-kind");
  const kind = () => (kindSelect ? kindSelect.value : form.dataset.kind);

  /** Put a metadata value in its field (creators as "Name, ORCID" lines, lists joined by commas); a select
   * takes only a value it offers. Returns whether the field now shows it. */
  const fill = (name, value) => {
    const field = form.querySelector(`[name="${name}"]`);
    if (!field || value === null || value === undefined || typeof value === "object" && !Array.isArray(value)) return false;
    let text;
    if (name === "creators") text = [].concat(value).map((c) => (typeof c === "string" ? c : [c.name, c.orcid || ""].filter(Boolean).join(", "))).join("\n");
    else if (Array.isArray(value)) text = value.join(", ");
    else text = String(value);
    if (field.tagName === "SELECT" && ![...field.options].some((o) => o.value === text)) return false;
    field.value = text;
    return true;
  };
  const prefill = JSON.parse(document.getElementById("prefill").textContent || "{}");
  Object.entries(prefill).forEach(([name, value]) => fill(name, value));

  /** A README.md card at the top of the files: the hub reads it as publishing will, and the empty fields show
   * what it found (a Hugging Face card's license, pipeline_tag, tags; its first heading and paragraph). */
  const cardNames = new Set(["readme.md", "modelcard.md", "model_card.md", "datacard.md"]);
  const cardNote = document.getElementById("card-note");
  const readCard = async (file, path) => {
    if (!cardNames.has(path.toLowerCase()) || file.size > 1024 * 1024) return;
    const result = await hub.api("POST", "/publish/card", { text: await file.text(), kind: kind(), name: path }).catch(() => null);
    if (!result || !result.ok) {
      cardNote.textContent = `${path}: ${hub.message(result && result.body)}`;
      cardNote.hidden = false;
      return;
    }
    const filled = [];
    Object.entries(result.body.fields || {}).forEach(([name, value]) => {
      const field = form.querySelector(`[name="${name}"][data-meta]`);
      if (!field || field.value.trim() || field.closest("[hidden]")) return;
      if (!fill(name, value)) return;
      field.dataset.fromCard = path;
      const label = form.querySelector(`label[for="f-${name}"]`);
      filled.push(label ? label.textContent.replace("*", "").trim() : name);
    });
    cardNote.textContent = filled.length
      ? `Read from ${path}: ${filled.join(", ")}. Check them; what you change here wins over the card.`
      : `${path} is a card; the fields you filled in win over it.`;
    cardNote.hidden = false;
  };

  const showKind = () => form.querySelectorAll(".model-only").forEach((el) => { el.hidden = kind() !== "model"; });
  if (kindSelect) kindSelect.addEventListener("change", showKind);
  showKind();

  const filesError = document.getElementById("err-files");
  const duplicateNote = document.getElementById("duplicate-note");
  /** Tell that the chosen files are a version already in the hub (so they were not sent), or clear that. */
  const showDuplicate = (found) => {
    duplicateNote.hidden = !found;
    if (!found) return;
    duplicateNote.textContent = "These files are identical to ";
    const link = document.createElement("a");
    link.href = `/${found.pid}`;
    link.textContent = `${found.artifact}@${found.version}`;
    duplicateNote.append(link, ` (${found.pid}); it is already in the hub, so they were not sent. Add or remove a file to publish something new.`);
  };
  /** Send one file (once), showing its progress in its row. */
  const start = (item) => {
    if (item.sending) return item.sending;
    const { file, li } = item;
    item.duplicateOf = null;
    item.sending = uploads.send(item, (offset, finished, note) => {
      li.querySelector("progress").value = file.size ? offset / file.size : 1;
      li.querySelector(".status").textContent = finished ? "uploaded" : `${Math.floor((file.size ? offset / file.size : 1) * 100)}%${note ? ` (${note})` : ""}`;
      item.done = finished;
      li.dataset.state = finished ? "uploaded" : "sending";
    }).catch((error) => {
      item.error = error;
      li.dataset.state = "failed";
      li.querySelector(".status").textContent = `failed: ${hub.message(error)}`;
      li.querySelector(".status").classList.add("error");
    });
    return item.sending;
  };
  /** Ask the hub whether the files now chosen are a version it holds; until it answers, files not sent yet wait.
   * Identical: they stay unsent. Otherwise: they are sent (also those held back by an earlier answer). */
  const check = () => {
    const live = items.filter((it) => !it.removed);
    const asked = live.length ? uploads.identical(live.map((it) => it.hash)).catch(() => null) : Promise.resolve(null);
    asked.then(showDuplicate);
    for (const item of live.filter((it) => !it.sending)) {
      item.promise = asked.then((found) => {
        if (!found || item.sending) return start(item);
        item.duplicateOf = found;
        item.li.dataset.state = "identical";
        item.li.querySelector(".status").textContent = "not sent (identical)";
        return null;
      });
    }
  };
  /** A TorchScript file (.pt, .pth, .jit) records no input shapes and a conversion needs them: ask for them (or
   * a sample file) before publishing; a pickle may not record them (an estimator without n_features_in_): offer
   * the same, not required. Not asked when the files hold sample inputs (sample_inputs.*, or the one picked). */
  const inputsField = document.getElementById("inputs-field");
  let samplePath = "";
  const livePaths = () => items.filter((it) => !it.removed).map((it) => uploads.path(it.file));
  const needsInputs = () => {
    const paths = livePaths().map((p) => p.toLowerCase());
    const samples = paths.includes(samplePath.toLowerCase())
      || paths.some((p) => /(^|\/)sample_inputs\.(npz|npy|csv|parquet)$/.test(p));
    if (kind() !== "model" || samples) return null;
    const torchscript = paths.find((p) => /\.(pt|pth|jit)$/.test(p));
    if (torchscript) return { file: torchscript, required: true, why: "(TorchScript) does not record its inputs" };
    const pickle = paths.find((p) => /\.(pkl|pickle|joblib)$/.test(p));
    return pickle ? { file: pickle, required: false, why: "(a pickle) may not record its inputs: give them if the estimator does not keep n_features_in_" } : null;
  };
  const askInputs = () => {
    if (!inputsField) return;
    const need = needsInputs();
    inputsField.hidden = !need && !livePaths().includes(samplePath);
    if (need) document.getElementById("inputs-why").textContent = `${need.file.split("/").pop()} ${need.why}`;
  };
  const sampleInput = document.getElementById("f-sample");
  if (sampleInput) sampleInput.addEventListener("change", () => {
    if (!sampleInput.files.length) return;
    samplePath = uploads.path(sampleInput.files[0]);
    add([sampleInput.files[0]]);  // one of the version's files, named as the metadata's sample_inputs
    sampleInput.value = "";
  });
  /** "x: [null, 3] float32" lines as the metadata's inputs; throws with the line that is wrong. */
  const parseInputs = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean).map((line, n) => {
    const m = line.match(/^([A-Za-z_][\w.:-]*)\s*:\s*(\[[^\]]*\])\s*([a-z0-9]+)?$/);
    let shape;
    try { shape = m && JSON.parse(m[2]); } catch (e) { shape = null; }
    if (!m || !Array.isArray(shape) || !shape.every((d) => d === null || Number.isInteger(d) && d > 0))
      throw new Error(`Line ${n + 1} is not "name: [shape] dtype" (e.g. x: [null, 3, 224, 224] float32).`);
    return { name: m[1], shape, dtype: m[3] || "float32" };
  });
  if (kindSelect) kindSelect.addEventListener("change", askInputs);

  /** Add files, each with its path in the version; a second file on a path already taken is refused. The files
   * are hashed first and the hub asked whether a version holds exactly the files chosen: then nothing is sent. */
  const add = (files) => {
    const clashes = [];
    let added = 0;
    for (const file of files) {
      const path = uploads.path(file);
      const taken = items.find((it) => !it.removed && uploads.path(it.file) === path);
      if (taken) {
        if (taken.file.size !== file.size || taken.file.lastModified !== file.lastModified) clashes.push(path);
        continue;
      }
      const li = document.createElement("li");
      li.innerHTML = '<span class="name"></span> <span class="muted size"></span> <progress max="1" value="0"></progress> <span class="status">checking</span> <button type="button" class="link remove">remove</button>';
      readCard(file, path).catch(() => {});
      li.querySelector(".name").textContent = path;
      li.querySelector(".size").textContent = hub.size(file.size);
      li.querySelector("progress").setAttribute("aria-label", `upload of ${path}`);
      list.appendChild(li);
      const item = { file, li, done: false, removed: false, hash: uploads.sha256(file).catch(() => "") };
      items.push(item);
      added += 1;
      li.querySelector(".remove").addEventListener("click", () => {
        item.removed = true;
        li.remove();
        if (item.uploadId && !item.done) hub.api("DELETE", `/api/v1/uploads/${item.uploadId}`);
        localStorage.removeItem(uploads.key(file));
        if (items.some((it) => !it.removed && it.duplicateOf)) check();  // the rest may be new now
        askInputs();
      });
    }
    if (added) check();
    askInputs();
    filesError.textContent = clashes.length
      ? `Two different files would both be ${clashes.map((p) => `'${p}'`).join(", ")} in the version; remove the one you do not want first.`
      : "";
  };

  input.addEventListener("change", () => { add(input.files); input.value = ""; });
  const folderInput = document.getElementById("f-folder");
  folderInput.addEventListener("change", () => {
    // webkitRelativePath is "<chosen folder>/1_Pooling/config.json": paths in the version leave the folder out
    add(folders.inside([...folderInput.files].map((file) => [file, file.webkitRelativePath || file.name])));
    folderInput.value = "";
  });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", async (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const entries = [...(e.dataTransfer.items || [])].map((it) => it.webkitGetAsEntry && it.webkitGetAsEntry()).filter(Boolean);
    if (!entries.length || entries.every((entry) => entry.isFile)) { add(e.dataTransfer.files); return; }
    add(await folders.walk(entries));  // a dropped folder keeps its structure, without its own name
  });
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); } });

  const clearErrors = () => {
    form.querySelectorAll(".msg").forEach((el) => { el.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((el) => el.removeAttribute("aria-invalid"));
    document.getElementById("form-error").hidden = true;
  };
  const showErrors = (error) => {
    const box = document.getElementById("form-error");
    const fields = (error && error.errors) || {};
    const placed = [], elsewhere = [];
    Object.entries(fields).forEach(([key, messages]) => {
      const name = key.split(/[.[]/)[0];
      const target = document.getElementById(`err-${name}`);
      if (!target) { elsewhere.push(`${key}: ${[].concat(messages).join(" ")}`); return; }
      target.textContent = [].concat(messages).join(" ");
      const control = form.querySelector(`[name="${name}"]`);
      if (control) control.setAttribute("aria-invalid", "true");
      if (control && control.closest("details")) control.closest("details").open = true;
      const label = form.querySelector(`label[for="f-${name}"]`);
      placed.push(label ? label.textContent.replace("*", "").trim() : name);
    });
    // The messages sit beside their fields: the banner names the fields once, not every message again.
    box.textContent = placed.length
      ? `Fix the field${placed.length > 1 ? "s" : ""} marked below: ${placed.join(", ")}.`
        + (elsewhere.length ? ` Also: ${elsewhere.join(" ")}` : "")
      : hub.message(error);
    box.hidden = false;
    const first = form.querySelector('[aria-invalid="true"]');
    if (placed.length && first) first.focus();
  };

  const metadata = () => {
    const out = {};
    form.querySelectorAll("[data-meta]").forEach((field) => {
      const value = field.value.trim();
      if (!value || field.closest("[hidden]")) return;
      if (field.dataset.meta === "creators") {
        out.creators = value.split("\n").map((line) => line.trim()).filter(Boolean).map((line) => {
          const parts = line.split(",").map((p) => p.trim());
          const person = { name: parts[0] };
          if (parts[1]) person.orcid = parts[1];
          if (parts[2]) person.affiliation = parts.slice(2).join(", ");
          return person;
        });
      } else if (field.dataset.meta === "list") {
        out[field.name] = value.split(",").map((v) => v.trim()).filter(Boolean);
      } else {
        out[field.name] = value;
      }
    });
    return out;
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    const button = document.getElementById("publish-button");
    const live = items.filter((it) => !it.removed);
    if (!live.length) { showErrors({ detail: "Add at least one file.", errors: { files: ["Add at least one file."] } }); return; }
    let inputs = null;
    const need = needsInputs();
    if (need) {
      const text = document.getElementById("f-inputs").value;
      try { inputs = parseInputs(text); } catch (e) { showErrors({ errors: { inputs: [e.message] } }); return; }
      if (!inputs.length && need.required) {
        showErrors({ errors: { inputs: ["Give the model's inputs (or a sample file): the conversion to ONNX cannot run a TorchScript file without them."] } });
        return;
      }
      if (!inputs.length) inputs = null;
    }
    const sample = livePaths().includes(samplePath) ? samplePath : "";
    button.disabled = true;
    status.textContent = "Waiting for the uploads to finish…";
    await Promise.all(live.map((it) => it.promise));
    const identical = live.find((it) => it.duplicateOf && !it.uploadId);
    if (identical) {
      button.disabled = false;
      status.textContent = "";
      const found = identical.duplicateOf;
      showErrors({ detail: `These files are identical to ${found.artifact}@${found.version} (${found.pid}).`,
                   errors: { files: [`Identical to ${found.artifact}@${found.version}, already in the hub: add or remove a file.`] } });
      document.getElementById("form-error").textContent = `These files are identical to ${found.artifact}@${found.version}, already in the hub: add or remove a file to publish something new.`;
      return;
    }
    const failed = live.filter((it) => it.error);
    if (failed.length) {
      button.disabled = false;
      status.textContent = "";
      showErrors({ detail: `${failed.length} file(s) did not upload; remove them or add them again.`, errors: { files: ["Some uploads failed."] } });
      return;
    }
    status.textContent = "Publishing…";
    const value = (name) => { const f = form.querySelector(`[name="${name}"]`); return f ? f.value.trim() : ""; };
    const visibility = form.querySelector('[name="visibility"]:checked');
    const body = {
      to: form.dataset.to || "",
      artifact: { kind: kind(), name: value("name"), visibility: visibility ? visibility.value : "public", collaborators: value("collaborators") },
      metadata: { ...metadata(), ...(inputs ? { inputs } : {}), ...(sample ? { sample_inputs: sample } : {}) },
      more: value("more"), version: value("version"),
      files: live.map((it) => ({ path: uploads.path(it.file), upload: it.uploadId })),
    };
    const result = await hub.api("POST", form.action || window.location.pathname, body).catch(() => null);
    if (result && result.status === 201) {
      status.textContent = "Published. Opening its page…";
      window.location.assign(result.body.url);
      return;
    }
    button.disabled = false;
    status.textContent = "";
    showErrors(result ? result.body : { detail: "The hub could not be reached; your uploads are kept, try again." });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupCopy();
  watchJobs();
  setupTry();
  setupGenerate();
  setupPublish();
});
