"""Large downloads over several connections with HTTP Range, against the live hub on both backends (the
filesystem store answers ranges itself; S3 redirects to a presigned URL that SeaweedFS answers): the file
equals the original, the sha256 is computed as the blocks are written, and a cut download resumes from
the prefix it left."""

from __future__ import annotations

import hashlib
import os

import pytest
from hpcfair import HubClient, transfer

from hub.accounts.models import ApiToken
from hub.registry.models import Artifact

pytestmark = pytest.mark.django_db(transaction=True)

BLOCK = 256 * 1024
DATA = os.urandom(9 * BLOCK + 4321)  # ten blocks, the last one short
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def hub(backend, settings, live_server, owner, publish, monkeypatch):
    """A published version of DATA, a client for it, and the Range headers its requests sent."""
    settings.HUB_PUBLIC_URL = live_server.url
    monkeypatch.setattr(transfer, "BLOCK", BLOCK)
    publish(owner, "big", {"weights.bin": DATA}, visibility="private")
    _, token = ApiToken.issue(owner, scope="read")
    client = HubClient(live_server.url, token, backoff=0.05)
    ranges: list[tuple[str, str, int]] = []
    for session in (client.session, client.bare):
        session.hooks["response"].append(
            lambda r, *a, **k: ranges.append((r.request.url, r.request.headers.get("Range", ""), r.status_code)))
    yield client, ranges
    client.close()  # kept-alive connections hold the live server's threads and database sessions


def test_parallel_ranged_download_equals_the_original(hub, backend, tmp_path):
    client, ranges = hub
    out = client.download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin", cache=False)
    assert out.read_bytes() == DATA
    assert not (tmp_path / "w.bin.incomplete").exists()
    blocks = sorted(r for _, r, status in ranges if status == 206)
    wanted = sorted(f"bytes={start}-{min(start + BLOCK, len(DATA)) - 1}" for start in range(0, len(DATA), BLOCK))
    assert blocks == wanted, "one ranged request per block, each block once"
    if backend == "s3":  # the hub answered one redirect; the blocks came from the object store
        hub_gets = [status for url, _, status in ranges if "/api/v1/artifacts/alice/big/versions/1/files/" in url]
        assert hub_gets == [302]
    assert Artifact.objects.get(name="big").downloads == 1, "one download counted, not one per block"


def test_a_cut_download_resumes_from_its_prefix(hub, tmp_path):
    client, ranges = hub
    target = tmp_path / "w.bin"
    prefix = 3 * BLOCK + 1000
    (tmp_path / "w.bin.incomplete").write_bytes(DATA[:prefix])  # what an earlier, interrupted run left
    out = client.download_file("alice/big", "1", "weights.bin", target, cache=False)
    assert out.read_bytes() == DATA
    sent = [r for _, r, status in ranges if status == 206]
    assert sent[0] == f"bytes={prefix}-{prefix + BLOCK - 1}" and "bytes=0-" not in " ".join(sent)


def test_a_damaged_prefix_is_caught_by_the_sha256(hub, tmp_path):
    client, _ = hub
    damaged = bytearray(DATA[:BLOCK])
    damaged[10] ^= 1
    (tmp_path / "w.bin.incomplete").write_bytes(bytes(damaged))
    with pytest.raises(Exception) as caught:
        client.download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin", cache=False)
    assert getattr(caught.value, "code", "") == "checksum_mismatch"
    assert not (tmp_path / "w.bin").exists() and not (tmp_path / "w.bin.incomplete").exists()
    # The next run starts over and succeeds.
    assert client.download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin", cache=False).read_bytes() == DATA


def test_a_whole_version_downloads_its_files_in_parallel(backend, settings, live_server, owner, publish, tmp_path):
    settings.HUB_PUBLIC_URL = live_server.url
    files = {f"part-{i}.bin": os.urandom(200_000 + i) for i in range(6)}
    publish(owner, "many", files)
    client = HubClient(live_server.url, None)
    paths = client.download("alice/many", tmp_path / "out")
    client.close()
    assert sorted(p.name for p in paths) == sorted([*files, "README.md"])  # and the card the hub wrote
    assert all((tmp_path / "out" / name).read_bytes() == data for name, data in files.items())


@pytest.mark.parametrize("backend", ["s3"], indirect=True)  # the client's logic; the store answers the ranges
def test_a_block_cut_midway_resumes_inside_the_block(hub, tmp_path):
    client, ranges = hub
    cut_at = 4 * BLOCK  # the fifth block comes over a connection that breaks after half of it
    broken = []

    def break_once(response, *args, **kwargs):
        if not broken and response.request.headers.get("Range", "").startswith(f"bytes={cut_at}-"):
            broken.append(True)
            read = response.raw.read

            def half(amount=None, **kw):  # the rest is read and thrown away, as if it never arrived
                first = read(BLOCK // 2)
                read()
                return first
            response.raw.read = half
    for session in (client.session, client.bare):
        session.hooks["response"].insert(0, break_once)
    out = client.download_file("alice/big", "1", "weights.bin", tmp_path / "w.bin", cache=False)
    assert out.read_bytes() == DATA and broken
    sent = [r for _, r, status in ranges if status == 206]
    assert f"bytes={cut_at + BLOCK // 2}-{cut_at + BLOCK - 1}" in sent, "the rest of the block, not all of it"
