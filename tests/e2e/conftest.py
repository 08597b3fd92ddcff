"""pytest setup for the end-to-end model tests: markers and the scripts/ import path.

Tests marked ``extra`` (export_models.py's ``extra`` group) are deselected unless
the ``-m`` expression names ``extra`` or KORCH_E2E_EXTRA=1 is set, so a plain
``pytest tests/e2e`` runs only the default set."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: big model, minutes in the reference interpreter")
    config.addinivalue_line("markers", "paper: one of the five models from the Korch paper")
    config.addinivalue_line("markers", "heldback: held-back-like torchvision/torch model")
    config.addinivalue_line("markers", "timing: measures on this machine (measured costs, the closed loop); "
                            "ctest runs these alone (e2e.timing), the others beside other tests")
    config.addinivalue_line("markers", "extra: more torchvision/torch.nn architectures, run "
                            "only with -m extra (or KORCH_E2E_EXTRA=1)")


def pytest_collection_modifyitems(config, items):
    if "extra" in (config.getoption("markexpr") or "") or os.environ.get("KORCH_E2E_EXTRA") == "1":
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("extra") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
