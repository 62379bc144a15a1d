"""The binding's copies of C structs and constants (python/dsim/_lib.py)
against the library's ABI table (include/dsim/abi.h, ds_abi_lookup), both
ways: every ctypes Structure of the binding module has the C struct's size
(or, for a mirrored prefix, no more), and each of its fields the C field's
offset and size; every DS_* constant of the binding module has the C value;
and every struct, field and constant the table lists is mirrored.

That the check fails when a layout moves is tested here too, not only
claimed: test_checker_sees_* run the same comparison on a struct with two
fields swapped (a field moved in Python), on a table whose offset for a
field is shifted by 8 (a field moved in C, as ds_abi_lookup then reports
it), on a wrong constant and on a C field the binding lacks; each must be
reported. Checked by hand as well: swapping real_bytes and openmp in
BuildInfo._fields_ fails test_structs with "BuildInfo.openmp: offset 8, C
offsetof(dsBuildInfo, openmp) = 12"; inserting `int moved_in;` after
dsBuildInfo.gif in include/dsim/base.h and rebuilding the library fails it
with "BuildInfo.hdf5_version: offset 36, C offsetof(dsBuildInfo,
hdf5_version) = 40" (and the fields after it).
"""
import ctypes
import re

import pytest

from dsim import _lib

# Builtin C types the binding mirrors as ctypes types (not Structures).
C_TYPES = {"dsReal": _lib.REAL}


def binding_structs(mod):
    return [v for v in vars(mod).values()
            if isinstance(v, type) and issubclass(v, ctypes.Structure) and v.__module__ == mod.__name__]


def binding_consts(mod):
    return {k: v for k, v in vars(mod).items() if re.fullmatch(r"DS_[A-Z0-9_]+", k) and isinstance(v, int)}


def struct_mismatches(cls, lookup, names) -> list[str]:
    """Everything in which ctypes Structure cls differs from the table."""
    out = []
    cname = getattr(cls, "_c_name_", None)
    if not cname:
        return [f"{cls.__name__}: no _c_name_ (which C struct does it mirror?)"]
    csize = lookup(f"sizeof:{cname}")
    if csize is None:
        return [f"{cls.__name__}: the ABI table has no sizeof:{cname}"]
    pysize = ctypes.sizeof(cls)
    if getattr(cls, "_c_prefix_", False):
        if pysize > csize:
            out.append(f"{cls.__name__}: {pysize} bytes, more than {cname}'s {csize}")
    elif pysize != csize:
        out.append(f"{cls.__name__}: sizeof {pysize}, C sizeof({cname}) = {csize}")
    mirrored = set()
    for fname, *_ in cls._fields_:
        mirrored.add(fname)
        desc = getattr(cls, fname)
        off, size = lookup(f"offsetof:{cname}.{fname}"), lookup(f"sizeof:{cname}.{fname}")
        if off is None:
            out.append(f"{cls.__name__}.{fname}: the ABI table has no offsetof:{cname}.{fname}")
            continue
        if desc.offset != off:
            out.append(f"{cls.__name__}.{fname}: offset {desc.offset}, C offsetof({cname}, {fname}) = {off}")
        if desc.size != size:
            out.append(f"{cls.__name__}.{fname}: size {desc.size}, C {size}")
    for n in names:
        if n.startswith(f"offsetof:{cname}."):
            f = n.split(".", 1)[1]
            if f not in mirrored:
                out.append(f"{cls.__name__}: C field {cname}.{f} is listed in the ABI table but not mirrored")
    return out


def const_mismatches(consts: dict, lookup, names) -> list[str]:
    out = []
    for k, v in sorted(consts.items()):
        c = lookup(f"const:{k}")
        if c is None:
            out.append(f"{k}: not in the ABI table (add it to ABI_CONSTS in envs/abi.c)")
        elif c != v:
            out.append(f"{k} = {v} in Python, {c} in C")
    for n in names:
        if n.startswith("const:") and n[6:] not in consts:
            out.append(f"{n[6:]}: in the ABI table but not in the binding module")
    return out


@pytest.fixture(scope="module")
def table():
    names = _lib.abi_names()
    return names, _lib.abi_lookup


def test_table_answers(table):
    names, lookup = table
    assert len(names) == len(set(names)) > 40
    assert all(lookup(n) is not None for n in names)
    assert lookup("sizeof:dsNoSuchStruct") is None


def test_structs(table):
    names, lookup = table
    structs = binding_structs(_lib)
    assert {c._c_name_ for c in structs} >= {"dsBuildInfo", "dsConfigKey", "dsEnvClass"}
    problems = [p for cls in structs for p in struct_mismatches(cls, lookup, names)]
    assert problems == []
    # every struct of the table has a mirror (or is a builtin type with its ctypes type)
    mirrored = {c._c_name_ for c in structs}
    for n in names:
        if n.startswith("sizeof:") and "." not in n:
            c = n[7:]
            if c in C_TYPES:
                assert ctypes.sizeof(C_TYPES[c]) == lookup(n), c
            else:
                assert c in mirrored, f"{c} is in the ABI table but has no ctypes Structure in dsim._lib"


def test_constants(table):
    names, lookup = table
    consts = binding_consts(_lib)
    assert "DS_ERR_NOMEM" in consts and "DS_BATCH_LOCKSTEP" in consts
    assert const_mismatches(consts, lookup, names) == []
    # the error names the library gives agree with the constants' names
    for k, v in consts.items():
        if k.startswith("DS_ERR_"):
            assert _lib.err_name(v) == k


# -- the checker itself fails when a layout or value moves ------------------------------------
def test_checker_sees_a_field_moved_in_python(table):
    names, lookup = table
    f = list(_lib.BuildInfo._fields_)
    f[1], f[2] = f[2], f[1]  # real_bytes <-> openmp: same size, swapped offsets

    class Moved(ctypes.Structure):
        _c_name_ = "dsBuildInfo"
        _fields_ = f

    problems = struct_mismatches(Moved, lookup, names)
    assert any("real_bytes: offset" in p for p in problems) and any("openmp: offset" in p for p in problems)


def test_checker_sees_a_field_moved_in_c(table):
    names, lookup = table

    def moved(name):  # the table of a library whose dsConfigKey.doc sits 8 bytes later
        v = lookup(name)
        return v + 8 if name in ("offsetof:dsConfigKey.doc", "sizeof:dsConfigKey") else v

    problems = struct_mismatches(_lib.ConfigKey, moved, names)
    assert any("ConfigKey.doc: offset" in p for p in problems)
    assert any("ConfigKey: sizeof" in p for p in problems)


def test_checker_sees_a_new_c_field_and_a_wrong_constant(table):
    names, lookup = table
    assert any("C field dsEnvClass.defaults" in p
               for p in struct_mismatches(_lib.EnvClassHead, lambda n: 0 if n.endswith(".defaults") else lookup(n),
                                          names + ["offsetof:dsEnvClass.defaults"]))
    consts = dict(binding_consts(_lib), DS_ERR_STATE=-99)
    assert const_mismatches(consts, lookup, names) == ["DS_ERR_STATE = -99 in Python, -12 in C"]
    consts.pop("DS_ERR_STATE")
    assert const_mismatches(consts, lookup, names) == ["DS_ERR_STATE: in the ABI table but not in the binding module"]
