"""A distinct host uid for each live sandbox when Podium runs as root.

Concurrent sandboxes running as one uid would share its process limit (RLIMIT_NPROC counts per uid) and
could signal each other's processes. Each sandbox therefore leases a uid from a range; the lease is an
abstract Unix socket named after the uid, bound in the host's network namespace, so that it is exclusive
across every Podium process on the machine and vanishes by itself when the process holding it dies.
"""

import socket


class UidLease:
    """One uid, held until :meth:`release` (or until this process exits)."""

    def __init__(self, uid: int, holder: socket.socket) -> None:
        self.uid = uid
        self._holder = holder

    def release(self) -> None:
        """Give the uid back."""
        self._holder.close()


def lease_uid(first: int, span: int) -> UidLease:
    """The lowest uid in ``[first, first + span)`` no other sandbox on this machine holds."""
    for uid in range(first, first + span):
        holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            holder.bind(f"\0podium-sandbox-uid-{uid}")
        except OSError:
            holder.close()
            continue
        return UidLease(uid, holder)
    raise RuntimeError(f"all {span} sandbox uids from {first} are in use")
