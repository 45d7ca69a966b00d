"""Fully connected example models: the tutorial's two toy models and a deeper MLP."""

from __future__ import annotations

import torch
from torch import nn


class TinyClassifier(nn.Module):
    """The seed tutorial's TinyClassifier: 20 features -> 4 classes through two hidden layers."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(20, 64),
            nn.ReLU(),
            nn.Linear(64, 32),
            nn.ReLU(),
            nn.Linear(32, 4),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class SimpleModel(nn.Module):
    """The tutorial's SimpleModel: Linear(10, 32) -> ReLU -> Linear(32, 5)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear1 = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.linear2 = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.relu(self.linear1(x)))


class MLP(nn.Module):
    """An MNIST-sized MLP, 784 -> 256 -> 128 -> 10, mixing ReLU and GELU activations."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 128)
        self.act2 = nn.GELU()
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


def tiny_classifier() -> TinyClassifier:
    """Build the seeded TinyClassifier in eval mode."""
    torch.manual_seed(0)
    return TinyClassifier().eval()


def simple_model() -> SimpleModel:
    """Build the seeded SimpleModel in eval mode."""
    torch.manual_seed(0)
    return SimpleModel().eval()


def mlp() -> MLP:
    """Build the seeded MLP in eval mode."""
    torch.manual_seed(0)
    return MLP().eval()
