"""Dynamic shapes: buckets of symbolic dims, padding analysis, per-bucket plans.

``symbols.py`` finds the model's symbolic dims and the bucket ladder of each; ``extent.py``
is the small expression language for "how many elements of this axis are real" (a function
of the actual dims, evaluated in Python and rendered as C); ``padrules.py`` holds, per op,
how padding along an axis travels through it (or why it cannot); ``padding.py`` is the pass
that propagates padding through a bucket's static graph and inserts the fills, scales and
run-time lengths that make the real region of every output exact; ``build.py`` compiles one
plan per bucket and writes the bundle.
"""
