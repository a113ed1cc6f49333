"""The container form of a launch: `docker run` (or `podman run`) around the engine's own argv.

A host whose inventory says `container: docker|podman` runs the card's per-hardware `image`
the way SGLang's cookbook and the vendors' container guides do: the accelerators passed in by
vendor, `--ipc=host` and `--network host` (the engine binds the host's port, NCCL and the
disaggregation transfer see the host's NICs), a large `/dev/shm`, the host's model root mounted
at the same path (so `--model-path` reads the same inside and out) and the launch's environment
forwarded by name with `-e NAME` (the values are exported before the command, so a secret never
appears on the command line). The engine argv itself is unchanged: `dayzero lint` parses it, not
docker's flags. Pure functions.

A Slurm node whose cluster (or kind) says `container: pyxis` runs each role's srun step in the
image instead (`pyxis_flags`: the kind's `container_image`, else the card's image): pyxis/enroot
share the node's network, IPC and /dev/shm and hand the job's GPUs to the container, so only the
mounts are ours: the model root and the cluster's workdir at the same paths, the user's home left
out (a docker container does not see it either). The step's whole script, the inventory's
`engine_setup` included, runs inside the image.
"""

from __future__ import annotations

from collections.abc import Sequence

from dayzero.errors import ConfigError
from dayzero.spec.card import ModelCard

RUNTIMES = ("docker", "podman")
PYXIS = "pyxis"
SHM_SIZE = "32g"  # the SGLang cookbook's `docker run --shm-size 32g`

# Device flags by the catalogue's vendor, from each vendor's container guide.
# NVIDIA: NVIDIA Container Toolkit (`--gpus all`); podman reaches it through CDI.
# AMD: ROCm's "Running ROCm Docker containers" and SGLang's AMD GPU page (kfd + dri, video group,
# unconfined seccomp for memory mapping).
# Google: Cloud TPU containers run privileged on the host network.
# AWS: Neuron containers get each /dev/neuron<N> device (one per accelerator counted).
NVIDIA = {"docker": ("--gpus", "all"), "podman": ("--device", "nvidia.com/gpu=all")}
AMD = (
    "--device",
    "/dev/kfd",
    "--device",
    "/dev/dri",
    "--group-add",
    "video",
    "--cap-add",
    "SYS_PTRACE",
    "--security-opt",
    "seccomp=unconfined",
)


def device_flags(runtime: str, vendor: str, accelerators: int | None) -> tuple[str, ...]:
    """The flags that hand a host's accelerators of this vendor to the container."""
    if vendor == "NVIDIA":
        return NVIDIA[runtime]
    if vendor == "AMD":
        return AMD
    if vendor == "Google":
        return ("--privileged",)
    if vendor == "AWS":
        if not accelerators:
            raise ValueError(
                "AWS Neuron devices are passed one by one: the host's accelerator count is needed"
            )
        return tuple(flag for i in range(accelerators) for flag in ("--device", f"/dev/neuron{i}"))
    if vendor == "any":  # a CPU host: nothing to pass
        return ()
    raise ValueError(
        f"no container device flags are known for vendor {vendor!r}; run it with container: none"
    )


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
    argv += ["--ipc=host", "--network", "host", "--shm-size", SHM_SIZE]
    if model_root:
        argv += ["-v", f"{model_root}:{model_root}"]
    for env_name in env_names:
        argv += ["-e", env_name]
    return (*argv, image)


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
