"""REST: ask for a conversion or an optimisation of a version; both answer 202 with a job."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import TokenScopePermission
from hub.conversions import services
from hub.errors import HubError
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.jobs.quota import check_active_jobs
from hub.registry.api.views import require_write
from hub.registry.services import get_artifact, get_version
from hub.strict import StrictSerializer


class ConvertRequestSerializer(StrictSerializer):
    files = serializers.ListField(child=serializers.CharField(), required=False,
                                  help_text="Model files to convert together (default: every model file).")
    opset = serializers.IntegerField(required=False, min_value=7, max_value=21, help_text="Target ONNX opset.")
    atol = serializers.FloatField(required=False, min_value=0, help_text="Absolute tolerance (default 1e-4).")
    rtol = serializers.FloatField(required=False, min_value=0, help_text="Relative tolerance (default 1e-3).")
    memory_mb = serializers.IntegerField(required=False, min_value=256, help_text=(
        "The sandbox's memory limit in MB (default: from the model's size; at most 85% of the worker's memory)."))
    to = serializers.ChoiceField(choices=["onnx", "gguf"], required=False, default="onnx", help_text=(
        "onnx (default), or gguf: a Hugging Face causal LM folder converted by llama.cpp's own tools to one GGUF "
        "file, its greedy tokens checked through llama-server against transformers, served by llama.cpp."))
    gguf_type = serializers.CharField(required=False, help_text=(
        "With to: gguf, the file's type: f32, f16, bf16, q8_0 (default; convert_hf_to_gguf.py) or q4_0, q4_k_m, "
        "q5_k_m, q6_k (llama-quantize)."))


class OptimizeRequestSerializer(StrictSerializer):
    file = serializers.CharField(required=False, help_text="The ONNX file (default: the only one).")
    quantize = serializers.BooleanField(required=False, default=True, help_text="Also make a dynamic int8 copy.")
    precision = serializers.CharField(required=False, help_text=(
        "Language models: a generation model with int8 or int4 weights, compared with the full-precision one "
        "(size, tokens/s, perplexity; int8 also by greedy tokens against transformers). fp16 and bf16 are "
        "refused (400 unsupported_precision): the hub's generation builds run on CPUs."))


def _optimize(version, user, *, precision: str | None = None, **options):
    """A language model's smaller generation model (``precision``), else ONNX Runtime's optimisation."""
    from hub.generation.services import request_build, source_of_generation

    if precision is not None:
        return request_build(source_of_generation(version), user, precision=precision)
    return services.request_optimization(version, user, **options)


def _convert(version, user, *, to: str = "onnx", gguf_type: str | None = None, **options):
    """The version's ONNX conversion, or (``to: gguf``) its language model's GGUF build for llama.cpp."""
    if to != "gguf":
        if gguf_type is not None:
            raise HubError("invalid", "gguf_type goes with to: gguf.", errors={"gguf_type": ["Only with to: gguf."]})
        return services.request_conversion(version, user, **options)
    if options:
        raise HubError("invalid", f"{sorted(options)[0]} is an ONNX conversion's option; a GGUF build takes "
                                  "gguf_type.", errors={sorted(options)[0]: ["Not with to: gguf."]})
    from hub.generation.services import request_gguf, source_of_generation

    return request_gguf(source_of_generation(version), user, gguf_type=gguf_type or "q8_0")


def _start(request: Request, owner: str, name: str, version: str, body_class, start) -> Response:
    """Check write access and the body, then ``start(version, user, **body)``; answer 202 with the job."""
    artifact = get_artifact(request.user, owner, name)
    require_write(request, artifact)  # derived versions go into the same artifact
    target = get_version(artifact, version)
    body = body_class(data=request.data)
    body.is_valid(raise_exception=True)
    check_active_jobs(request.user)
    return accepted(start(target, request.user, **body.validated_data))


class VersionConvert(APIView):
    """Convert a version's model files to ONNX and verify them, or a language model to GGUF (202 + job)."""

    throttle_scope = "conversions"  # hub.ops.throttles: the rate of its writes
    permission_classes = [TokenScopePermission]

    @extend_schema(request=ConvertRequestSerializer, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        return _start(request, owner, name, version, ConvertRequestSerializer, _convert)


class VersionOptimize(APIView):
    """Optimise an ONNX file with ONNX Runtime and quantise it to int8, or build a language model's int8 or int4
    generation model (202 + job)."""

    throttle_scope = "conversions"  # hub.ops.throttles: the rate of its writes
    permission_classes = [TokenScopePermission]

    @extend_schema(request=OptimizeRequestSerializer, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        return _start(request, owner, name, version, OptimizeRequestSerializer, _optimize)
