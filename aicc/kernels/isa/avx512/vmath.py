"""avx512: the vmath kernels' spellings and tuning (kernels/vmath)."""
TABLE: dict = {}
