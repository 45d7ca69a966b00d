"""Running code in a fresh interpreter where torch cannot be imported."""

import subprocess
import sys

TORCH_BLOCKER = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'torch' or name.startswith('torch.'):\n"
    "            raise ImportError('torch is blocked')\n"
    "sys.meta_path.insert(0, _Block())\n"
)


def run_without_torch(code: str, timeout: float = 120):
    """Run ``code`` in a fresh interpreter where importing torch fails; returns the process."""
    return subprocess.run([sys.executable, "-c", TORCH_BLOCKER + code], capture_output=True,
                          text=True, timeout=timeout)
