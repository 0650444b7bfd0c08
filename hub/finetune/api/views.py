"""REST: ``POST .../versions/{version}/finetune`` fine-tunes a model version on a dataset (202 + job)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import TokenScopePermission
from hub.finetune import services
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.registry.models import Artifact
from hub.registry.services import get_artifact, get_version
from hub.strict import StrictSerializer


class FinetuneRequestSerializer(StrictSerializer):
    dataset = serializers.CharField(help_text="The dataset: owner/name[@version] or its PID.")
    target = serializers.CharField(help_text="The column (CSV, Parquet, Croissant field) or NPZ array to learn.")
    features = serializers.ListField(child=serializers.CharField(), required=False,
                                     help_text="Input columns (default: every column but the target).")
    text = serializers.CharField(required=False, help_text="The text column, for Hugging Face text models.")
    data_file = serializers.CharField(required=False, help_text="The dataset's file to read when it has several.")
    file = serializers.CharField(required=False, help_text="The model file to train when the version has several.")
    epochs = serializers.IntegerField(required=False, help_text="Passes over the training rows (default 5).")
    learning_rate = serializers.FloatField(required=False, help_text="Optimiser step size (default 1e-3).")
    batch_size = serializers.IntegerField(required=False, help_text="Rows per step (default 32).")
    freeze = serializers.ChoiceField(["none", "backbone"], required=False,
                                     help_text="backbone: train only the last layer (or a text model's new head).")
    validation_split = serializers.FloatField(required=False, help_text="Rows held out to validate (default 0.2).")
    seed = serializers.IntegerField(required=False, help_text="Seeds the split, the batches and the weights (0).")
    early_stopping = serializers.IntegerField(required=False, help_text="Stop after this many epochs without a "
                                                                        "lower validation loss (0: never).")
    max_length = serializers.IntegerField(required=False, help_text="Tokens per text (text models, default 64).")
    name = serializers.CharField(required=False, help_text="The result's model in your namespace "
                                                           "(default <base>-finetuned).")
    visibility = serializers.ChoiceField(Artifact.Visibility.choices, required=False, help_text="Default private.")
    device = serializers.ChoiceField(["cpu", "gpu"], required=False, help_text="The workers to train on.")
    account = serializers.CharField(max_length=64, required=False, help_text="The Slurm account to bill (yours or "
                                    "an organization's you write in; default: the owner's, else yours).")


class VersionFinetune(APIView):
    """Fine-tune a model version on a dataset into a new model version of yours (202 + job)."""

    throttle_scope = "conversions"  # hub.ops.throttles: the rate of its writes
    permission_classes = [TokenScopePermission]

    @extend_schema(request=FinetuneRequestSerializer, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        base = get_version(get_artifact(request.user, owner, name), version)  # reading the base is enough
        body = FinetuneRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return accepted(services.request_finetune(base, request.user, body.validated_data))
