"""The real servers of the sign-in tests, started by the suite on 127.0.0.1: an OpenID provider (npm's certified
``oidc-provider`` under Node.js, tests/accounts/oidc_provider) and OpenLDAP's ``slapd`` with a temporary
configuration."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from joserfc.jwk import RSAKey

from tests.conftest import ROOT, stop_process, wait_for_port
from tests.ports import free_port
from tests.system_packages import require_program

PROVIDER_DIR = ROOT / "tests" / "accounts" / "oidc_provider"
CLIENT_ID, CLIENT_SECRET = "hpcfair-hub", "hub-client-secret-for-tests"
ADA = {"sub": "ada-0001", "preferred_username": "ada", "password": "ada-idp-pw", "given_name": "Ada",
       "family_name": "Lovelace", "name": "Ada Lovelace", "email": "ada@lab.example",
       "email_verified": True, "orcid": "https://orcid.org/0000-0002-1825-0097",
       "groups": ["lab-writers", "students"]}


class Provider:
    """A running provider: its issuer, the private key it signs with, and its configuration file (whose users a
    test may change: the provider reads them at every sign-in)."""

    def __init__(self, issuer: str, key: RSAKey, config: Path) -> None:
        self.issuer, self.key, self.config = issuer, key, config

    def set_user(self, **claims) -> None:
        data = json.loads(self.config.read_text())
        data["users"] = [{**ADA, **claims}]
        self.config.write_text(json.dumps(data))


@pytest.fixture(scope="session")
def oidc_provider(live_server, tmp_path_factory):
    """The provider, with the hub (the live server) registered as a confidential client."""
    require_program("node")
    install = subprocess.run([str(ROOT / "scripts" / "test-oidc-provider.sh")], capture_output=True, text=True,
                             timeout=600)
    assert install.returncode == 0, install.stderr
    key = RSAKey.generate_key(2048, parameters={"kid": "test-key-1", "use": "sig", "alg": "RS256"})
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    config = tmp_path_factory.mktemp("oidc") / "provider.json"
    config.write_text(json.dumps({
        "port": port, "issuer": issuer, "jwks": {"keys": [key.as_dict(private=True)]}, "users": [ADA],
        "clients": [{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                     "redirect_uris": [f"{live_server.url}/accounts/oidc/callback"],
                     "post_logout_redirect_uris": [f"{live_server.url}/"],
                     "grant_types": ["authorization_code"], "response_types": ["code"],
                     "token_endpoint_auth_method": "client_secret_basic"}],
    }))
    log = open(config.with_suffix(".log"), "w")  # noqa: SIM115
    proc = subprocess.Popen(["node", str(PROVIDER_DIR / "provider.mjs"), str(config)], cwd=PROVIDER_DIR,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=60, proc=proc)
        yield Provider(issuer, key, config)
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture
def oidc_settings(settings, live_server, oidc_provider):
    """The hub signing in through the provider (its settings as a site sets them)."""
    from hub.accounts import oidc

    oidc_provider.set_user()
    settings.HUB_PUBLIC_URL = live_server.url
    settings.HUB_OIDC_ENABLED = True
    settings.HUB_OIDC_ISSUER = oidc_provider.issuer
    settings.HUB_OIDC_CLIENT_ID, settings.HUB_OIDC_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.HUB_OIDC_SCOPES = "openid profile email groups"
    settings.HUB_OIDC_LABEL = "Test IdP"
    settings.HUB_GROUP_MAP = '{"lab-writers": "hpc-lab:write", "lab-admins": "hpc-lab:admin"}'
    oidc._clients.clear()
    yield settings
    oidc._clients.clear()
