"""Writes a check set of published runs (the runs.json record schema) under data/validation/ for the check-set scripts."""
import json
import os


def write_check_set(file_name, records):
    """Writes `records` to data/validation/`file_name` (run from the repository root); record ids must be unique."""
    ids = [r["id"] for r in records]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    out = os.path.join("data", "validation", file_name)
    with open(out, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    print(f"wrote {len(records)} records to {out}")
