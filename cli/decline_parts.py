#!/usr/bin/env python3
"""Copies a candidate file and makes it decline parts of the case (golden/SCHEMA.md, "Candidate files"):
each PART=REASON is written as a string attribute of /result/declined and /result/PART is removed (with
--keep it stays, a candidate that disagrees with itself). For the ctests cli.compare_declined*.

    decline_parts.py CANDIDATE OUTPUT [--keep] PART=REASON ..."""
import shutil
import sys

import h5py

arguments = sys.argv[1:]
keep = "--keep" in arguments
arguments = [argument for argument in arguments if argument != "--keep"]
if len(arguments) < 3 or any("=" not in argument for argument in arguments[2:]):
    sys.exit(__doc__)
source, output, parts = arguments[0], arguments[1], [argument.split("=", 1) for argument in arguments[2:]]
shutil.copyfile(source, output)
with h5py.File(output, "r+") as candidate:
    result = candidate["result"]
    declined = result.require_group("declined")
    for part, reason in parts:
        declined.attrs[part] = reason
        if not keep and part in result:
            del result[part]
print(f"wrote {output}: declines " + ", ".join(part for part, _ in parts))
