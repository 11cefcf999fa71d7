"""avx2: the pool kernels' spellings and tuning (kernels/pool)."""
TABLE: dict = {}
