"""The local certificate authority of a LiveHost installation and one certificate per identity.

``livehost stack up`` (and the test fixtures) call :func:`ensure_pki`: it creates, under
``<state_dir>/pki/``, a CA (``ca.pem`` + ``ca.key``) and for every identity bound to roles in the
settings (``LIVEHOST_GRPC_ROLES``) a key pair and a certificate signed by the CA
(``<identity>.pem`` + ``<identity>.key``). The certificate's subject CN is the identity; the SAN
lists the identity, ``localhost``, ``127.0.0.1`` and ``::1`` so the same certificate serves as a
server certificate for a service dialled on the loopback address. Keys are EC P-256 (fast to make
and to handshake), files are mode 0600 and the folder 0700.

Existing files are kept, so a second ``up`` changes nothing; a missing identity is added. Rotation:
``livehost pki rotate <identity>`` reissues one certificate (same CA), ``livehost pki rotate --ca``
makes a new CA and reissues every certificate. In production the CA is cert-manager's (the chart
mounts ``tls.crt``/``tls.key``/``ca.crt`` Secrets) and this module is not used.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import ipaddress
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "LiveHost local CA"
IDENTITY_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
CA_DAYS = 3650
LEAF_DAYS = 397


@dataclass(frozen=True)
class Credential:
    """PEM bytes of one identity's certificate and key, and of the CA that signs them all."""

    identity: str
    cert: bytes
    key: bytes
    ca: bytes


def check_identity(identity: str) -> str:
    if not IDENTITY_PATTERN.match(identity):
        raise ValueError(f"identity {identity!r} must match {IDENTITY_PATTERN.pattern}")
    return identity


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    tmp.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _make_ca(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "LiveHost")])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write_private(directory / "ca.key", _key_pem(key))
    _write_private(directory / "ca.pem", cert.public_bytes(serialization.Encoding.PEM))


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    return cert, key


def _issue(directory: Path, identity: str, hosts: Iterable[str] = ()) -> None:
    check_identity(identity)
    ca_cert, ca_key = _load_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    names: list[x509.GeneralName] = [x509.DNSName(identity), x509.DNSName("localhost")]
    for host in hosts:
        names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity),
                                     x509.NameAttribute(NameOID.ORGANIZATION_NAME, "LiveHost")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_private(directory / f"{identity}.key", _key_pem(key))
    _write_private(directory / f"{identity}.pem", cert.public_bytes(serialization.Encoding.PEM))


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_pki(directory: Path, identities: Iterable[str]) -> list[str]:
    """Create the CA (if missing) and a credential for each identity that has none; returns those made.

    Safe to call from several processes at once (a file lock serialises them).
    """
    made: list[str] = []
    with _locked(directory):
        if not (directory / "ca.pem").exists() or not (directory / "ca.key").exists():
            _make_ca(directory)
            made.append("ca")
        for identity in dict.fromkeys(identities):
            if not (directory / f"{identity}.pem").exists() or not (directory / f"{identity}.key").exists():
                _issue(directory, identity)
                made.append(identity)
    return made


def issue_for_hosts(directory: Path, identity: str, hosts: Iterable[str]) -> bool:
    """A credential for ``identity`` whose certificate also names ``hosts`` (a broker reached by its
    service name, e.g. ``kafka`` in docker-compose.yml); kept when it exists. True when made now."""
    with _locked(directory):
        if not (directory / "ca.pem").exists() or not (directory / "ca.key").exists():
            _make_ca(directory)
        if (directory / f"{identity}.pem").exists() and (directory / f"{identity}.key").exists():
            return False
        _issue(directory, identity, hosts)
        return True


def rotate(directory: Path, identities: Iterable[str], *, new_ca: bool = False) -> list[str]:
    """Reissue the given identities' credentials (all bound identities with ``new_ca``)."""
    with _locked(directory):
        if new_ca or not (directory / "ca.pem").exists():
            _make_ca(directory)
        done = []
        for identity in dict.fromkeys(identities):
            _issue(directory, identity)
            done.append(identity)
    return done


def load_credential(directory: Path, identity: str) -> Credential:
    """The PEM files of ``identity``; FileNotFoundError names what is missing and how to make it."""
    check_identity(identity)
    paths = [directory / f"{identity}.pem", directory / f"{identity}.key", directory / "ca.pem"]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(
            f"no credential for identity {identity!r}: missing {', '.join(missing)} "
            "(run `livehost stack up` or `livehost pki init`, or set LIVEHOST_GRPC_PKI_DIR)")
    return Credential(identity, paths[0].read_bytes(), paths[1].read_bytes(), paths[2].read_bytes())


def subject_of(cert_pem: bytes) -> str:
    """The subject CN of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""
