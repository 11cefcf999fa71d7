"""One exception family. The CLI prints ``str(err)`` on one line and exits with ``exit_code``."""


class AiccError(Exception):
    exit_code = 2


class ModelError(AiccError):
    """The model file is unreadable, invalid, or uses something aicc cannot compile."""


class UnsupportedError(ModelError):
    """Ops (or attributes) aicc cannot compile; lists every one at once."""


class ConfigError(AiccError):
    """A bad option, target or pipeline configuration."""


class OutputError(AiccError):
    """An output path aicc refuses to write to (see aicc/bundle/outdir.py)."""


class InputError(AiccError):
    """Run-time inputs with a wrong name, shape or dtype."""


class BuildError(AiccError):
    """The C compiler failed on a generated bundle (a bug in aicc)."""


class ValidationMismatch(AiccError):
    """Outputs differ from the reference beyond the tolerance."""

    exit_code = 1
