"""pytest setup for the end-to-end model tests: markers and the scripts/ import path."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: big model, minutes in the reference interpreter")
    config.addinivalue_line("markers", "paper: one of the five models from the Korch paper")
    config.addinivalue_line("markers", "heldback: held-back-like torchvision/torch model")
