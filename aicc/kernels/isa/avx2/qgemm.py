"""avx2: the qgemm kernels' spellings and tuning (kernels/qgemm)."""
TABLE: dict = {}
