"""The floor for bench/infer.py: the least a WSGI server can do per inference request, on granian with
ONNX Runtime (one thread), no auth, no checks, no log.

    FLOOR_MODELS=mlp=/path/mlp.onnx,cnn=/path/cnn.onnx granian --interface wsgi bench.floor:app ...

``POST /<model>`` with a ``.npy`` body (or JSON ``{"inputs": {name: nested lists}}``) answers the first
output as ``.npy`` (or JSON ``{"outputs": {name: nested lists}}``), as the hub's gateway does.
"""

import io
import json
import os

import numpy as np
import onnxruntime as ort

options = ort.SessionOptions()
options.intra_op_num_threads = options.inter_op_num_threads = 1
SESSIONS = {name: ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            for name, path in (item.split("=", 1) for item in os.environ["FLOOR_MODELS"].split(","))}


def app(environ, start_response):
    session = SESSIONS[environ["PATH_INFO"].strip("/")]
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    name = session.get_inputs()[0].name
    output = session.get_outputs()[0].name
    if environ.get("CONTENT_TYPE") == "application/json":
        x = np.asarray(json.loads(body)["inputs"][name], dtype=np.float32)
        (y,) = session.run([output], {name: x})
        content, media = json.dumps({"outputs": {output: y.tolist()}}).encode(), "application/json"
    else:
        (y,) = session.run([output], {name: np.load(io.BytesIO(body))})
        buffer = io.BytesIO()
        np.save(buffer, y)
        content, media = buffer.getvalue(), "application/x-npy"
    start_response("200 OK", [("Content-Type", media), ("Content-Length", str(len(content)))])
    return [content]
