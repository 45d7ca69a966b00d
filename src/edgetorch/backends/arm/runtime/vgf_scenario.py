"""A VGF file run on Arm's ML SDK for Vulkan on a PC: the ML SDK scenario-runner, the ML
emulation layer (Arm's Vulkan layers that implement ``VK_ARM_data_graph`` and ``VK_ARM_tensors``
over plain compute) and a CPU Vulkan driver (Mesa's lavapipe) -- the delegate's own SPIR-V
graph, not a re-derivation of it.

Pieces: the wheels ``ai-ml-sdk-scenario-runner``, ``ai-ml-sdk-vgf-library`` (``vgf_dump`` writes
the scenario template of a VGF: its input and output tensors) and
``ai-ml-emulation-layer-for-vulkan`` (``pip install 'edgetorch[vgf]'``), and Debian's
``mesa-vulkan-drivers`` and ``libvulkan1`` (``make vulkan``).

The trap this module exists for: Debian's Vulkan loader stacks explicit layers in the order it
discovers them and ignores the order in ``VK_INSTANCE_LAYERS``; the Graph layer must sit above
the Tensor layer. So each manifest goes into its own folder (library path made absolute), and
``VK_LAYER_PATH`` lists the Graph layer's folder first.
"""

from __future__ import annotations

import atexit
import ctypes.util
import functools
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ....errors import InvalidProgramError, KernelError

LAYERS = ("VK_LAYER_ML_Graph_Emulation", "VK_LAYER_ML_Tensor_Emulation")
_MANIFESTS = ("VkLayer_Graph.json", "VkLayer_Tensor.json")  # in LAYERS' order
_ICD_GLOBS = ("/usr/share/vulkan/icd.d/lvp_icd*.json", "/etc/vulkan/icd.d/lvp_icd*.json")
# The Vulkan formats a VGF's tensors use, as NumPy dtypes.
FORMATS = {"VK_FORMAT_R8_SINT": np.int8, "VK_FORMAT_R8_UINT": np.uint8,
           "VK_FORMAT_R8_BOOL_ARM": np.bool_, "VK_FORMAT_R16_SINT": np.int16,
           "VK_FORMAT_R16_UINT": np.uint16, "VK_FORMAT_R32_SINT": np.int32,
           "VK_FORMAT_R32_UINT": np.uint32, "VK_FORMAT_R64_SINT": np.int64,
           "VK_FORMAT_R16_SFLOAT": np.float16, "VK_FORMAT_R32_SFLOAT": np.float32}
MAX_TENSORS = 1024  # a scenario template lists the graph's inputs and outputs, no more
MAX_RANK = 16
TIMEOUT_S = 900.0  # lavapipe compiles the graph's shaders on every run: seconds, not minutes
INSTALL = ("pip install 'edgetorch[vgf]' (ML SDK 0.11.0 wheels) and apt-get install "
           "mesa-vulkan-drivers libvulkan1 (make vulkan)")


@dataclass(frozen=True)
class MlSdk:
    """Where the pieces are; ``env`` is what the scenario-runner runs with."""

    scenario_runner: str
    vgf_dump: str
    env: dict[str, str]


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # finds, does not import
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _missing() -> tuple[dict[str, Path], list[str]]:
    found: dict[str, Path] = {}
    missing = []
    wanted = {"scenario_runner": ("scenario_runner", "binaries/bin/scenario-runner"),
              "vgf_dump": ("vgf_lib", "binaries/bin/vgf_dump"),
              "layers": ("emulation_layer", "deploy")}
    for key, (package, rel) in wanted.items():
        base = _package_dir(package)
        path = base / rel if base else None
        if path is None or not path.exists():
            missing.append(f"{package} ({rel})")
        else:
            found[key] = path
    icds = sorted(p for g in _ICD_GLOBS for p in glob.glob(g))
    if icds:
        found["icd"] = Path(icds[0])
    else:
        missing.append("Mesa's lavapipe Vulkan driver (mesa-vulkan-drivers)")
    if ctypes.util.find_library("vulkan") is None:
        missing.append("the Vulkan loader (libvulkan1)")
    return found, missing


