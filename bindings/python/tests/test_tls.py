"""The TLS links (tls://, wss://) with a CA file, against `blerpc serve` with a certificate
made here by a throwaway CA (`cryptography`, in the project venv)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Tuple

import pytest
from conftest import bounded
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from demo_pb import decode, echo_request

import blerpc


def make_certs(out: Path) -> Tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for localhost and 127.0.0.1: (ca, cert, key)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    span = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))

    def cert(subject: str, key, issuer: str, signer, ca: bool) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(span[0])
            .not_valid_after(span[1])
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("blerpc test CA", ca_key, "blerpc test CA", ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = cert("localhost", key, "blerpc test CA", ca_key, False)
    paths = out / "ca.pem", out / "cert.pem", out / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.mark.asyncio
@bounded(30)
@pytest.mark.parametrize("scheme", ["tls", "wss"])
async def test_tls_links_with_a_ca_file(servers, tmp_path: Path, scheme: str) -> None:
    ca, cert, key = make_certs(tmp_path)
    s = servers("--listen", f"{scheme}://127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key))
    assert s.url.startswith(f"{scheme}://")
    options = blerpc.ConnectOptions(trust_key=s.key, tls_ca_file=str(ca))
    async with blerpc.connect(s.url, options) as conn:
        assert decode(await conn.call("echo", echo_request("tls"))) == {1: b"tls"}
        assert conn.info().encrypted
    # Without the CA: refused before any bleRPC byte, naming the option.
    with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
        await blerpc.connect(s.url, blerpc.ConnectOptions(trust_key=s.key))
    assert "TLS trust" in e.value.detail
    # A CA that did not sign the certificate: the TLS handshake fails.
    (tmp_path / "other").mkdir()
    other_ca, _, _ = make_certs(tmp_path / "other")
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await blerpc.connect(s.url, blerpc.ConnectOptions(trust_key=s.key, tls_ca_file=str(other_ca)))
    assert e.value.code == "LINK_FAILED"
