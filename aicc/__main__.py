"""`python -m aicc` runs the command line (the same as the `aicc` script)."""
from .cli import main

main()
