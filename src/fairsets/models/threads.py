"""PyTorch's CPU operators on one thread for a block, so results do not depend on the thread count.

Their sums differ in the last bits with the number of intra-op threads; a fixed count makes a
result the same whatever the executor and the number of workers (which give the parallelism).
Used where fairsets promises the same numbers for any ``--workers``: the heads' labels
(``annotate classify``) and the persons audit's sparse autoencoder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["one_torch_thread"]


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``; the previous count is restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
