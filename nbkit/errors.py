"""The exceptions nbkit raises: one base class, one subclass per kind of mistake.

A value the user passed (a notebook parameter, a command-line option) is a ParameterError; files
that hold data are DataErrors; saved models are ModelErrors or, as a whole package, PackageErrors.
"""


class NbkitError(Exception):
    """Base class of every error nbkit raises on purpose."""


class ParameterError(NbkitError, ValueError):
    """A notebook parameter or command-line option has a value nbkit cannot use."""


class BackendError(NbkitError, RuntimeError):
    """Keras (or JAX) was already set up in this process in a way that conflicts with the request."""


class AcceleratorError(NbkitError, RuntimeError):
    """The requested accelerator cannot be found or initialized."""


class DataError(NbkitError, OSError):
    """Input data is missing, unreadable or not in the expected format."""


class ModelError(NbkitError, OSError):
    """A saved model or weights file (model.pt, a .weights.h5, a preset) is missing, damaged or does not fit."""


class PredictionError(NbkitError, RuntimeError):
    """Distributed predictions disagree with the same model on one device (a library fault): nothing is written."""


class ResumeError(NbkitError, RuntimeError):
    """A training checkpoint cannot be resumed: unreadable, incomplete, or made with other settings."""


class PackageError(NbkitError, OSError):
    """A model package is missing, incomplete, of another format version, or does not fit the data."""


class SecretError(NbkitError, LookupError):
    """A secret is missing or cannot be read; the message says where to put it, never its value."""


class LeakError(NbkitError, ValueError):
    """A notebook or bundle contains a secret value or a credential-shaped string."""


class BundleError(NbkitError, ValueError):
    """A notebook cannot be made into a kernel bundle (missing, no code, does not parse)."""


class PushError(NbkitError, RuntimeError):
    """The kaggle CLI could not push a bundle or report its status."""


class RunError(NbkitError, RuntimeError):
    """A pushed kernel failed, was cancelled, ran past its time limit, or lacks an expected output."""


class LaunchError(NbkitError, RuntimeError):
    """A process of a local multi-process launch failed, died or hung: the run was stopped as a whole."""
