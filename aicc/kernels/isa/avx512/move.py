"""avx512: the move kernels' spellings and tuning (kernels/move)."""
TABLE: dict = {}
