"""Compare two folders of .npy outputs (Korch's file contract): every file in REF must be in GOT
with the same shape and dtype and a relative L2 error ||got - ref|| / ||ref|| within --tol.

  python scripts/compare_outputs.py GOT_DIR REF_DIR [--tol 1e-4]
Exit status 1 when any output is missing or outside the tolerance.
"""
import argparse
import sys
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got")
    ap.add_argument("ref")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    bad = 0
    refs = sorted(Path(a.ref).glob("*.npy"))
    if not refs:
        sys.exit(f"no .npy files in {a.ref}")
    for r in refs:
        g = Path(a.got) / r.name
        if not g.exists():
            print(f"{r.name}: missing from {a.got}")
            bad += 1
            continue
        want, have = np.load(r), np.load(g)
        if want.shape != have.shape or want.dtype != have.dtype:
            print(f"{r.name}: {have.dtype}{list(have.shape)} where the reference has {want.dtype}{list(want.shape)}")
            bad += 1
            continue
        w, h = want.astype(np.float64), have.astype(np.float64)
        den = np.linalg.norm(w)
        err = np.linalg.norm(h - w) / (den if den > 0 else 1.0)
        ok = err <= a.tol
        bad += not ok
        print(f"{r.name}: relative L2 error {err:.2e} {'ok' if ok else 'FAIL'} (tolerance {a.tol:g})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
