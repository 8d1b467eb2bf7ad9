"""``barecat serve`` and its client over real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import BarecatError, BarecatIntegrityError, InvalidPathBarecatError
from helpers.damaging import damage
from helpers.serving import serving

httpx = pytest.importorskip("httpx", reason="the server extra is not installed")
pytest.importorskip("uvicorn", reason="the server extra is not installed")


@pytest.fixture
def archive(tmp_path: Path) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path / "data.barecat")
    files = {f"train/{c}/{i:03d}.bin": os.urandom(100 + i * 37) for c in "ab" for i in range(40)}
    files["notes.txt"] = b"hello, world\n"
    with barecat.Barecat(path, readonly=False) as bc:
        for p, data in files.items():
            bc[p] = data
    return path, files


def test_the_client_reads_like_a_barecat(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    with serving(path) as (url, _), barecat.connect(url + "/a/data") as remote:
        assert remote["train/a/007.bin"] == files["train/a/007.bin"]
        assert remote.read("train/b/039.bin", 10, 20) == files["train/b/039.bin"][10:30]
        with remote.open("notes.txt") as f:
            f.seek(7)
            assert f.read() == b"world\n"
        wanted = ["notes.txt", "train/b/001.bin", "train/a/039.bin"]
        assert remote.get_many(wanted) == [files[p] for p in wanted]
        assert remote.listdir("") == ["train", "notes.txt"]
        assert sorted(remote.glob("train/a/00?.bin")) == [f"train/a/00{i}.bin" for i in range(10)]
        assert len(remote) == len(files) and sorted(remote) == sorted(files)
        assert remote.stat("train").num_files_tree == 80
        assert "notes.txt" in remote and "no/such" not in remote
        with pytest.raises(KeyError):
            remote["no/such"]
        with pytest.raises(InvalidPathBarecatError):
            remote["../outside"]
        with pytest.raises(BarecatError, match="read-only"):
            remote["new.txt"] = b"x"


def test_the_http_client_keeps_its_old_name(archive: tuple[str, dict[str, bytes]]) -> None:
    from barecat.web.server import client

    assert barecat.RemoteBarecat is barecat.HttpBarecat is client.HttpBarecat
    assert client.RemoteBarecat is client.HttpBarecat
    with serving(archive[0]) as (url, _), barecat.RemoteBarecat(url + "/a/data") as remote:
        assert isinstance(remote, barecat.HttpBarecat) and isinstance(
            remote, barecat.ReadableArchive
        )
        with barecat.connect(url + "/a/data") as connected:
            assert type(connected) is barecat.HttpBarecat
        assert remote["notes.txt"] == archive[1]["notes.txt"]


def test_http_semantics(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    data = files["train/a/020.bin"]
    with serving(path) as (url, _), httpx.Client(base_url=url) as http:
        route = "/a/data/files/train/a/020.bin"
        whole = http.get(route)
        assert whole.status_code == 200 and whole.content == data
        etag = whole.headers["etag"]
        assert http.get(route, headers={"If-None-Match": etag}).status_code == 304
        part = http.get(route, headers={"Range": "bytes=5-9"})
        assert part.status_code == 206 and part.content == data[5:10]
        assert part.headers["content-range"] == f"bytes 5-9/{len(data)}"
        tail = http.get(route, headers={"Range": "bytes=-4"})
        assert tail.content == data[-4:]
        assert http.get(route, headers={"Range": "bytes=99999-"}).status_code == 416
        head = http.head(route)
        assert head.status_code == 200 and int(head.headers["content-length"]) == len(data)
        for bad in ("..%2F..%2Fetc%2Fpasswd", "train/..%2F..%2F..%2Fx", "a%00b"):
            assert http.get(f"/a/data/files/{bad}").status_code == 400, bad
        assert http.get("/a/other/files/notes.txt").status_code == 404
        batch = http.post("/a/data/batch", json={"paths": ["notes.txt", "no/such"]})
        assert batch.status_code == 404
        assert http.post("/a/data/batch", content=b"not json").status_code == 400
        spec = http.get("/openapi.json").json()
        assert spec["openapi"].startswith("3.") and "/a/{name}/batch" in spec["paths"]
        assert http.get("/archives").json() == {"data": {"writable": False, "files": 81}}


def test_tokens(archive: tuple[str, dict[str, bytes]]) -> None:
    path, _ = archive
    with serving(path, env={"BARECAT_TOKEN": "s3cret"}) as (url, _):
        assert httpx.get(url + "/a/data/files/notes.txt").status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.get(url + "/a/data/files/notes.txt", headers=wrong).status_code == 401
        with barecat.connect(url + "/a/data", token="s3cret") as remote:
            assert remote["notes.txt"] == b"hello, world\n"
    with serving(path, "--host", "0.0.0.0") as (url, lines):  # beyond loopback: a token
        token = lines[1].removeprefix("token:").strip()
        assert (
            token
            and httpx.get(url.replace("0.0.0.0", "127.0.0.1") + "/archives").status_code == 401
        )
        local = url.replace("0.0.0.0", "127.0.0.1")
        with barecat.connect(local + "/a/data", token=token) as remote:
            assert remote.listdir("train") == ["a", "b"]


def test_the_bearer_scheme_is_case_insensitive(archive: tuple[str, dict[str, bytes]]) -> None:
    path, _ = archive
    with serving(path, env={"BARECAT_TOKEN": "s3cret"}) as (url, _):
        file_url = url + "/a/data/files/notes.txt"
        for given in ("Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR   s3cret"):
            answer = httpx.get(file_url, headers={"Authorization": given})
            assert answer.status_code == 200 and answer.content == b"hello, world\n", given
        for given in ("Basic s3cret", "Bearers3cret", "Bearer S3CRET", "s3cret", "Bearer"):
            answer = httpx.get(file_url, headers={"Authorization": given})
            assert answer.status_code == 401, given
            assert answer.headers["WWW-Authenticate"] == "Bearer"


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.settimeout(20)  # (a server that never closes fails the test instead of hanging it)
    return s


def _until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection: waits for that state."""
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got


