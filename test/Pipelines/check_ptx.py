#!/usr/bin/env python3
"""Assembles every kernel module of `kilnc --emit=ptx` output with ptxas.

Usage: check_ptx.py PTXAS ARCH FILE
Prints "N kernel modules assembled" and exits non-zero, naming the module,
when ptxas rejects one.
"""
import subprocess
import sys
import tempfile


def main():
    ptxas, arch, path = sys.argv[1:4]
    modules, name, lines = [], None, []
    for line in open(path):
        if line.startswith("// kernel module @"):
            if name:
                modules.append((name, "".join(lines)))
            name, lines = line.split("@", 1)[1].strip(), []
        else:
            lines.append(line)
    if name:
        modules.append((name, "".join(lines)))
    if not modules:
        sys.exit("no kernel modules found")
    for name, text in modules:
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(text)
            f.flush()
            result = subprocess.run([ptxas, f"-arch={arch}", f.name, "-o", "/dev/null"],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"ptxas rejected kernel module @{name}:\n{result.stderr}")
    print(f"{len(modules)} kernel modules assembled")


if __name__ == "__main__":
    main()
