"""The exceptions nbkit raises: one base class and five kinds, by what the user has to fix. Each also derives
from the builtin error callers that know only the standard library catch (ValueError, OSError, ...)."""


class NbkitError(Exception):
    """Base class of every error nbkit raises on purpose."""


class ParameterError(NbkitError, ValueError):
    """A value the user passed cannot be used: a notebook parameter or command-line option, or a
    notebook that cannot be made into a kernel bundle (missing, no code, does not parse), or a notebook's
    own `build_model()` whose outputs are not the data's classes."""


class DataError(NbkitError, OSError):
    """Files that hold data or models are missing, unreadable, damaged or do not fit: input records and
    their description, a saved model or weights file, a model package, a training checkpoint to resume."""


class AcceleratorError(NbkitError, RuntimeError):
    """The accelerator cannot be found or initialized, Keras or JAX was already set up in this process in
    a way that conflicts with the request, or distributed predictions disagree with the same model on
    one device (a library fault: nothing is written)."""


class SecretError(NbkitError, LookupError):
    """A secret is missing or cannot be read (the message says where to put it, never its value), or a
    notebook or bundle holds a secret value or a credential-shaped string that would leak."""


class RunError(NbkitError, RuntimeError):
    """Running elsewhere failed: the kaggle CLI could not push a bundle or report its status; a pushed
    kernel failed, was cancelled, ran past its time limit or lacks an expected output; or a process of a
    local multi-process launch failed, died or hung (the launch was stopped as a whole)."""
