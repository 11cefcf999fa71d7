"""Coverage-guided, structure-aware fuzzing of the compiler (atheris / libFuzzer).

    python -m tools.fuzz --seconds 60          # make fuzz (FUZZ_SECONDS=...)

Each case is a model and how it is built (the output path, --weights-file); it runs through
the CLI's entry in-process under a user's limits (harness.py); the custom mutator edits the
model's structure (mutate.py); findings are saved to tests/fuzz_corpus/ and replayed by
tests/test_fuzz_corpus.py. The supervisor (__main__.py) restarts the fuzzing process when a
case kills it (a native crash, a hang in native code) and saves that case too.
"""
from .harness import OUT_MODES, Case, Finding, run_case, try_case  # noqa: F401

CORPUS_NAME = "tests/fuzz_corpus"
