#!/usr/bin/env python3
"""run_limited.py --stack-kib N -- COMMAND...: runs COMMAND with its stack
(and so its threads' default stacks) limited to N KiB, passing its output
and exit status through. A small stack makes a recursion that is linear in
the graph's depth fail on a small graph, cheaply (adversarial-sizes.test)."""
import argparse
import resource
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--stack-kib", type=int, required=True)
p.add_argument("command", nargs=argparse.REMAINDER)
args = p.parse_args()
command = args.command[1:] if args.command[:1] == ["--"] else args.command


def limit():
    size = args.stack_kib << 10
    resource.setrlimit(resource.RLIMIT_STACK, (size, size))


sys.exit(subprocess.run(command, preexec_fn=limit).returncode)
