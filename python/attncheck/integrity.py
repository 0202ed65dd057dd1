"""A golden's integrity digest (golden/SCHEMA.md, "Integrity digest"), as attncheck computes it
(golden/integrity.cpp): SHA-256 over length-prefixed fields of a canonical walk of the file, numbers
as the int64 or float64 values they read as, without /yardstick and the root attribute `integrity`."""
import hashlib
import struct

import numpy as np

from attncheck.errors import BadInput

VERSION = "attncheck-integrity-v1"
ATTRIBUTE = "integrity"


class _Digest:
    """Each field: its length as 8 little-endian bytes, then its bytes."""

    def __init__(self):
        self.sha = hashlib.sha256()

    def field(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sha.update(struct.pack("<Q", len(data)))
        self.sha.update(data)


def _kind(dtype, where, path):
    if dtype.kind in "iu":
        return "integer"
    if dtype.kind == "f":
        return "float"
    if dtype.kind in "SUO":
        return "string"
    raise BadInput(f"{path}: {where}: HDF5 type {dtype}; a golden holds integers, floats and strings only")


def _numbers(values, kind):
    return np.ascontiguousarray(np.asarray(values), dtype="<i8" if kind == "integer" else "<f8").tobytes()


def _attributes(obj, where, path, digest, is_root):
    for name in sorted(obj.attrs.keys(), key=lambda text: text.encode()):
        if is_root and name == ATTRIBUTE:
            continue
        value = obj.attrs[name]
        array = np.asarray(value)
        kind = _kind(array.dtype, f"{where}@{name}", path)
        digest.field(name)
        digest.field(kind)
        digest.field(",".join(str(d) for d in array.shape))
        if kind == "string":
            if array.shape != ():
                raise BadInput(f"{path}: {where}@{name}: a string attribute of shape {array.shape}; "
                               "a golden's string attributes are scalars")
            text = value.decode() if isinstance(value, bytes) else str(value)
            digest.field(text.split("\0", 1)[0])
        else:
            digest.field(_numbers(array, kind))


def _group(group, group_path, path, digest):
    import h5py

    is_root = group_path == ""
    _attributes(group, group_path or "/", path, digest, is_root)
    for name in sorted(group.keys(), key=lambda text: text.encode()):
        member = f"{group_path}/{name}"
        if is_root and name == "yardstick":
            continue
        link = group.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise BadInput(f"{path}: {member}: a soft or external link; a golden's objects are groups and "
                           "datasets (hard links)")
        digest.field(member)
        child = group[name]
        if isinstance(child, h5py.Group):
            digest.field("group")
            _group(child, member, path, digest)
        elif isinstance(child, h5py.Dataset):
            digest.field("dataset")
            _attributes(child, member, path, digest, False)
            kind = _kind(child.dtype, member, path)
            if kind == "string":
                raise BadInput(f"{path}: {member}: a string dataset; a golden's datasets hold integers or floats")
            digest.field(kind)
            digest.field(",".join(str(d) for d in child.shape))
            digest.field(_numbers(child[()], kind))
        else:
            raise BadInput(f"{path}: {member}: a named datatype or another object; a golden's objects are "
                           "groups and datasets")


def integrity_digest(h5, path):
    """'attncheck-integrity-v1:<64 hex digits>' of the open h5py file."""
    digest = _Digest()
    digest.field(VERSION)
    _group(h5, "", path, digest)
    return f"{VERSION}:{digest.sha.hexdigest()}"


def verify_integrity(h5, path):
    """True when the file carries a digest equal to its own; False when it carries none; BadInput when
    its digest is of an unknown version or differs (the file changed after it was written)."""
    if ATTRIBUTE not in h5.attrs:
        return False
    stored = h5.attrs[ATTRIBUTE]
    stored = stored.decode() if isinstance(stored, bytes) else str(stored)
    if not stored.startswith(VERSION + ":"):
        raise BadInput(f"{path}: /@{ATTRIBUTE} = '{stored}': must be '{VERSION}:<64 hex digits>'")
    computed = integrity_digest(h5, path)
    if computed != stored:
        raise BadInput(f"{path}: /@{ATTRIBUTE}: {stored} stored, {computed} computed from the file: the file "
                       "changed after it was written (a flipped bit, an edit); make the golden again, or "
                       "`attncheck golden seal` it if the edit was deliberate")
    return True
