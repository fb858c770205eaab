"""`import kiln` before `import onnx` (and onnxruntime): the extension links
libstdc++ statically, and while its copy's symbols were exported, onnx's
module init crashed (SIGSEGV, a null call in pthread_once through
std::call_once). The tests' conftest imports onnx first, which hid it: so
this runs a fresh interpreter."""

import os
import subprocess
import sys


def test_kiln_then_onnx_imports():
    done = subprocess.run(
        [sys.executable, "-c",
         "import kiln\nimport onnx\nimport onnxruntime\nprint('imported')"],
        capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "imported"
