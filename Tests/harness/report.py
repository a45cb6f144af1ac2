"""How the Python checks report: one place for how a check is run, printed and counted. Import with
`sys.path.insert(0, <Tests/harness>)`.

- `Report`: a check is a function that raises; PASS/FAIL lines and `N passed, N failed` (edf, lsl, dashboard).
- `Checklist`: a check is a condition; `ok`/`FAIL` lines and a closing count that sets the exit status (mqtt,
  metrics).
- `free_port()`: a TCP port on 127.0.0.1 for a server the check starts.
"""

import socket
import sys
import traceback


class Report:
    def __init__(self):
        self.results = []

    def _passed(self, name):
        self.results.append(True)
        print(f"PASS {name}", flush=True)

    def _failed(self, name, e):
        self.results.append(False)
        print(f"FAIL {name}: {e}", flush=True)
        if not isinstance(e, AssertionError):
            traceback.print_exc()

    def check(self, name, fn):
        """Runs `fn()`; an AssertionError is a failure with its message, anything else also prints its trace."""
        try:
            fn()
            self._passed(name)
        except Exception as e:
            self._failed(name, e)

    async def acheck(self, name, awaitable):
        try:
            await awaitable
            self._passed(name)
        except Exception as e:
            self._failed(name, e)

    def setup_failed(self, e):
        print(f"FAIL setup: {e!r}")
        if not isinstance(e, AssertionError):
            traceback.print_exc()
        self.results.append(False)

    def summary(self):
        """Prints `N passed, N failed`; True when nothing failed (and something ran)."""
        passed = sum(self.results)
        print(f"{passed} passed, {len(self.results) - passed} failed")
        return bool(self.results) and passed == len(self.results)


class Checklist:
    """`check(ok, what)` prints `ok   what` or `FAIL what` as each condition is checked; `finish(name)` prints the
    count and exits 1 when any failed."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)

    def finish(self, name):
        if self.failures:
            print(f"\n{len(self.failures)} check(s) failed", flush=True)
            sys.exit(1)
        print(f"\nall {name} checks passed", flush=True)


def free_port():
    """A TCP port that is free on 127.0.0.1 now (the kernel picks it; the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
