"""Trusted helper that performs ONE action of a live workspace inside its fresh sandbox.

Runs as ``python3 -I -S /opt/securebench/live/shell.py``: this folder is mounted read-only
(staged by ``verifiers.live.runner.helper_folder``), stdlib only. A main script is compiled
on every start while an imported module's bytecode is read from ``__pycache__``, so this
launcher stays tiny and the work is in ``helper_ops`` / ``helper_io``, staged with their
bytecode precompiled for the sandbox's Python (unchecked-hash ``.pyc``: ~8 ms less per step).

Protocol. stdin: an 8-byte big-endian length, the host's header as ``marshal`` data (format
2: the host is trusted, and every Python 3 reads it; ``json`` would cost ~6 ms of imports),
then the tars whose byte lengths the header lists (the workspace snapshot; for ``diff`` also
the seed). stdout: frames ``b"SBF1" + type (1 byte) + length (4 bytes, big-endian) +
payload``: ``1``/``2`` the head of the command's stdout/stderr, live; ``3``/``4`` their tails
at the end; ``T`` chunks of the tree tar; ``P`` chunks of a patch; ``R`` the result (JSON
with the header's nonce), always last.

Why the host can trust what this reports although the agent's command runs beside it:

* the command gets pipes of its own (stdin /dev/null, never our stdout) and its own
  session, and we make ourselves non-dumpable first: same-uid code cannot open
  ``/proc/<us>/fd/1``, read our memory or ptrace us, so the nonce never leaves us;
* when it exits, or at our deadline or a limit, every other process of the sandbox is
  SIGKILLed before the tree is read: nothing changes a file while it is tarred, and nothing
  writes a frame after it;
* the result names the tree's length and CRC-32: frames injected earlier through another
  holder of the pipe (Docker's exec shell, or code the command wrote into bwrap's pid 1,
  which runs as the sandbox uid) make the host discard the step, nothing more; the host
  takes a patch only from a diff, stops reading at the result, and a kill reaches every
  process of the sandbox's uid, so such a holder cannot hold a worker either.

Extraction never follows links: every folder is opened component by component with
``O_NOFOLLOW``, files are created ``O_EXCL``, names must be safe relative paths, and members
at or below read-only mounts are skipped. Older Pythons in pack images must run these files:
no walrus, no match, no ``X | Y`` at runtime.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import helper_ops

    sys.exit(helper_ops.main())
