"""Build ``gsjax/data/adult.npz`` from the raw UCI Adult files.

    python scripts/build_adult_data.py [RAW_FOLDER] [--out gsjax/data/adult.npz]

RAW_FOLDER (default ``../shared/data/adult`` from the repository root) holds ``adult.data`` and
``adult.test``. Source: Becker, B. and Kohavi, R. (1996). Adult. UCI Machine Learning
Repository, https://doi.org/10.24432/C5XW20 (CC BY 4.0); the citation is written into the file's
``source`` entry. See :mod:`gsjax.adult` for what is kept and how.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from gsjax import adult

REPO = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw", nargs="?", default=str(REPO.parent / "shared" / "data" / "adult"))
    p.add_argument("--out", default=str(REPO / "gsjax" / "data" / "adult.npz"))
    args = p.parse_args(argv)
    table = adult.parse_raw(args.raw)
    n, m = table.num_train, table.num_rows - table.num_train
    if (n, m) != (adult.NUM_TRAIN, adult.NUM_TEST):
        raise SystemExit(f"unexpected row counts {n} / {m}; adult.names says "
                         f"{adult.NUM_TRAIN} / {adult.NUM_TEST}")
    out = adult.save(table, args.out)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out}: {n} training + {m} test rows, {out.stat().st_size / 1024:.0f} KiB, "
          f"sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
