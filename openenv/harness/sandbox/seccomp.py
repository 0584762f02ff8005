"""The seccomp filter a root-run local sandbox puts on its commands instead of an inner user namespace.

Run as root, a sandboxed command used to pass through two bubblewraps: the outer one (root) builds the
namespaces and the view, `setpriv` drops to the sandbox's uid, and an inner one made a user namespace
for the sole purpose of `--disable-userns`: without it, the uid could make user namespaces of its own
and reach the kernel code that only runs inside them. The inner `bwrap` cost ~2.5 CPU-ms a command
(issue 48). This filter, loaded by the outer `bwrap` (`--seccomp FD`) and kept by every descendant,
does what it was there for, and refuses two things the host's user namespace would otherwise share:

- `unshare` and `clone` with `CLONE_NEWUSER`: EPERM (what `--disable-userns` gives); `clone3`: ENOSYS,
  since its flags sit behind a pointer a filter cannot read (glibc then falls back to `clone`, as under
  Docker's default profile);
- `setns`: EPERM (a process without capabilities has no namespace to join; refused outright);
- `add_key`, `request_key`, `keyctl`: EPERM. A user keyring belongs to a uid within a user namespace:
  without a namespace of its own, every sandbox of uid 61000 would share one, a channel from one
  episode to the next (Docker's default profile refuses the same three).

Only x86_64 (with i386's numbers for 32-bit code) and aarch64 are known; anywhere else, `program()`
is None and the sandbox keeps its inner `bwrap`. A call of another ABI than those (x32, arm32 under
aarch64) cannot be checked, so it ends its process (SIGSYS), as libseccomp's default does: an error
return would leave a program whose every call fails, its exit included, spinning until its timeout.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["program", "program_fd"]

# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian: the low half first)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000

_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_I386 = 0x40000003
_AUDIT_ARCH_AARCH64 = 0xC00000B7

# (clone, unshare, clone3, setns, add_key, request_key, keyctl) per audit architecture
_CALLS = {
    _AUDIT_ARCH_X86_64: (56, 272, 435, 308, 248, 249, 250),
    _AUDIT_ARCH_I386: (120, 310, 435, 346, 286, 287, 288),
    _AUDIT_ARCH_AARCH64: (220, 97, 435, 268, 217, 218, 219),
}
_NATIVE = {"x86_64": (_AUDIT_ARCH_X86_64, _AUDIT_ARCH_I386), "aarch64": (_AUDIT_ARCH_AARCH64,)}


def _assemble(arches: tuple[int, ...]) -> bytes:
    """The classic-BPF program for these audit architectures (the first is the machine's own)."""
    code: list[tuple[int, str | int, str | int, int]] = []  # (op, jump-if-true, jump-if-false, k)
    labels: dict[str, int] = {}

    def at(label: str) -> None:
        labels[label] = len(code)

    code.append((_LD_ABS, 0, 0, _ARCH))
    for arch in arches:
        code.append((_JEQ, f"arch{arch}", 0, arch))
    code.append((_RET, 0, 0, _KILL_PROCESS))  # another ABI: not checkable, so not run
    for arch in arches:
        clone, unshare, clone3, setns, *keys = _CALLS[arch]
        at(f"arch{arch}")
        code.append((_LD_ABS, 0, 0, _NR))
        if arch == _AUDIT_ARCH_X86_64:
            code.append((_JGE, "kill", 0, _X32_BIT))
        code.append((_JEQ, "nosys", 0, clone3))
        code.append((_JEQ, "flags", 0, clone))
        code.append((_JEQ, "flags", 0, unshare))
        for call in (setns, *keys):
            code.append((_JEQ, "eperm", 0, call))
        code.append((_RET, 0, 0, _ALLOW))
    at("flags")
    code.append((_LD_ABS, 0, 0, _ARG0_LOW))
    code.append((_JSET, "eperm", 0, _CLONE_NEWUSER))
    code.append((_RET, 0, 0, _ALLOW))
    at("eperm")
    code.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    at("nosys")
    code.append((_RET, 0, 0, _ERRNO | errno.ENOSYS))
    at("kill")
    code.append((_RET, 0, 0, _KILL_PROCESS))

    def offset(index: int, target: str | int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - index - 1
        assert 0 <= jump < 256, (target, jump)
        return jump

    return b"".join(
        struct.pack("<HBBI", op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)
    )


_PROGRAM: dict[str, bytes | None] = {}


def program() -> bytes | None:
    """This machine's filter as `struct sock_filter`s, or None where its architecture is not known."""
    machine = platform.machine()
    if machine not in _PROGRAM:
        arches = _NATIVE.get(machine)
        _PROGRAM[machine] = None if arches is None else _assemble(arches)
    return _PROGRAM[machine]


def program_fd() -> int | None:
    """A pipe's read end holding the filter, for one `bwrap --seccomp FD` (bwrap reads it to its end, so
    every command needs its own); the caller passes it to the child and closes it. None where
    `program()` is."""
    data = program()
    if data is None:
        return None
    read, write = os.pipe()
    try:
        os.write(write, data)  # a few hundred bytes: well inside a pipe's buffer
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
