"""The container form of a launch: `docker run` (or `podman run`) around the engine's own argv.

A host whose inventory says `container: docker|podman` runs the card's per-hardware `image`
the way SGLang's cookbook and the vendors' container guides do: the accelerators passed in by
vendor, `--ipc=host` and `--network host` (the engine binds the host's port, NCCL and the
disaggregation transfer see the host's NICs), a large `/dev/shm` (docker's; podman refuses
`--shm-size` beside `--ipc=host`, and the host's /dev/shm is what the engine sees), the host's
model root mounted at the same path (so `--model-path` reads the same inside and out) and the
launch's environment forwarded by name with `-e NAME` (the values are exported before the
command, so a secret never appears on the command line). The engine argv itself is unchanged:
`dayzero lint` parses it, not docker's flags. Pure functions.

A Slurm node whose cluster (or kind) says `container: pyxis` runs each role's srun step in the
image instead (`pyxis_flags`: the kind's `container_image`, else the card's image): pyxis/enroot
share the node's network, IPC and /dev/shm and hand the job's GPUs to the container, so only the
mounts are ours: the model root and the cluster's workdir at the same paths, the user's home left
out (a docker container does not see it either). The step's whole script, the inventory's
`engine_setup` included, runs inside the image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dayzero import devices
from dayzero.errors import ConfigError
from dayzero.spec.card import ModelCard
from dayzero.spec.shell import quote

RUNTIMES = ("docker", "podman")
PYXIS = "pyxis"
IMAGE_MARK = "DAYZERO-IMAGE"  # the line of `version_check`'s output that names the image
SHM_SIZE = "32g"  # the SGLang cookbook's `docker run --shm-size 32g`


def device_flags(runtime: str, vendor: str, accelerators: int | None) -> tuple[str, ...]:
    """The flags that hand a host's accelerators of this vendor to the container: its device
    tool's (`DeviceTool.container_flags`, from each vendor's container guide)."""
    tool = devices.by_vendor(vendor)
    if tool is None:
        raise ValueError(
            f"no container device flags are known for vendor {vendor!r}; run it with container: none"
        )
    return tool.container_flags(runtime, accelerators)


def wrap(
    runtime: str,
    *,
    vendor: str,
    accelerators: int | None,
    image: str,
    env_names: Sequence[str],
    model_root: str | None,
    name: str,
) -> tuple[str, ...]:
    """The `<runtime> run ... <image>` prefix for one launch (the engine argv follows it)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown container runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    argv = [runtime, "run", "--rm", "--name", name]
    argv += device_flags(runtime, vendor, accelerators)
    argv += ["--ipc=host", "--network", "host"]
    if runtime == "docker":  # podman 4.3: "cannot set shmsize when running in the {host } IPC Namespace"
        argv += ["--shm-size", SHM_SIZE]
    if model_root:
        argv += ["-v", f"{model_root}:{model_root}"]
    for env_name in env_names:
        argv += ["-e", env_name]
    return (*argv, image)


def version_check(runtime: str, image: str, command: str) -> str:
    """Shell that checks the engine inside `image` the way a launch will meet it: the image is
    pulled unless present, its resolved id and registry digests printed on one `IMAGE_MARK`
    line (`parse_version_check`), then the engine's version command run inside it (no network,
    the image's entrypoint set aside). Fails, with the runtime's message, when the image can
    be neither found nor pulled or the command fails inside it."""
    rt, img = runtime, quote(image)
    fmt = quote(IMAGE_MARK + " {{.Id}} {{range .RepoDigests}}{{.}},{{end}}")
    return f"{_present(rt, image)} && {rt} image inspect --format {fmt} {img} && {_run(rt, image, command)}"


def inside(runtime: str, image: str, shell: str) -> str:
    """Shell that runs `shell` inside `image` (pulled unless present), as preflight's role checks
    do on a container host; its exit status is the shell's, or 125 naming the image."""
    return f"{_present(runtime, image)} && {_run(runtime, image, shell)}"


def _present(runtime: str, image: str) -> str:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown container runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    img, why = quote(image), quote(f"image {image}: neither present nor pullable")
    return (
        f"{{ {runtime} image inspect {img} >/dev/null 2>&1 || {runtime} pull -q {img} >/dev/null || "
        f"{{ echo {why} >&2; exit 125; }}; }}"
    )


def _run(runtime: str, image: str, shell: str) -> str:
    return f"{runtime} run --rm --network none --entrypoint sh {quote(image)} -c {quote(shell)}"


@dataclass(frozen=True)
class ImageFacts:
    """What preflight learnt of a cell's image on a host: the reference the card names, the id
    the runtime resolved it to and the registry digests (`name@sha256:...`) it is known by."""

    ref: str
    id: str
    digests: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"ref": self.ref, "id": self.id, "digests": list(self.digests)}


def parse_version_check(image: str, output: str) -> tuple[ImageFacts | None, str]:
    """The image's facts and the engine's own output from `version_check`'s output."""
    facts, rest = None, []
    for line in output.splitlines():
        if line.startswith(IMAGE_MARK + " ") and facts is None:
            parts = line.split()
            digests = tuple(d for d in (parts[2] if len(parts) > 2 else "").split(",") if d)
            facts = ImageFacts(image, parts[1] if len(parts) > 1 else "", digests)
        else:
            rest.append(line)
    return facts, "\n".join(rest)


def name_of(prefix: Sequence[str]) -> tuple[str, str] | None:
    """(runtime, container name) of a launch's `<runtime> run ... --name NAME ... <image>` prefix."""
    if not prefix or prefix[0] not in RUNTIMES or "--name" not in prefix:
        return None
    return prefix[0], prefix[list(prefix).index("--name") + 1]


def remove(runtime: str, name: str) -> str:
    """Shell that removes a launch's container, running or not, and succeeds if it is gone: a
    killed `docker run` client leaves its container running (SIGKILL is not proxied)."""
    name = quote(name)
    return f"{runtime} rm -f {name} >/dev/null 2>&1; ! {runtime} container inspect {name} >/dev/null 2>&1"


def pyxis_flags(image: str, mounts: Sequence[str]) -> tuple[str, ...]:
    """The srun flags (pyxis's SPANK options) that run a step's task in `image`, with each path of
    `mounts` bound at the same path inside."""
    argv = [f"--container-image={image}"]
    if paths := list(dict.fromkeys(m for m in mounts if m)):
        argv.append("--container-mounts=" + ",".join(f"{p}:{p}" for p in paths))
    return (*argv, "--no-container-mount-home")


def image_of(card: ModelCard, hardware: str) -> str:
    """The card's image for this hardware; a container host cannot run a cell without one."""
    image = card.hardware[hardware].image
    if not image:
        raise ConfigError(
            card.path, f"hardware.{hardware}.image", "is not set, and the host runs in a container"
        )
    return image
