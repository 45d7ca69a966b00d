# The seed tutorial (shared/seeds/003_081986171b0bb9c0.txt), sections 5 and 6: every code cell
# verbatim except that `executorch` is replaced by `edgetorch` in the imports. Cell 1 is a
# notebook shell command (`!pip install executorch`), not Python, and is left out.

# Verify installation
import torch
print(f"PyTorch version: {torch.__version__}")

try:
    from torch.export import export
    from edgetorch.exir import to_edge
    print("✓ ExecuTorch imported successfully!")
except ImportError as e:
    print(f"✗ Import error: {e}")
    print("\nTroubleshooting: ExecuTorch requires specific PyTorch versions.")
    print("Try: pip install executorch torch==2.4.0")

import torch
import torch.nn as nn

class TinyClassifier(nn.Module):
    """
    A small classifier for demonstration.
    Input: 20 features
    Output: 4 classes
    """
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(20, 64),
            nn.ReLU(),
            nn.Linear(64, 32),
            nn.ReLU(),
            nn.Linear(32, 4)
        )

    def forward(self, x):
        return self.layers(x)

# Create and set to eval mode
model = TinyClassifier()
model.eval()

# Test with sample input
sample_input = torch.randn(1, 20)
output = model(sample_input)

print(f"Model created successfully!")
print(f"Input shape:  {sample_input.shape}")
print(f"Output shape: {output.shape}")
print(f"Output:       {output}")

from torch.export import export

# Define example input for tracing
# Note: Input must be a tuple
example_inputs = (torch.randn(1, 20),)

# Export the model
exported_program = export(model, example_inputs)

print("✓ Export successful!")
print(f"Type: {type(exported_program).__name__}")

# View the exported graph
print("Exported Graph:")
print("=" * 50)
print(exported_program.graph_module.graph)

from edgetorch.exir import to_edge

# Convert to edge program
edge_program = to_edge(exported_program)

print("✓ Edge conversion successful!")
print(f"Type: {type(edge_program).__name__}")

# Compile to ExecuTorch
executorch_program = edge_program.to_executorch()

print("✓ ExecuTorch compilation successful!")
print(f"Buffer size: {len(executorch_program.buffer):,} bytes")
print(f"Buffer size: {len(executorch_program.buffer)/1024:.2f} KB")

import os

# Save to file
pte_path = "tiny_classifier.pte"

with open(pte_path, "wb") as f:
    f.write(executorch_program.buffer)

# Verify file
file_size = os.path.getsize(pte_path)
print(f"✓ Saved to: {pte_path}")
print(f"  File size: {file_size:,} bytes ({file_size/1024:.2f} KB)")

from edgetorch.runtime import Runtime

# Load the program
runtime = Runtime.get()
program = runtime.load_program(pte_path)

# Load the forward method
method = program.load_method("forward")

print("✓ Model loaded successfully!")

# Create test input
test_input = torch.randn(1, 20)

# Run inference
outputs = method.execute([test_input])

print(f"\nInference Results:")
print(f"Input shape:  {test_input.shape}")
print(f"Output shape: {outputs[0].shape}")
print(f"Output:       {outputs[0]}")

# Run same input through both
test_input = torch.randn(1, 20)

# PyTorch inference
with torch.no_grad():
    pytorch_output = model(test_input)

# ExecuTorch inference
executorch_output = method.execute([test_input])[0]

# Compare
print("Comparison: PyTorch vs ExecuTorch")
print("=" * 50)
print(f"PyTorch output:     {pytorch_output.numpy().flatten()}")
print(f"ExecuTorch output:  {executorch_output.numpy().flatten()}")

# Check if close (small numerical differences are normal due to floating point)
are_close = torch.allclose(pytorch_output, executorch_output, atol=1e-5)
print(f"\n✓ Outputs match: {are_close}")

if are_close:
    print("The ExecuTorch model produces identical results to PyTorch!")
else:
    max_diff = torch.max(torch.abs(pytorch_output - executorch_output)).item()
    print(f"Maximum difference: {max_diff}")

# ============================================================
# COMPLETE EXECUTORCH PIPELINE
# ============================================================

import torch
import torch.nn as nn
from torch.export import export
from edgetorch.exir import to_edge
import os

# 1. DEFINE MODEL
class TinyClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(20, 64),
            nn.ReLU(),
            nn.Linear(64, 32),
            nn.ReLU(),
            nn.Linear(32, 4)
        )

    def forward(self, x):
        return self.layers(x)

# 2. PREPARE MODEL
model = TinyClassifier()
model.eval()
print("Step 1: Model created")

# 3. EXPORT → EDGE → EXECUTORCH
example_inputs = (torch.randn(1, 20),)

exported = export(model, example_inputs)
print("Step 2: Model exported (ATen dialect)")

edge = to_edge(exported)
print("Step 3: Converted to Edge dialect")

et_program = edge.to_executorch()
print("Step 4: Compiled to ExecuTorch format")

# 4. SAVE
output_path = "model.pte"
with open(output_path, "wb") as f:
    f.write(et_program.buffer)

file_size = os.path.getsize(output_path)
print(f"Step 5: Saved to {output_path} ({file_size/1024:.2f} KB)")

print("\n" + "=" * 50)
print("✓ Model ready for edge deployment!")
print("=" * 50)

