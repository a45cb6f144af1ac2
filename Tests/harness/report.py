"""PASS/FAIL lines and the closing `N passed, N failed` for the Python checks (edf, lsl, dashboard): one place for
how a check is run, reported and counted. Import with `sys.path.insert(0, <Tests/harness>)`."""

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
