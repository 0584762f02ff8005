"""Run as root, a local sandbox's commands keep out of user namespaces by a seccomp filter, not by an
inner bubblewrap: each thing the filter refuses is tried from inside, the 32-bit way in included, and
what it does not refuse (threads, processes) still works."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from openenv.harness.sandbox import LocalSandbox, seccomp

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the filter is for sandboxes run as root")

# Each refused call, made from inside: prints NAME RESULT ERRNO.
_CALLS = """
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": dict(unshare=272, clone3=435, setns=308, add_key=248, keyctl=250),
    "aarch64": dict(unshare=97, clone3=435, setns=268, add_key=217, keyctl=219),
}[platform.machine()]
def call(name, *args):
    ctypes.set_errno(0)
    print(name, libc.syscall(numbers[name], *args), ctypes.get_errno(), flush=True)
call("unshare", 0x10000000)  # CLONE_NEWUSER
call("clone3", None, 0)
call("setns", 0, 0)
call("add_key", b"user", b"probe", b"v", 1, -4)  # into the user keyring
call("keyctl", 0, -4, 0)  # KEYCTL_GET_KEYRING_ID of the user keyring
"""

# Calls through `int 0x80` (the i386 table, another audit architecture), as 32-bit code makes them: its
# getpid (20) must work, and its unshare (310) with CLONE_NEWUSER must not. A filter that checks only
# x86_64's numbers lets the unshare through; one that refuses every foreign call breaks 32-bit programs.
_INT80 = """
import ctypes, mmap
def int80(number, ebx):
    code = (
        bytes.fromhex("53b8") + number.to_bytes(4, "little")  # push rbx; mov eax, number
        + b"\\xbb" + ebx.to_bytes(4, "little")  # mov ebx, first argument
        + bytes.fromhex("cd805bc3")  # int 0x80; pop rbx; ret
    )
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print("getpid", int80(20, 0))
"""
_I386 = _INT80 + 'print("unshare", int80(310, 0x10000000))\n'


def _i386_available() -> bool:
    """Whether this kernel runs `int 0x80` calls at all (IA32 emulation): getpid answers there."""
    out = subprocess.run([sys.executable, "-c", _INT80], capture_output=True, text=True, timeout=60).stdout
    return int(out.split()[1]) > 0


_STILL_WORKS = """
import subprocess, threading
seen = []
worker = threading.Thread(target=lambda: seen.append("thread"))
worker.start(); worker.join()
print(*seen, subprocess.run(["sh", "-c", "echo child"], capture_output=True, text=True).stdout.strip())
print(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
"""


def test_a_root_sandbox_command_passes_through_one_bwrap_and_the_filter() -> None:
    """The inner bwrap (~2.5 CPU-ms a command) is gone where the filter is known."""
    if seccomp.program() is None:
        pytest.skip(f"no filter for {platform.machine()}")
    with LocalSandbox() as box:
        fd = seccomp.program_fd()
        assert fd is not None
        try:
            argv = box._wrap(["true"], "/app", fd)
        finally:
            os.close(fd)
    assert sum(1 for arg in argv if os.path.basename(arg) == "bwrap") == 1, argv
    assert argv[argv.index("--seccomp") + 1] == str(fd)


def test_user_namespaces_keyrings_and_setns_are_refused_inside() -> None:
    if seccomp.program() is None:
        pytest.skip(f"no filter for {platform.machine()}")
    with LocalSandbox() as box:
        out = box.run([sys.executable, "-c", _CALLS], timeout_s=60).output
    results = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert results["unshare"] == ["-1", "1"], out  # EPERM, as --disable-userns gave
    assert results["clone3"] == ["-1", "38"], out  # ENOSYS: glibc falls back to clone
    assert results["setns"] == ["-1", "1"], out
    assert results["add_key"] == ["-1", "1"], out
    assert results["keyctl"] == ["-1", "1"], out


def test_a_key_left_by_one_episode_is_not_there_for_the_next() -> None:
    """Every root sandbox runs as uid 61000 in the host's user namespace: a user keyring would carry a
    key from one episode to the next. The first can store nothing, so the second finds nothing."""
    store = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "print('stored', libc.syscall(248, b'user', b'answer', b'42', 2, -4), ctypes.get_errno())"
    )
    find = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "print('found', libc.syscall(249, b'user', b'answer', None, -4), ctypes.get_errno())"
    )
    if platform.machine() != "x86_64":
        pytest.skip("the probes use x86_64's call numbers")
    with LocalSandbox() as first:
        stored = first.run([sys.executable, "-c", store], timeout_s=60).output
    with LocalSandbox() as second:
        found = second.run([sys.executable, "-c", find], timeout_s=60).output
    assert stored.split()[:2] == ["stored", "-1"], stored
    assert found.split()[:2] == ["found", "-1"], found


@pytest.mark.skipif(platform.machine() != "x86_64", reason="int 0x80 is x86's")
def test_the_32_bit_entry_is_filtered_too() -> None:
    if not _i386_available():
        pytest.skip("this kernel has no 32-bit entry (no IA32 emulation): nothing to filter")
    with LocalSandbox() as box:
        out = box.run([sys.executable, "-c", _I386], timeout_s=60).output
    words = out.split()
    assert int(words[words.index("getpid") + 1]) > 0, out  # 32-bit code still runs
    assert int(words[words.index("unshare") + 1]) == -1, out  # -EPERM, no namespace


# getpid through the x32 ABI (x86_64's table with bit 30 set), which the filter cannot check by number.
_X32 = """
import ctypes, mmap
code = bytes.fromhex("b827000040" "0f05" "c3")  # mov eax, 0x40000027; syscall; ret
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
print("x32-getpid", ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 is x86_64's")
def test_a_call_of_an_abi_the_filter_cannot_check_ends_the_process() -> None:
    """An x32 call would be read by x86_64's numbers if the filter let it through; an error return
    instead would leave a program whose every call fails spinning until its timeout."""
    with LocalSandbox() as box:
        result = box.run([sys.executable, "-c", _X32], timeout_s=60)
    assert "x32-getpid" not in result.output, result.output
    assert result.exit_code == -31, result  # SIGSYS


def test_threads_and_child_processes_still_work_under_the_filter() -> None:
    with LocalSandbox() as box:
        out = box.run([sys.executable, "-c", _STILL_WORKS], timeout_s=60).output
    lines = out.split()
    assert lines[:2] == ["thread", "child"], out
    assert lines[2] == ("2" if seccomp.program() is not None else "0"), out  # 2: a filter is loaded


def test_where_the_filter_is_unknown_the_inner_bwrap_keeps_user_namespaces_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(seccomp, "program_fd", lambda: None)
    with LocalSandbox() as box:
        argv = box._wrap(["true"], "/app", None)
        out = box.run(["sh", "-c", "unshare -U true && echo NESTED-USERNS; echo done"], timeout_s=60).output
    assert sum(1 for arg in argv if os.path.basename(arg) == "bwrap") == 2, argv
    assert "--seccomp" not in argv
    assert "NESTED-USERNS" not in out and "done" in out, out
