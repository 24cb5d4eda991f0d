"""The container sandbox: the judge and subject pair of sandbox.py, run inside a Docker container (docker SDK).

The container is the outer wall: no network, a read-only root with the host's system and Python bound
read-only (as bubblewrap binds them), the repository read-only, only the caches writable, memory, PID and
time limits, no capabilities, no host environment, and on CUDA the NVIDIA runtime with the one GPU it is
given. Inside, a relay (`python -m kernelbot.harness.container`) starts the ordinary Sandbox, always
jailed by bubblewrap (where bubblewrap cannot run inside, the relay says so and the host refuses), and passes requests and answers as JSON lines over
the container's attached stdin/stdout. The same interface as sandbox.Sandbox: request, kill, close.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import socket
import stat
import struct
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from kernelbot.harness import jail
from kernelbot.harness.sandbox import SandboxFailure, worker_env

IMAGE = "kernelbot-sandbox-empty:1"  # an empty image: everything it runs is bound in read-only
PIDS_LIMIT = 512
CACHE_MOUNT = "/kernelbot-cache"
MAX_LINE = 64 << 20  # an answer is a few KB (outputs travel through the shared region): more is a fault
START_S = 60.0  # the relay's first line (which inner sandbox it could make) must come within this
NOBODY = 65534  # the container's user where the host's is root (see _user)


def _client() -> Any:
    """The Docker client, or one line saying why there is none."""
    try:
        import docker
    except ImportError:
        raise jail.JailUnavailable(
            "harness.sandbox: container needs the docker SDK: pip install 'kernelbot[docker]'"
        ) from None
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # the SDK raises several kinds: one line whatever it is
        why = " ".join(str(exc).split())[:200]
        raise jail.JailUnavailable(
            f"harness.sandbox: container needs a running Docker daemon ({why}); start Docker or use "
            "harness.sandbox: process"
        ) from None
    return client


def _empty_image(client: Any) -> None:
    import docker

    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w"):
            pass
        repository, tag = IMAGE.split(":")
        client.api.import_image_from_data(buf.getvalue(), repository=repository, tag=tag)


def _user() -> tuple[int, int]:
    """Who the container runs as: this process's user, or nobody where that is root. Root in a container with
    no capabilities cannot map itself into the user namespace bubblewrap makes inside ("setting up uid map:
    Operation not permitted"); an unprivileged user can, and owns nothing of the host's."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    return NOBODY, NOBODY


def _device_groups() -> list[str]:
    return sorted({str(os.stat(p).st_gid) for p in glob.glob("/dev/nvidia*") if os.path.exists(p)})


def _binds(readable: list[Path], cache_dir: Path | None) -> dict[str, dict[str, str]]:
    ro = [Path(p) for p in jail._SYSTEM if Path(p).exists()] + jail.python_paths() + [jail.PACKAGE_DIR]
    ro += [Path("/etc") / name for name in jail._ETC if (Path("/etc") / name).exists()]
    binds = {str(p): {"bind": str(p), "mode": "ro"} for p in ro + [Path(r) for r in readable]}
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        if _user()[0] == NOBODY:  # not the runner's own user: caches of its own
            cache_dir = _nobodys(cache_dir / "container")
        binds[str(cache_dir)] = {"bind": CACHE_MOUNT, "mode": "rw"}
    return binds


def _nobodys(folder: Path) -> Path:
    """The caches of containers that run as nobody (the runner's root cannot share its own with them): a
    folder of their own, made here and handed over. Nothing under it is walked or followed: a link planted
    there (by operator or candidate code, which may write the caches) must not make root hand a folder of
    the host to nobody, nor be bound into a container in its place."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise jail.JailUnavailable(
            f"harness.sandbox: container: {folder} is not a plain folder (a link?); remove it and run again"
        )
    if info.st_uid != NOBODY:
        os.chown(folder, NOBODY, NOBODY, follow_symlinks=False)
    return folder


class ContainerSandbox:
    """sandbox.Sandbox's interface, with the pair inside a container."""

    def __init__(
        self,
        *,
        device: str,
        memory_limit_mb: int,
        cache_dir: Path | None = None,
        readable: list[Path] = (),  # type: ignore[assignment]
        mode: str = "container",
        untrusted_cache: bool = False,
        gpu: str | None = None,
    ) -> None:
        client = _client()  # first: without the SDK or a daemon, one line (JailUnavailable)
        import docker

        _empty_image(client)
        env = worker_env(Path(CACHE_MOUNT) if cache_dir is not None else None, device)
        env.pop("CUDA_VISIBLE_DEVICES", None)  # the runtime exposes the one GPU; inside it is device 0
        requests = []
        if device == "cuda":
            ids = [gpu] if gpu is not None else None
            requests = [
                docker.types.DeviceRequest(device_ids=ids, count=None if ids else -1, capabilities=[["gpu"]])
            ]
        relay = [sys.executable, "-m", "kernelbot.harness.container", device, str(memory_limit_mb)]
        relay += ["1" if untrusted_cache else "0", CACHE_MOUNT if cache_dir is not None else ""]
        relay += [str(Path(p).resolve()) for p in readable]
        try:
            self.container = self._create(
                client, relay, env, list(readable), cache_dir, device, memory_limit_mb, requests
            )
        except docker.errors.DockerException as exc:  # e.g. no nvidia runtime, a bind the daemon lacks
            why = " ".join(str(exc).split())[:300]
            raise jail.JailUnavailable(
                f"harness.sandbox: container: the Docker daemon refused the sandbox's container ({why}); "
                "fix the daemon (NVIDIA runtime on CUDA, the host paths visible to it) or use harness.sandbox: process"
            ) from None
        self._sock = self.container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._raw: socket.socket = getattr(self._sock, "_sock", self._sock)
        self._buf, self._lines = b"", [b""]
        self._stderr = b""
        self.container.start()
        # Inside, the judge and the subject need bubblewrap's separate sandboxes: as plain processes of one
        # user the subject could write to the relay's stdout (/proc/1/fd/1) and forge every answer, or
        # rewrite the trusted caches. Where the daemon's seccomp profile forbids the user namespaces bubblewrap
        # needs, the container sandbox is refused in one line, never run without its inner wall.
        ready: Any = {}
        try:
            hello = self._readline(time.monotonic() + START_S)
            ready = json.loads(hello) if hello else {}
        except (TimeoutError, ValueError):
            pass
        if not isinstance(ready, dict) or ready.get("jail") != "bwrap":
            reason = ready.get("jail_unavailable") if isinstance(ready, dict) else None
            self.kill()
            raise jail.JailUnavailable(
                "harness.sandbox: container needs bubblewrap to work inside the container "
                f"({reason or 'the relay did not start'}); run the Docker daemon with a seccomp profile that "
                "allows user namespaces, or use harness.sandbox: process"
            )

    @staticmethod
    def _create(
        client: Any,
        relay: list[str],
        env: dict[str, str],
        readable: list[Path],
        cache_dir: Path | None,
        device: str,
        memory_limit_mb: int,
        requests: list[Any],
    ) -> Any:
        binds = _binds(readable, cache_dir)
        host = client.api.create_host_config(
            binds=binds,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": "rw,exec,size=4g,mode=1777", "/dev/shm": "rw,size=4g,mode=1777"},
            mem_limit=f"{memory_limit_mb + 1024}m",  # the pair's own caps plus the relay and Python
            pids_limit=PIDS_LIMIT,
            cap_drop=["ALL"],
            # Docker's default seccomp profile forbids the user namespaces bubblewrap makes inside (the inner
            # wall between judge and subject); unconfined, the container is still no network, no capabilities,
            # no new privileges, a read-only root and limits, around the same bubblewrap pair as the process
            # sandbox: at least that sandbox's wall, never less (docs/security.md).
            security_opt=["no-new-privileges", "seccomp=unconfined"],
            device_requests=requests,
            runtime="nvidia" if device == "cuda" else None,
            # nobody reaches the GPU's device nodes through their group where they are not open to all
            group_add=_device_groups() if device == "cuda" else None,
        )
        # No paths masked in the container's /proc (as `--security-opt systempaths=unconfined`, which the SDK
        # does not name): with Docker's masks in place the kernel refuses the fresh /proc that bubblewrap
        # mounts for the pair's PID namespace ("Can't mount proc on /newroot/proc"). What they hid is root's
        # to read or write, or harmless (docs/security.md); the container's user is not root and holds no
        # capabilities. /sys is bound, not mounted afresh: its masks stay.
        host["MaskedPaths"] = ["/sys/firmware", "/sys/devices/virtual/powercap"]
        host["ReadonlyPaths"] = []
        created = client.api.create_container(
            IMAGE,
            relay,
            environment=env,  # the allow-list only: nothing else of the host's environment
            volumes=[spec["bind"] for spec in binds.values()],
            host_config=host,
            user="{}:{}".format(*_user()),
            # No working_dir: Docker makes a working folder root's, mode 755, over the tmpfs's 1777, and no
            # user but root could then write /tmp (the relay's temporary files: "No usable temporary directory").
            stdin_open=True,
            labels={"kernelbot": "sandbox"},
        )
        return client.containers.get(created["Id"])

    def _read_frame(self, deadline: float) -> tuple[int, bytes] | None:
        while len(self._buf) < 8 or len(self._buf) < 8 + struct.unpack(">I", self._buf[4:8])[0]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self._raw.settimeout(left)
            try:
                chunk = self._raw.recv(65536)
            except TimeoutError:
                raise TimeoutError from None
            if not chunk:
                return None
            self._buf += chunk
        size = struct.unpack(">I", self._buf[4:8])[0]
        kind, data = self._buf[0], self._buf[8 : 8 + size]
        self._buf = self._buf[8 + size :]
        return kind, data

    def _readline(self, deadline: float) -> bytes | None:
        while b"\n" not in self._lines[-1]:
            frame = self._read_frame(deadline)
            if frame is None:
                return None
            if frame[0] == 2:
                self._stderr = (self._stderr + frame[1])[-4000:]
            else:
                self._lines[-1] += frame[1]
                if len(self._lines[-1]) > MAX_LINE:
                    raise ValueError(f"an answer line over {MAX_LINE >> 20} MiB")
        line, rest = self._lines[-1].split(b"\n", 1)
        self._lines[-1] = rest
        return line

    def request(self, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        with contextlib.suppress(OSError):
            self._raw.sendall((json.dumps({"command": command, "timeout_s": timeout_s}) + "\n").encode())
        try:
            line = self._readline(time.monotonic() + timeout_s + 30)  # the relay times the request itself
        except TimeoutError:
            self.kill()
            raise SandboxFailure(
                "timeout", f"no answer within {timeout_s:g} s; the container was killed"
            ) from None
        except ValueError as exc:
            self.kill()
            raise SandboxFailure("crashed", f"the container's answer was not readable: {exc}") from None
        if line is None:
            tail = " | ".join(self._stderr.decode(errors="replace").strip().splitlines()[-4:])
            raise SandboxFailure(
                "crashed", f"the container ended before answering{': ' + tail if tail else ''}"
            )
        try:
            answer = json.loads(line)
            if "sandbox_failure" in answer:
                status, reason = answer["sandbox_failure"]
                raise SandboxFailure(str(status), str(reason))
            return dict(answer["answer"])
        except (ValueError, KeyError, TypeError, AttributeError):
            self.kill()
            raise SandboxFailure("crashed", "the container's answer was not readable") from None

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.request({"cmd": "quit"}, timeout_s=10)
        with contextlib.suppress(Exception):
            self._sock.close()
        self.kill()


def _relay(argv: list[str]) -> int:
    """Inside the container: the ordinary pair, requests from stdin, answers to stdout."""
    from kernelbot.harness.sandbox import Sandbox

    device, memory_mb, untrusted, cache = argv[0], int(argv[1]), argv[2] == "1", argv[3]
    readable = [Path(p) for p in argv[4:]]
    out = sys.stdout.buffer
    try:
        jail.require("bwrap")
    except jail.JailUnavailable:  # never plain processes in here: the host refuses (ContainerSandbox)
        why = jail.probe() or "bubblewrap cannot run"
        out.write((json.dumps({"jail_unavailable": why}) + "\n").encode())
        out.flush()
        return 1
    out.write(b'{"jail": "bwrap"}\n')
    out.flush()
    with Sandbox(
        device=device,
        memory_limit_mb=memory_mb,
        cache_dir=Path(cache) if cache else None,
        readable=readable,
        mode="bwrap",
        untrusted_cache=untrusted,
    ) as sandbox:
        for line in sys.stdin.buffer:
            message = json.loads(line)
            if message["command"].get("cmd") == "quit":
                break
            try:
                reply: dict[str, Any] = {"answer": sandbox.request(message["command"], message["timeout_s"])}
            except SandboxFailure as exc:
                reply = {"sandbox_failure": [exc.status, exc.reason]}
            out.write((json.dumps(reply) + "\n").encode())
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_relay(sys.argv[1:]))