def test_stalled_clients_are_cut_off(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    timeouts = ("--idle-timeout", "0.5", "--body-timeout", "0.5")
    with serving(path, "--writable", *timeouts) as (url, _):
        with _connect(url) as s:  # connected, nothing sent
            assert _until_closed(s) == b""
        with _connect(url) as s:  # half a request head
            s.sendall(b"GET /a/data/files/notes.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert _until_closed(s) == b""
        with _connect(url) as s:  # a whole request, then silence on the kept-alive connection
            s.sendall(b"GET /a/data/files/notes.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = _until_closed(s)
            assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(files["notes.txt"])
        half_bodies = {
            "PUT /a/data/files/half.bin": b"x" * 10,
            "POST /a/data/batch": b'{"paths": ["notes',
        }
        for request, part in half_bodies.items():
            with _connect(url) as s:
                s.sendall(
                    f"{request} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Length: 1000\r\n\r\n".encode()
                )
                s.sendall(part)
                answer = _until_closed(s)
                assert answer.startswith(b"HTTP/1.1 408 "), (request, answer)
                assert b"connection: close" in answer.lower() and b"request body" in answer
        with barecat.connect(url + "/a/data") as remote:  # still serving; nothing half kept
            assert "half.bin" not in remote and remote["notes.txt"] == files["notes.txt"]
            for i in range(3):
                remote[f"whole{i}.bin"] = b"w" * 100  # quick clients are not cut off
            assert remote.get_many([f"whole{i}.bin" for i in range(3)]) == [b"w" * 100] * 3


@pytest.mark.slow
def test_many_concurrent_writers_through_one_archive_writer(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    path, files = archive
    written: dict[str, bytes] = {}
    errors: list[BaseException] = []
    with serving(path, "--writable") as (url, _):

        def writer(n: int) -> None:
            try:
                with barecat.connect(url + "/a/data") as remote:
                    for i in range(12):
                        data = os.urandom(50 + n * 10 + i)
                        remote[f"upload/w{n:02d}/{i:02d}"] = data
                        written[f"upload/w{n:02d}/{i:02d}"] = data
                        assert remote["notes.txt"] == files["notes.txt"]  # readers meanwhile
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[:3]
        with barecat.connect(url + "/a/data") as remote:
            assert remote.get_many(list(written)) == list(written.values())
            remote["notes.txt"] = b"replaced"
            del remote["train/a/000.bin"]
            with pytest.raises(KeyError):
                del remote["train/a/000.bin"]
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "verify", path], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    with barecat.Barecat(path) as bc:
        assert all(bc[p] == d for p, d in written.items())
        assert bc["notes.txt"] == b"replaced" and "train/a/000.bin" not in bc
        assert bc.num_files == len(files) + len(written) - 1


def test_a_killed_upload_leaves_nothing_and_limits_hold(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    path, _ = archive
    with serving(path, "--writable", "--max-upload", "4K") as (url, _):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port))) as s:
            s.sendall(
                b"PUT /a/data/files/partial.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Length: 3000\r\n\r\n" + b"x" * 1000
            )
        time.sleep(0.5)  # the server notices the closed connection
        with barecat.connect(url + "/a/data") as remote:
            assert "partial.bin" not in remote
            remote["fits.bin"] = b"y" * 4096
            with pytest.raises(BarecatError, match="413"):
                remote["too-big.bin"] = b"z" * 5000
            assert "too-big.bin" not in remote and remote["fits.bin"] == b"y" * 4096


def test_sealed_archives_and_retries(tmp_path: Path) -> None:
    path = str(tmp_path / "sealed.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd", passphrase="pw") as bc:
        bc["doc.txt"] = b"sealed text " * 100
    with serving(path, env={"BARECAT_PASSPHRASE": "pw"}) as (url, _):
        with barecat.connect(url + "/a/sealed") as remote:
            assert remote["doc.txt"] == b"sealed text " * 100  # the content's CRC, checked
            assert remote.read("doc.txt", 7, 4) == b"text"
        with httpx.Client(base_url=url) as http:
            whole = http.get("/a/sealed/files/doc.txt")
            crc = int(whole.headers["x-barecat-crc32c"], 16)
            import crc32c

            assert crc == crc32c.crc32c(b"sealed text " * 100)
    # a server that comes up a moment after the first request: the client retries
    port = _free_port()
    result: list[bytes] = []
    with barecat.Barecat(str(tmp_path / "late.barecat"), readonly=False) as bc:
        bc["x"] = b"late"

    def ask() -> None:
        with barecat.connect(f"http://127.0.0.1:{port}/a/late") as remote:
            result.append(remote["x"])

    asker = threading.Thread(target=ask)
    asker.start()
    time.sleep(0.3)
    with serving(str(tmp_path / "late.barecat"), "--port", str(port)):
        asker.join(30)
    assert result == [b"late"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_tampered_transfer_is_detected(archive: tuple[str, dict[str, bytes]]) -> None:
    """A real proxy between client and server changes one byte of the body: the client's
    check of X-Barecat-CRC32C refuses it."""
    path, _ = archive
    with serving(path) as (url, _):
        host, port = url.removeprefix("http://").rsplit(":", 1)

        class Flipping(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with socket.create_connection((host, int(port))) as upstream:
                    upstream.sendall(self.request.recv(65536))
                    while chunk := upstream.recv(65536):
                        self.request.sendall(chunk.replace(b"hello, world", b"hellO, world"))
                        if b"hellO" in chunk:
                            break

        with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Flipping) as proxy:
            threading.Thread(target=proxy.serve_forever, daemon=True).start()
            proxied = f"http://127.0.0.1:{proxy.server_address[1]}"
            with (
                barecat.connect(proxied + "/a/data") as remote,
                pytest.raises(BarecatIntegrityError, match="after transfer"),
            ):
                remote["notes.txt"]
            proxy.shutdown()


def test_damaged_bytes_on_the_server_raise_the_integrity_error(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    """A CRC32C mismatch found by the server's read is the error a local read raises (a
    ValueError), not a bare HTTP 500; ranged reads are not checked, here as locally."""
    path, files = archive
    damage(path, "notes.txt", at=3)
    with pytest.raises(BarecatIntegrityError) as local, barecat.Barecat(path) as bc:
        part = bc.read("notes.txt", 1, 4)
        bc["notes.txt"]
    with serving(path) as (url, _), barecat.connect(url + "/a/data") as remote:
        for read in (
            lambda: remote["notes.txt"],
            lambda: remote.get_many(["train/a/000.bin", "notes.txt"]),
        ):
            with pytest.raises(BarecatIntegrityError) as remote_error:
                read()
            assert isinstance(remote_error.value, ValueError)
            assert str(remote_error.value) == str(local.value)
        assert remote.read("notes.txt", 1, 4) == part
        assert remote["train/a/000.bin"] == files["train/a/000.bin"]  # the rest still reads


def test_a_server_url_connects_to_its_only_archive(
    archive: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    path, files = archive
    with serving(path) as (url, _), barecat.connect(url) as remote:
        assert remote.url == url + "/a/data" and remote["notes.txt"] == files["notes.txt"]
    other = str(tmp_path / "other.barecat")
    with barecat.Barecat(other, readonly=False) as bc:
        bc["x"] = b"x"
    with serving(path, other) as (url, _):
        with pytest.raises(BarecatError, match="serves 2 archives") as several:
            barecat.connect(url + "/")
        assert f"{url}/a/data" in str(several.value) and f"{url}/a/other" in str(several.value)
        with barecat.connect(url + "/a/other") as remote:
            assert remote["x"] == b"x"


def test_barecat_urls_of_0_3_1(archive: tuple[str, dict[str, bytes]]) -> None:
    """``barecat://HOST:PORT/NAME::PATH``: the archive, rooted at PATH; port 50003 unless
    given."""
    from barecat.web.server.client import archive_url

    assert archive_url("barecat://h/name") == ("http://h:50003/a/name", "")
    assert archive_url("barecat://h:9/name::in/side/") == ("http://h:9/a/name", "in/side")
    with pytest.raises(ValueError, match="barecat://"):
        archive_url("barecat://hostonly")
    path, files = archive
    with serving(path) as (url, _):
        hostport = url.removeprefix("http://")
        with barecat.connect(f"barecat://{hostport}/data::") as remote:
            assert remote["notes.txt"] == files["notes.txt"] and len(remote) == len(files)
        with barecat.connect(f"barecat://{hostport}/data::train/a") as remote:
            assert remote["007.bin"] == files["train/a/007.bin"]
            assert remote.read("007.bin", 2, 3) == files["train/a/007.bin"][2:5]
            assert remote.get_many(["001.bin"]) == [files["train/a/001.bin"]]
            assert remote.listdir("")[:2] == ["000.bin", "001.bin"] and len(remote) == 40
            assert sorted(remote.glob("00?.bin")) == [f"00{i}.bin" for i in range(10)]
            assert sorted(remote) == sorted(p.removeprefix("train/a/") for p in files
                                            if p.startswith("train/a/"))  # fmt: skip
            assert "007.bin" in remote and "notes.txt" not in remote
            with remote.open("007.bin") as f:
                assert f.read() == files["train/a/007.bin"]
