from .coreml_quantizer import CoreMLQuantizer

__all__ = ["CoreMLQuantizer"]
