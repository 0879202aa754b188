"""An identity provider's keys for the tests: signing keys the test generates (RS256, PS256,
ES256, EdDSA), tokens they sign, and a loopback HTTP server publishing their JWKS that a test can
rotate, break (HTML, garbage, a slow answer), send in pieces (chunked or not) and take down."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


@dataclass(frozen=True)
class SigningKey:
    kid: str
    algorithm: str
    private: Any

    @property
    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if self.algorithm in ("RS256", "PS256"):
            exported = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif self.algorithm == "ES256":
            exported = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            exported = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**exported, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def token(self, claims: dict[str, Any], *, algorithm: str | None = None) -> str:
        claims = {"exp": int(time.time()) + 600, **claims}
        return jwt.encode(
            claims, self.private, algorithm=algorithm or self.algorithm, headers={"kid": self.kid}
        )


def signing_key(kid: str, algorithm: str = "RS256") -> SigningKey:
    private: Any
    if algorithm in ("RS256", "PS256"):
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        private = ed25519.Ed25519PrivateKey.generate()
    return SigningKey(kid, algorithm, private)


@dataclass
class Published:
    """What the server answers: a set of keys, or `body` as it is; after `delay` seconds, in
    `pieces` writes `pause` seconds apart, with a Content-Length or else `chunked`."""

    keys: list[dict[str, Any]] = field(default_factory=list)
    cache_control: str | None = "max-age=300"
    body: bytes | None = None
    content_type: str = "application/json"
    delay: float = 0.0
    pieces: int = 1
    pause: float = 0.0
    chunked: bool = False
    requests: int = 0


class JwksServer:
    def __init__(self, published: Published) -> None:
        self.published = published
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.well-known/jwks.json"

    def start(self) -> None:
        published = self.published

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # for Transfer-Encoding: chunked

            def do_GET(self) -> None:
                published.requests += 1
                time.sleep(published.delay)
                body = published.body
                if body is None:
                    body = json.dumps({"keys": published.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", published.content_type)
                if published.cache_control is not None:
                    self.send_header("Cache-Control", published.cache_control)
                if published.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(OSError):
                    self._write_in_pieces(body)

            def _write_in_pieces(self, body: bytes) -> None:
                size = -(-len(body) // published.pieces)
                for start in range(0, len(body), size):
                    if start:
                        time.sleep(published.pause)
                    piece = body[start : start + size]
                    if published.chunked:
                        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                    self.wfile.write(piece)
                    self.wfile.flush()
                if published.chunked:
                    self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Down: connections are refused until `start` (on the same port)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextlib.contextmanager
def jwks_server(*keys: SigningKey) -> Iterator[JwksServer]:
    server = JwksServer(Published([key.jwk for key in keys]))
    server.start()
    try:
        yield server
    finally:
        server.stop()
