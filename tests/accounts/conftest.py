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


# --- OpenLDAP: slapd with a temporary configuration, a suffix with an ou of people and one of groups --------

LDAP_BASE = "dc=hub,dc=test"
LDAP_DATA = f"""dn: {LDAP_BASE}
objectClass: dcObject
objectClass: organization
o: HPCFair test directory
dc: hub

dn: ou=people,{LDAP_BASE}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{LDAP_BASE}
objectClass: organizationalUnit
ou: groups

dn: uid=grace,ou=people,{LDAP_BASE}
objectClass: inetOrgPerson
uid: grace
cn: Grace Hopper
givenName: Grace
sn: Hopper
mail: grace@lab.example
userPassword: grace-ldap-pw

dn: uid=linus,ou=people,{LDAP_BASE}
objectClass: inetOrgPerson
uid: linus
cn: Linus Pauling
givenName: Linus
sn: Pauling
mail: linus@lab.example
userPassword: linus-ldap-pw

dn: cn=hpc-lab,ou=groups,{LDAP_BASE}
objectClass: groupOfNames
cn: hpc-lab
member: uid=grace,ou=people,{LDAP_BASE}
member: uid=linus,ou=people,{LDAP_BASE}

dn: cn=admins,ou=groups,{LDAP_BASE}
objectClass: groupOfNames
cn: admins
member: uid=grace,ou=people,{LDAP_BASE}
"""


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    """ldap://127.0.0.1:PORT of a slapd this session starts (an mdb database loaded with slapadd) and stops."""
    slapd_path, slapadd = require_program("slapd"), require_program("slapadd")
    ldapsearch = require_program("ldapsearch")
    root = tmp_path_factory.mktemp("slapd")
    (root / "data").mkdir()
    schemas = "\n".join(f"include /etc/ldap/schema/{name}.schema" for name in ("core", "cosine", "inetorgperson"))
    conf = root / "slapd.conf"
    conf.write_text(f"""{schemas}
pidfile {root}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix "{LDAP_BASE}"
rootdn "cn=admin,{LDAP_BASE}"
rootpw admin-secret
directory {root}/data
access to attrs=userPassword by self read by anonymous auth by * none
access to * by users read by * none
""")
    (root / "data.ldif").write_text(LDAP_DATA)
    loaded = subprocess.run([slapadd, "-f", str(conf), "-l", str(root / "data.ldif")], capture_output=True,
                            text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    port = free_port()
    uri = f"ldap://127.0.0.1:{port}"
    log = open(root / "slapd.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([slapd_path, "-f", str(conf), "-h", f"{uri}/", "-d", "0"], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=30, proc=proc)
        probe = subprocess.run([ldapsearch, "-x", "-H", uri, "-D", f"cn=admin,{LDAP_BASE}", "-w", "admin-secret",
                                "-b", LDAP_BASE, "(uid=grace)", "dn"], capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0 and f"uid=grace,ou=people,{LDAP_BASE}" in probe.stdout, probe.stderr
        yield uri
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture
def ldap_settings(settings, slapd):
    """The hub signing in against slapd: a DN template for the bind, the groups searched as the person."""
    settings.HUB_LDAP_URI = slapd
    settings.HUB_LDAP_USER_DN_TEMPLATE = f"uid=%(user)s,ou=people,{LDAP_BASE}"
    settings.HUB_LDAP_GROUP_BASE = f"ou=groups,{LDAP_BASE}"
    settings.HUB_GROUP_MAP = ('{"hpc-lab": "hpc-lab:write", '
                              f'"cn=admins,ou=groups,{LDAP_BASE}": ["hpc-lab:admin", "ops:read"]}}')
    settings.AUTHENTICATION_BACKENDS = ["hub.accounts.ldap.HubLDAPBackend", *settings.AUTHENTICATION_BACKENDS]
    return settings
