"""Stoker's Python side: `stoker.torch.DataLoader` (see docs/torch.md). Importing this package
does not import torch; `import stoker.torch` does."""

__all__ = ["torch"]
__version__ = "0.1.0"
