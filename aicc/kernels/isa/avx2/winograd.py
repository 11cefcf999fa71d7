"""avx2: the winograd kernels' spellings and tuning (kernels/winograd)."""
TABLE: dict = {}
