"""pytest's setup for tests/python: the extension and the package are
imported from the trees, <build>/python/_dptrain.abi3.so and python/dptrain,
as `make test-python` sets PYTHONPATH; run directly (`pytest tests/python`)
the build folder is $DP_BUILD_DIR, else build/."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("DP_BUILD_DIR") or os.path.join(REPO, "build")

# PYTHONPATH (make test-python sets it) comes first; the trees are a fallback.
for folder in (os.path.join(REPO, "python"), os.path.join(BUILD, "python")):
    if folder not in sys.path:
        sys.path.append(folder)
# The claim scripts run as subprocesses import the same trees.
os.environ.setdefault("DP_BUILD_DIR", BUILD)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in [os.environ.get("PYTHONPATH", ""), os.path.join(BUILD, "python"),
                os.path.join(REPO, "python")] if p)

try:
    import _dptrain  # noqa: F401
except ImportError as e:
    raise ImportError(f"tests/python: _dptrain does not import from {BUILD}/python ({e}); build it "
                      f"(make build, or cmake --build BUILD --target _dptrain) or set "
                      f"DP_BUILD_DIR") from e

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def devices_settled():
    """Each test starts with the devices idle: an error an earlier test's
    kernel left on a device (raised at the next wait on that device) is
    that test's, not this one's, and is dropped here."""
    for _ in range(2 * _dptrain.device_count() + 2):  # waitall raises one device's per call
        try:
            _dptrain.waitall()
            break
        except Exception:  # noqa: BLE001
            pass
    yield


@pytest.fixture
def base_tensor_class():
    """Ops return _dptrain.Tensor itself during the test (the extension's
    own tests), whatever class `import dptrain` set; restored after."""
    previous = _dptrain._tensor_class()
    _dptrain._set_tensor_class(_dptrain.Tensor)
    yield
    _dptrain._set_tensor_class(previous)


def pytest_sessionfinish(session, exitstatus):
    """Run as a CTest test (DP_CTEST=1, scripts/run-pytest.sh), a file
    where a test skipped exits 77, CTest's skip, as the C tests do: a pass
    means every test in it ran. Each skip's reason is printed as a
    "SKIP FILE: reason" line, which scripts/skipped-tests.sh lists."""
    if os.environ.get("DP_CTEST") != "1" or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if not skipped:
        return
    need_torch = os.environ.get("DP_REQUIRE_TORCH") == "1"
    failed = False
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if need_torch and "torch" in reason.lower():
            # make test-interop: a test skipped for want of PyTorch fails
            print(f"\nFAIL {report.nodeid}: DP_REQUIRE_TORCH=1 (make test-interop) needs PyTorch: "
                  f"{reason}", end="")
            failed = True
        else:
            print(f"\nSKIP {report.nodeid}: {reason}", end="")
    print()
    session.exitstatus = 1 if failed else 77
