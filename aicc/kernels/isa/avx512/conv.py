"""avx512: the conv kernels' spellings and tuning (kernels/conv)."""
TABLE: dict = {}
