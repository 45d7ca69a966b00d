"""Next-token choice from logits: greedy, or temperature + top-p (nucleus) sampling with a
seedable generator (ExecuTorch's llama2.c-style ``Sampler``, in NumPy)."""

from __future__ import annotations

import numpy as np

from ....errors import InvalidArgumentError


class Sampler:
    """``temperature == 0`` is argmax; otherwise softmax(logits / temperature) restricted to the
    smallest set of tokens whose probability passes ``top_p``, then one draw."""

    def __init__(self, temperature: float = 0.0, top_p: float = 0.9,
                 seed: int | None = None) -> None:
        if temperature < 0 or not np.isfinite(temperature):
            raise InvalidArgumentError(f"temperature must be a finite number >= 0, got "
                                       f"{temperature}; use 0 for greedy decoding")
        if not 0.0 < top_p <= 1.0:
            raise InvalidArgumentError(f"top_p must be in (0, 1], got {top_p}; use 1.0 to "
                                       "sample from the whole distribution")
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.rng = np.random.default_rng(seed)

    def seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def sample(self, logits: np.ndarray) -> int:
        logits = np.asarray(logits, dtype=np.float64).reshape(-1)
        if self.temperature == 0.0:
            return int(np.argmax(logits))
        z = logits / self.temperature
        probs = np.exp(z - z.max())
        probs /= probs.sum()
        if self.top_p < 1.0:
            order = np.argsort(-probs, kind="stable")
            cum = np.cumsum(probs[order])
            # Keep up to and including the token that carries the mass past top_p.
            keep = order[: int(np.searchsorted(cum, self.top_p, side="right")) + 1]
            mass = probs[keep]
            return int(keep[self.rng.choice(len(keep), p=mass / mass.sum())])
        return int(self.rng.choice(len(probs), p=probs))
