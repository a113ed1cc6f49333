"""Run commands on lab hosts over SSH (paramiko), with OpenSSH's trust model and ProxyJump.

One module per job, in the order a connection needs them:
- `config`: where to connect (inventory + ssh config, jumps and aliases) -> `SshTarget`
- `hostkeys`: which host keys are trusted (known_hosts, strict checking, fix-it hints) -> `Trust`
- `pool`: one shared connection per host, tunnelled through jump hosts -> `close_all`
- `channel`: one command on one channel (stdin, output, the deadline that kills its process group)
- `transport`: `SSHTransport`, the `Transport` interface built on the four above
"""

from dayzero.lab.transport.ssh.config import SshTarget, resolve_target
from dayzero.lab.transport.ssh.hostkeys import NewHostKeyWarning, Trust, fingerprint
from dayzero.lab.transport.ssh.pool import MAX_SESSIONS, close_all
from dayzero.lab.transport.ssh.transport import SSHTransport

__all__ = [
    "MAX_SESSIONS",
    "NewHostKeyWarning",
    "SSHTransport",
    "SshTarget",
    "Trust",
    "close_all",
    "fingerprint",
    "resolve_target",
]
