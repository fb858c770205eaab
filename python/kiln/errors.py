"""Kiln's exceptions: one-line messages, as the command-line tools print them.

Every message is the text kilnc or kiln-run prints after "error: ", so a
failure reads the same from Python as from a shell. What the message names
(the ONNX node, the tensor, the kernel) is also an attribute, for code that
reacts to it.
"""

from __future__ import annotations

import builtins
import re
from typing import Optional

_NODE = re.compile(r"node '([^']*)' \(([^)]*)\)")
_TENSOR = re.compile(
    r"(?:input|output|tensor|weight|initializer)(?: named)? '([^']*)'")
_KERNEL = re.compile(r"kernel '([^']*)'")


def _first(pattern: re.Pattern, text: str, group: int = 1) -> Optional[str]:
    match = pattern.search(text)
    return match.group(group) if match else None


class Error(Exception):
    """Base of every Kiln exception; `message` is the one-line message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        #: The graph input, output, weight or tensor the message names.
        self.tensor: Optional[str] = _first(_TENSOR, message)


class CompileError(Error):
    """kilnc rejected the model or failed: the message kilnc prints.

    Attributes: `node` and `op_type` (the ONNX node at fault, when there is
    one), `tensor`, `exit_code` (1: the model or an option is at fault; 2 or a
    negative signal number: a compiler bug, please report it).
    """

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.node: Optional[str] = _first(_NODE, message)
        self.op_type: Optional[str] = _first(_NODE, message, 2)
        self.exit_code = exit_code


class RuntimeError(Error, builtins.RuntimeError):
    """The runtime refused an artifact, an input or a device, or a run
    failed: the message kiln-run prints. Attributes: `tensor`, `kernel`."""

    def __init__(self, message: str):
        super().__init__(message)
        self.kernel: Optional[str] = _first(_KERNEL, message)