def _layer_dirs(deploy: Path) -> list[str]:
    """One folder per layer manifest, in ``LAYERS`` order (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix="edgetorch-vk-layers-"))
    atexit.register(shutil.rmtree, root, True)
    dirs = []
    for k, name in enumerate(_MANIFESTS):
        manifest = json.loads((deploy / "share/vulkan/explicit_layer.d" / name).read_text())
        library = manifest["layer"]["library_path"]
        manifest["layer"]["library_path"] = str(deploy / "lib" / os.path.basename(library))
        folder = root / f"{k}-{name[:-5]}"
        folder.mkdir()
        (folder / name).write_text(json.dumps(manifest))
        dirs.append(str(folder))
    return dirs


@functools.cache
def find_ml_sdk() -> tuple[MlSdk | None, str]:
    """``(sdk, why)``: the ML SDK pieces, or None and what is missing."""
    found, missing = _missing()
    if missing:
        return None, f"missing: {', '.join(missing)}; {INSTALL}"
    deploy = found["layers"]
    env = dict(os.environ)
    lib = str(deploy / "lib")
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, env.get("LD_LIBRARY_PATH")) if p)
    env["VK_LAYER_PATH"] = os.pathsep.join(_layer_dirs(deploy))
    env["VK_INSTANCE_LAYERS"] = ":".join(LAYERS)
    env["VK_ICD_FILENAMES"] = env["VK_DRIVER_FILES"] = str(found["icd"])
    sdk = MlSdk(str(found["scenario_runner"]), str(found["vgf_dump"]), env)
    return sdk, f"ML SDK scenario-runner over lavapipe ({found['icd'].name})"


@dataclass(frozen=True)
class TensorSlot:
    uid: str
    shape: tuple[int, ...]
    dtype: np.dtype


def _slot(tensor: dict, where: str) -> TensorSlot:
    dims, fmt = tensor.get("dims"), tensor.get("format")
    if (not isinstance(dims, list) or len(dims) > MAX_RANK
            or not all(isinstance(d, int) and 0 <= d < 2**31 for d in dims)):
        raise InvalidProgramError(f"{where}: a tensor's dims {str(dims)[:80]} are not a shape")
    if fmt not in FORMATS:
        raise InvalidProgramError(f"{where}: tensor format {str(fmt)[:60]!r} is not one of "
                                  f"{sorted(FORMATS)}")
    return TensorSlot(str(tensor.get("uid")), tuple(dims), np.dtype(FORMATS[fmt]))


class ScenarioGraph:
    """One VGF, run on the scenario-runner: ``run(inputs) -> outputs``."""

    def __init__(self, sdk: MlSdk, vgf: bytes, where: str) -> None:
        self.sdk, self.where = sdk, where
        self.dir = Path(tempfile.mkdtemp(prefix="edgetorch-vgf-"))
        atexit.register(shutil.rmtree, self.dir, True)
        (self.dir / "graph.vgf").write_bytes(vgf)
        self.scenario = self._template()
        self.inputs: list[TensorSlot] = []
        self.outputs: list[TensorSlot] = []
        resources = self.scenario.get("resources")
        if not isinstance(resources, list) or len(resources) > MAX_TENSORS:
            raise InvalidProgramError(f"{where}: the VGF's scenario template has no resource "
                                      "list (or too long a one)")
        for res in resources:
            tensor = res.get("tensor") if isinstance(res, dict) else None
            if isinstance(tensor, dict) and "src" in tensor:
                tensor["src"] = f"in{len(self.inputs)}.npy"
                self.inputs.append(_slot(tensor, where))
            elif isinstance(tensor, dict) and "dst" in tensor:
                tensor["dst"] = f"out{len(self.outputs)}.npy"
                self.outputs.append(_slot(tensor, where))
            elif isinstance(res, dict) and isinstance(res.get("graph"), dict):
                res["graph"]["src"] = "graph.vgf"
        (self.dir / "scenario.json").write_text(json.dumps(self.scenario))

    def _template(self) -> dict:
        out = self.dir / "template.json"
        proc = subprocess.run([self.sdk.vgf_dump, "--input", str(self.dir / "graph.vgf"),
                               "--output", str(out), "--scenario-template"],
                              capture_output=True, text=True, timeout=120, env=self.sdk.env)
        if proc.returncode != 0 or not out.is_file():
            raise InvalidProgramError(f"{self.where}: vgf_dump cannot read the delegate's VGF: "
                                      f"{(proc.stderr or proc.stdout)[-1500:].strip()}")
        template = json.loads(out.read_text())
        if not isinstance(template, dict):
            raise InvalidProgramError(f"{self.where}: vgf_dump wrote no scenario")
        return template

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.inputs):
            raise KernelError(f"{self.where}: {len(inputs)} inputs given, the VGF takes "
                              f"{len(self.inputs)}")
        for k, (arr, slot) in enumerate(zip(inputs, self.inputs, strict=True)):
            arr = np.asarray(arr)
            if arr.size != int(np.prod(slot.shape)) or arr.dtype.itemsize != slot.dtype.itemsize:
                raise KernelError(f"{self.where} input {k}: got {arr.dtype} {list(arr.shape)}, "
                                  f"the VGF takes {slot.dtype} {list(slot.shape)}")
            np.save(self.dir / f"in{k}.npy", np.ascontiguousarray(arr).view(slot.dtype)
                    .reshape(slot.shape), allow_pickle=False)
        for k in range(len(self.outputs)):
            (self.dir / f"out{k}.npy").unlink(missing_ok=True)
        proc = subprocess.run([self.sdk.scenario_runner, "--scenario", "scenario.json",
                               "--output", ".", "--log-level", "error"], cwd=self.dir,
                              capture_output=True, text=True, timeout=TIMEOUT_S, env=self.sdk.env)
        if proc.returncode != 0:
            raise KernelError(
                f"{self.where}: the scenario-runner failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout)[-2000:].strip()}; run with the backend option "
                "simulation='tosa' to use the TOSA simulation instead")
        results = []
        for k, slot in enumerate(self.outputs):
            got = np.load(self.dir / f"out{k}.npy", allow_pickle=False)
            if got.size != int(np.prod(slot.shape)) or got.dtype != slot.dtype:
                raise KernelError(f"{self.where} output {k}: the scenario-runner wrote "
                                  f"{got.dtype} {list(got.shape)}, the VGF declares "
                                  f"{slot.dtype} {list(slot.shape)}")
            results.append(got.reshape(slot.shape))
        return results
